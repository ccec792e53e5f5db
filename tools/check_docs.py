#!/usr/bin/python3
"""Checks the tables in docs/ that the code defines against the code, so the docs cannot drift.

  docs/api.md            | method | path | access | listeners |    server::RouteTable()
  docs/api.md            | RPC | access |                         server::RpcTable()
  docs/api.md            | status | error_type | gRPC | kind | when |   kErrorKinds (common/error.h)
  docs/api.md            | HTTP | gRPC |                          kErrorKinds, grouped by gRPC code
  docs/configuration.md  | flag | env | default | meaning |       `tide serve --help`
  docs/configuration.md  | parameter | default | meaning |        TideParameters::Keys()

It also checks that every relative link in docs/*.md and README.md names a file that exists and,
with #anchor, one of its headings.

The code's routes, RPCs, error kinds and parameter keys come from tools/doc_tables (a C++ program
that prints them); the flags, their environment twins and defaults from `tide serve --help`.
Every row the code has must be in the docs and every row in the docs must be in the code; each
difference is printed naming the page, the table and the row. Exit status 1 when any differs.

  check_docs.py --docs DIR (--doc-tables BINARY | --tables-file FILE) (--tide BINARY | --help-file FILE)
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

ROUTES = ('api.md', ['method', 'path', 'access', 'listeners'])
RPCS = ('api.md', ['RPC', 'access'])
ERRORS = ('api.md', ['status', 'error_type', 'gRPC', 'kind', 'when'])
HTTP_TO_GRPC = ('api.md', ['HTTP', 'gRPC'])
FLAGS = ('configuration.md', ['flag', 'env', 'default', 'meaning'])
PARAMETERS = ('configuration.md', ['parameter', 'default', 'meaning'])


def split_row(line):
    """Cells of a markdown table row; `\\|` is a literal bar, backticks are dropped."""
    cells = re.split(r'(?<!\\)\|', line.strip())[1:-1]
    return [c.replace('\\|', '|').strip() for c in cells]


def plain(cell):
    return cell.replace('`', '').strip()


def find_table(text, header):
    """The body rows (lists of cells) of the first table whose header row starts with `header`."""
    lines = text.split('\n')
    for i, line in enumerate(lines):
        if line.startswith('|') and [plain(c) for c in split_row(line)][:len(header)] == header:
            rows = []
            for body in lines[i + 2:]:
                if not body.startswith('|'):
                    break
                rows.append(split_row(body))
            return rows
    return None


def parse_help(text):
    """{flag: (env or None, default or None)} from CLI11's --help of `tide serve`."""
    flags = {}
    for line in text.split('\n'):
        m = re.match(r'^\s+(?:-\w,)?--([a-z0-9][a-z0-9-]*)\b(.*)$', line)
        if not m or m.group(1) == 'help':
            continue
        rest = m.group(2)
        env = re.search(r'\(Env:(\w+)\)', rest)
        default = re.search(r'=(\S+)\s+(?:\(Env|$)', rest)
        flags['--' + m.group(1)] = (env.group(1) if env else None, default.group(1) if default else None)
    return flags


def parse_tables(text):
    out = {'route': set(), 'rpc': set(), 'error': set(), 'parameter': []}
    for line in text.split('\n'):
        if not line.strip():
            continue
        kind, *cells = line.split('\t')
        if kind == 'parameter':
            out[kind].append(cells[0])
        else:
            out[kind].add(tuple(cells))
    return out


def compare(problems, where, code_rows, doc_rows, show):
    for row in sorted(code_rows - doc_rows):
        problems.append(f'{where}: missing row {show(row)} (the code has it, the docs do not)')
    for row in sorted(doc_rows - code_rows):
        problems.append(f'{where}: extra row {show(row)} (the docs have it, the code does not)')


