#!/usr/bin/python3
"""Checks tide's layering: every #include of a src/ folder's header, and every tide_library's DEPS,
against the table in tools/layers.txt (see the comment at its top for the rule). The table lists
each folder's DIRECT dependencies and the check compares declarations, not reachability: a folder
may include only its own headers and those of the folders its line names; every folder its line
names must be included by it somewhere (no stale declaration); and with --declared, each library
links only folders its line names, and the libraries of a folder together link every folder it
includes (nothing arrives by another library's PUBLIC link).

  tools/check_layers.py [--src src] [--table tools/layers.txt] [--declared build/tide_layers_declared.txt]

--declared is the file the top-level CMakeLists.txt writes at configure time ("<library> <folder>:
<deps>" per tide_library); without it only the includes are checked.
Prints one line per violation, "<file>:<line>: <what>", and exits 1 if there is any; 0 otherwise;
2 for a malformed table (unknown folder, cycle).
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')
# Leaves of the graph: nothing depends on them, so they may use any library they link.
EXEMPT = re.compile(r'(_test|_benchmark|_fuzz)\.(cc|cpp)$')
SOURCE = re.compile(r'\.(h|hpp|cc|cpp)$')
# Test-only headers (fakes, references) live in a folder's testing/ subfolder: only tests,
# benchmarks, fuzz targets and other testing/ headers may include them.
TESTING = re.compile(r'(^|/)testing/')


class TableError(Exception):
    pass


def read_table(path):
    """{folder: [direct deps]} in file order, from "<folder>: <dep> <dep> ..." lines."""
    table = {}
    with open(path, encoding='utf-8') as f:
        for number, raw in enumerate(f, 1):
            line = raw.split('#', 1)[0].strip()
            if not line:
                continue
            folder, sep, deps = line.partition(':')
            folder = folder.strip()
            if not sep or not folder:
                raise TableError(f'{path}:{number}: expected "<folder>: <folders>", got "{raw.rstrip()}"')
            if folder in table:
                raise TableError(f'{path}:{number}: {folder} is listed twice')
            table[folder] = deps.split()
    for folder, deps in table.items():
        for dep in deps:
            if dep not in table:
                raise TableError(f'{path}: {folder} uses {dep}, which has no line of its own')
            if dep == folder:
                raise TableError(f'{path}: {folder} lists itself')
    return table


def closures(table, path):
    """{folder: every folder it may use}, raising TableError on a cycle."""
    done = {}

    def visit(folder, stack):
        if folder in done:
            return done[folder]
        if folder in stack:
            cycle = stack[stack.index(folder):] + [folder]
            raise TableError(f'{path}: cycle {" -> ".join(cycle)}')
        reach = set()
        for dep in table[folder]:
            reach.add(dep)
            reach |= visit(dep, stack + [folder])
        done[folder] = reach
        return reach

    for folder in table:
        visit(folder, [])
    return done


def folder_of(path, table):
    """The table folder a path ("server/http/router.h") lies in: the longest matching prefix."""
    best = None
    for folder in table:
        if path == folder or path.startswith(folder + '/'):
            if best is None or len(folder) > len(best):
                best = folder
    return best


def check_includes(src, table, label_root, table_path):
    """Includes against the table's direct dependencies; also {folder: folders it includes}."""
    problems = []
    used = {}
    seen = set()
    top_dirs = {d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))}
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for name in sorted(filenames):
            if not SOURCE.search(name) or EXEMPT.search(name):
                continue
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, src).replace(os.sep, '/')
            shown = os.path.relpath(full, label_root)
            own = folder_of(rel, table)
            if own is None:
                problems.append(f'{shown}:1: its folder is not in the layer table')
                continue
            seen.add(own)
            with open(full, encoding='utf-8', errors='replace') as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    included = m.group(1)
                    if included.split('/', 1)[0] not in top_dirs or '/' not in included:
                        continue  # a system or third-party header, or one of the folder's own by bare name
                    target = folder_of(included, table)
                    if TESTING.search(included) and not TESTING.search(rel):
                        problems.append(f'{shown}:{number}: "{included}" is test-only; non-test code may not '
                                        f'include a testing/ header')
                        continue
                    if target is None:
                        problems.append(f'{shown}:{number}: "{included}" is in no folder of the layer table')
                    elif target != own and target not in table[own]:
                        allowed = ' '.join(table[own]) or 'nothing'
                        problems.append(f'{shown}:{number}: {own} may not include "{included}" '
                                        f'({target} is not among its direct dependencies in the layer table: '
                                        f'{allowed}; declare it there and in its CMake DEPS)')
                    elif target != own:
                        used.setdefault(own, set()).add(target)
    for folder, deps in table.items():
        for dep in deps:
            if dep not in used.get(folder, set()) and folder in seen:
                problems.append(f'{os.path.basename(table_path)}: {folder} declares {dep}, '
                                f'but no file of {folder} includes a header of it')
    return problems, used


def check_declared(path, table, used):
    """DEPS of each tide_library (as CMakeLists.txt wrote them) against the table's direct
    dependencies, and every folder a folder includes linked by one of its libraries."""
    problems = []
    libraries = {}
    entries = []
    with open(path, encoding='utf-8') as f:
        for number, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith('#'):
                continue
            head, _, deps = line.partition(':')
            name, _, folder = head.strip().partition(' ')
            libraries[name] = folder.strip()
            entries.append((number, name, folder.strip(), deps.split()))
    linked = {}
    for number, name, folder, deps in entries:
        if folder not in table:
            problems.append(f'{path}:{number}: {name}: folder {folder} is not in the layer table')
            continue
        for dep in deps:
            dep_folder = libraries.get(dep)
            if dep_folder is None or dep_folder == folder:
                continue  # not a tide_library (absl::..., Boost::boost), or the same folder
            linked.setdefault(folder, set()).add(dep_folder)
            if dep_folder not in table[folder]:
                problems.append(f'{path}:{number}: {name} ({folder}) links {dep} ({dep_folder}), '
                                f'which is not among {folder}\'s direct dependencies in the layer table')
    for folder, targets in sorted(used.items()):
        if folder not in linked and not any(f == folder for _, _, f, _ in entries):
            continue  # a folder without a tide_library of its own (nothing to link)
        for target in sorted(targets - linked.get(folder, set())):
            problems.append(f'{path}: {folder} includes headers of {target} but none of its libraries '
                            f'lists a {target} library in DEPS')
    return problems


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    parser.add_argument('--src', default=os.path.join(root, 'src'))
    parser.add_argument('--table', default=os.path.join(here, 'layers.txt'))
    parser.add_argument('--declared')
    args = parser.parse_args(argv)
    try:
        table = read_table(args.table)
        closures(table, args.table)  # no cycles
    except TableError as e:
        print(f'check_layers: {e}', file=sys.stderr)
        return 2
    label_root = os.path.dirname(os.path.abspath(args.src))
    problems, used = check_includes(args.src, table, label_root, args.table)
    if args.declared:
        problems += check_declared(args.declared, table, used)
    for p in problems:
        print(p)
    if problems:
        print(f'check_layers: {len(problems)} violation(s) of {args.table}', file=sys.stderr)
        return 1
    print(f'check_layers: every include under {args.src} follows {args.table}'
          + (' and so does every DEPS' if args.declared else ''))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
