#!/usr/bin/python3
"""Checks that every CTest test of a build carries exactly one tier label, so `ctest -L <tier>`
selects whole tiers and no test falls outside them.

  tests/support/check_test_tiers.py --build-dir build [--ctest ctest] [--tiers unit,blackbox,...]

Reads `ctest --show-only=json-v1` (which includes the cases gtest_discover_tests found), prints
one line per test without exactly one tier, and exits 1 if there is any; 0 otherwise.
"""
import argparse
import json
import subprocess
import sys

DEFAULT_TIERS = 'unit,blackbox,parity,tools,fuzz'


def labels_of(test):
    for prop in test.get('properties', []):
        if prop.get('name') == 'LABELS':
            value = prop.get('value')
            return value if isinstance(value, list) else [value]
    return []


def problems(tests, tiers):
    """One line per test whose labels hold no tier or more than one."""
    found = []
    for test in tests:
        labels = labels_of(test)
        own = [label for label in labels if label in tiers]
        if len(own) != 1:
            shown = ', '.join(labels) if labels else 'no labels'
            found.append(f'{test["name"]}: labels ({shown}) must hold exactly one tier of {", ".join(sorted(tiers))}')
    return found


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--build-dir', required=True)
    parser.add_argument('--ctest', default='ctest')
    parser.add_argument('--tiers', default=DEFAULT_TIERS)
    args = parser.parse_args(argv)
    tiers = set(args.tiers.split(','))
    shown = subprocess.run([args.ctest, '--test-dir', args.build_dir, '--show-only=json-v1'],
                           capture_output=True, text=True, check=False)
    if shown.returncode != 0:
        print(f'check_test_tiers: ctest --show-only failed: {shown.stderr.strip()}', file=sys.stderr)
        return 2
    tests = json.loads(shown.stdout).get('tests', [])
    if not tests:
        print('check_test_tiers: the build registers no tests', file=sys.stderr)
        return 1
    found = problems(tests, tiers)
    for line in found:
        print(line)
    if found:
        print(f'check_test_tiers: {len(found)} of {len(tests)} tests without exactly one tier', file=sys.stderr)
        return 1
    counts = {tier: sum(1 for t in tests if tier in labels_of(t)) for tier in sorted(tiers)}
    print(f'check_test_tiers: every one of {len(tests)} tests has one tier: '
          + ', '.join(f'{tier} {n}' for tier, n in counts.items()))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