# A default as the docs write it: the raw value, or the same number in KiB/MiB/GiB, true/false for 1/0.
def default_written(value, cell):
    text = plain(cell)
    forms = {value}
    if value in ('1', 'true'):
        forms |= {'true', 'on'}
    if value in ('0', 'false'):
        forms |= {'false', 'off', '0'}
    if re.fullmatch(r'\d+', value):
        n = int(value)
        for unit, size in (('KiB', 1024), ('MiB', 1024 ** 2), ('GiB', 1024 ** 3)):
            if n and n % size == 0:
                forms.add(f'{n // size} {unit}')
    return any(re.search(r'(?<![\w.])' + re.escape(f) + r'(?![\w.])', text) for f in forms)


def check(docs, tables, help_text):
    problems = []
    pages = {}

    def table(spec):
        page, header = spec
        if page not in pages:
            path = Path(docs) / page
            pages[page] = path.read_text() if path.exists() else ''
        rows = find_table(pages[page], header)
        if rows is None:
            problems.append(f'docs/{page}: no table with the header | {" | ".join(header)} |')
            return []
        return rows

    # Routes: every (method, path, access, listeners).
    doc_routes = {tuple(plain(c) for c in r[:4]) for r in table(ROUTES) if len(r) >= 4}
    compare(problems, 'docs/api.md route table', tables['route'], doc_routes, lambda r: ' '.join(r))
    doc_rpcs = {tuple(plain(c) for c in r[:2]) for r in table(RPCS) if len(r) >= 2}
    compare(problems, 'docs/api.md RPC table', tables['rpc'], doc_rpcs, lambda r: ' '.join(r))
    # Errors: the docs' columns are status, error_type, gRPC, kind; the code prints kind first.
    doc_errors = {(plain(r[3]), plain(r[0]), plain(r[1]), plain(r[2])) for r in table(ERRORS) if len(r) >= 4}
    compare(problems, 'docs/api.md error table', tables['error'], doc_errors,
            lambda r: f'kind {r[0]}: {r[1]} {r[2]} {r[3]}')

    # The gRPC section's summary: each gRPC code with every HTTP status answered with it.
    grouped = {}
    for _, http, _, grpc in tables['error']:
        grouped.setdefault(grpc, set()).add(int(http))
    code_summary = {(', '.join(str(h) for h in sorted(v)), k) for k, v in grouped.items()}
    doc_summary = {(', '.join(re.findall(r'\d+', r[0])), plain(r[1])) for r in table(HTTP_TO_GRPC) if len(r) >= 2}
    compare(problems, 'docs/api.md HTTP-to-gRPC table', code_summary, doc_summary, lambda r: f'{r[0]} -> {r[1]}')

    # Flags: a row may name several flags (`--host` / `--port`); its env cell names their twins.
    flags = parse_help(help_text)
    documented = {}
    for r in table(FLAGS):
        if len(r) < 3:
            continue
        names = re.findall(r'--[a-z0-9][a-z0-9-]*', r[0])
        envs = re.findall(r'TIDE_\w+', r[1])
        for i, name in enumerate(names):
            if name in documented:
                problems.append(f'docs/configuration.md flag table: {name} has two rows')
            documented[name] = (envs, r[2], len(names))
    for name in sorted(set(flags) - set(documented)):
        problems.append(f'docs/configuration.md flag table: missing row {name} (tide serve --help has it)')
    for name in sorted(set(documented) - set(flags)):
        problems.append(f'docs/configuration.md flag table: extra row {name} (not a flag of tide serve)')
    for name in sorted(set(documented) & set(flags)):
        env, default = flags[name]
        envs, default_cell, shared = documented[name]
        if env is not None and env not in envs:
            problems.append(f'docs/configuration.md flag table: {name}: env {env} is not in its row ({", ".join(envs) or "none"})')
        if shared == 1 and default is not None and not default_written(default, default_cell):
            problems.append(f'docs/configuration.md flag table: {name}: default {default} '
                            f'(tide serve --help) is not in its row ("{plain(default_cell)}")')

    # Parameters: every key in a first cell (`a` / `b` rows name several); an alias may instead be
    # named anywhere in the row of the key it stands for.
    param_rows = table(PARAMETERS)
    doc_keys = set()
    row_text = ''
    for r in param_rows:
        doc_keys |= set(re.findall(r'`([a-z0-9_]+)`', r[0]))
        row_text += ' '.join(r) + '\n'
    code_keys = set(tables['parameter'])
    for key in sorted(code_keys - doc_keys):
        if param_rows and re.search(r'(?<![\w])' + re.escape(key) + r'(?![\w])', row_text):
            continue  # an alias, named in its key's row
        problems.append(f'docs/configuration.md parameter table: missing row {key} (TideParameters::Keys() has it)')
    for key in sorted(doc_keys - code_keys):
        problems.append(f'docs/configuration.md parameter table: extra row {key} (not a key TideParameters accepts)')
    return problems


