#!/usr/bin/python3
"""`make test`'s summary: how many CTest tests passed, failed and were skipped, and why each skip
happened -- including the GoogleTest cases skipped inside a black-box binary that passed as a
whole (such a binary is one CTest test; ctest alone would call it simply "Passed").

  tests/support/test_summary.py --junit build/last-test.xml [--seconds N]

Reads the JUnit file `ctest --output-junit` wrote (every test's status and output). Prints the
skipped tests and cases grouped by reason, then one line:
  make test: PASSED|FAILED (<n> tests: <p> passed, <f> failed, <s> skipped; <c> cases skipped inside
  passing binaries) in <N> s
Exits 0, or 1 when a test failed, 2 when the file cannot be read.
"""
import argparse
import collections
import re
import sys
import xml.etree.ElementTree as ElementTree

SKIPPED_CASE = re.compile(r'^\[  SKIPPED \] (\S+) \(')  # "[  SKIPPED ] Suite.Case (0 ms)"
SKIPPED_LISTED = re.compile(r'^\[  SKIPPED \] (\S+)$')  # gtest's closing list, "[  SKIPPED ] Suite.Case"
SKIP_SITE = re.compile(r':\d+: Skipped$')  # "path/file.cc:42: Skipped", the reason follows
GTEST_MARK = re.compile(r'^\[[ =A-Z-]{10}\]')  # "[ RUN      ]", "[       OK ]", "[----------]"...


def skipped_cases(output):
    """[(case, reason)] for every "[  SKIPPED ] case (..)" line of a GoogleTest binary's output.

    The reason is the message GTEST_SKIP printed after "file:line: Skipped", in the case itself or
    in its suite's SetUpTestSuite (printed before the suite's cases run)."""
    cases = []
    listed = []
    reason = None
    collecting = None
    for line in output.splitlines():
        m = SKIPPED_LISTED.match(line)
        if m:
            listed.append(m.group(1))
            continue
        if collecting is not None:
            if GTEST_MARK.match(line):
                reason = ' '.join(collecting).strip() or 'no reason given'
                collecting = None
            else:
                collecting.append(line.strip())
                continue
        if SKIP_SITE.search(line):
            collecting = []
            continue
        m = SKIPPED_CASE.match(line)
        if m:
            cases.append((m.group(1), reason or 'no reason given'))
        elif line.startswith(('[       OK ]', '[  FAILED  ]')):
            reason = None
    # A case whose own lines ctest cut from a long output still appears in gtest's closing list.
    seen = {case for case, _ in cases}
    cases += [(case, 'reason not in the captured output') for case in listed if case not in seen]
    return cases


def skip_reason(testcase, output):
    """Why ctest skipped a whole test: the GTEST_SKIP message, a "SKIP: ..." line, or ctest's word."""
    cases = skipped_cases(output)
    if cases:
        return cases[0][1]
    for line in output.splitlines():
        if line.startswith('SKIP:'):
            return line[len('SKIP:'):].strip()
    skipped = testcase.find('skipped')
    if skipped is not None and skipped.get('message'):
        return skipped.get('message')
    return 'no reason given'


def summarize(root):
    counts = collections.Counter()
    skips = collections.defaultdict(list)  # reason -> [test or "binary: case"]
    inner = 0
    for testcase in root.iter('testcase'):
        name = testcase.get('name', '?')
        status = testcase.get('status', '')
        out = testcase.find('system-out')
        output = out.text or '' if out is not None else ''
        if status == 'run':
            counts['passed'] += 1
            for case, reason in skipped_cases(output):
                skips[reason].append(f'{name}: {case}')
                inner += 1
        elif status == 'fail':
            counts['failed'] += 1
        elif status == 'disabled':
            counts['disabled'] += 1
        else:  # notrun: skipped (SKIP_RETURN_CODE, SKIP_REGULAR_EXPRESSION) or not run
            counts['skipped'] += 1
            skips[skip_reason(testcase, output)].append(name)
    return counts, skips, inner


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--junit', required=True)
    parser.add_argument('--seconds', type=int)
    args = parser.parse_args(argv)
    try:
        root = ElementTree.parse(args.junit).getroot()
    except (OSError, ElementTree.ParseError) as e:
        print(f'make test: no readable test results in {args.junit}: {e}')
        return 2
    counts, skips, inner = summarize(root)
    if skips:
        print('make test: skipped, by reason:')
        for reason, names in sorted(skips.items(), key=lambda item: -len(item[1])):
            print(f'  {len(names)} x {reason}')
            for n in sorted(names):
                print(f'      {n}')
    total = sum(counts.values())
    verdict = 'FAILED' if counts['failed'] else 'PASSED'
    parts = [f'{counts["passed"]} passed', f'{counts["failed"]} failed', f'{counts["skipped"]} skipped']
    if counts['disabled']:
        parts.append(f'{counts["disabled"]} disabled')
    line = f'make test: {verdict} ({total} tests: {", ".join(parts)}; {inner} cases skipped inside passing binaries'
    line += ', reasons above)' if skips else ')'
    if args.seconds is not None:
        line += f' in {args.seconds} s'
    print(line)
    return 1 if counts['failed'] else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