def github_anchor(heading):
    text = re.sub(r'[^\w\- ]', '', heading.strip().lstrip('#').strip().lower())
    return text.replace(' ', '-')


def check_links(pages):
    """Every relative link of `pages` (paths of markdown files) names a file that exists and, with
    #anchor, a heading of that file. Links inside code blocks and to other sites are not checked."""
    problems = []
    anchors = {}

    def anchors_of(path):
        if path not in anchors:
            found, in_code = set(), False
            for line in path.read_text().split('\n'):
                if line.startswith('```'):
                    in_code = not in_code
                elif not in_code and re.match(r'^#{1,6} ', line):
                    found.add(github_anchor(line))
            anchors[path] = found
        return anchors[path]

    for page in pages:
        in_code = False
        for n, line in enumerate(page.read_text().split('\n'), 1):
            if line.startswith('```'):
                in_code = not in_code
                continue
            if in_code:
                continue
            for target in re.findall(r'\]\(([^)\s]+)\)', line):
                if re.match(r'^[a-z]+:', target):
                    continue
                path, _, anchor = target.partition('#')
                dest = (page.parent / path).resolve() if path else page
                if not dest.exists():
                    problems.append(f'{page.name}:{n}: link to {target}: no such file')
                elif anchor and dest.suffix == '.md' and anchor not in anchors_of(dest):
                    problems.append(f'{page.name}:{n}: link to {target}: no such heading')
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--docs', required=True)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument('--doc-tables', help='the doc_tables program')
    src.add_argument('--tables-file')
    cli = ap.add_mutually_exclusive_group(required=True)
    cli.add_argument('--tide', help='the tide binary')
    cli.add_argument('--help-file')
    a = ap.parse_args()
    tables_text = (subprocess.run([a.doc_tables], check=True, capture_output=True, text=True).stdout
                   if a.doc_tables else Path(a.tables_file).read_text())
    help_text = (subprocess.run([a.tide, 'serve', '--help'], check=True, capture_output=True, text=True).stdout
                 if a.tide else Path(a.help_file).read_text())
    tables = parse_tables(tables_text)
    if not tables['route'] or not tables['rpc'] or not tables['error'] or not tables['parameter']:
        print('check_docs: the code printed an empty table', file=sys.stderr)
        return 1
    if not parse_help(help_text):
        print('check_docs: no flags in tide serve --help', file=sys.stderr)
        return 1
    problems = check(a.docs, tables, help_text)
    readme = Path(a.docs).resolve().parent / 'README.md'
    problems += check_links(sorted(Path(a.docs).glob('*.md')) + ([readme] if readme.exists() else []))
    for p in problems:
        print(p)
    counts = (f"{len(tables['route'])} routes, {len(tables['rpc'])} RPCs, {len(tables['error'])} error kinds, "
              f"{len(parse_help(help_text))} flags, {len(tables['parameter'])} parameter keys")
    if problems:
        print(f'check_docs: {len(problems)} difference(s) between docs/ and the code ({counts})')
        return 1
    print(f'check_docs: docs/ agree with the code ({counts})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
