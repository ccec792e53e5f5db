#!/usr/bin/python3
"""Self-test of make test's reporting: test_summary.py (skips and their reasons, from ctest's JUnit
file) and check_test_tiers.py (one tier label per test)."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_test_tiers  # noqa: E402
import test_summary  # noqa: E402

# GoogleTest 1.12's output for a binary with one skipped case among others (a black-box binary,
# registered as one CTest test).
BINARY_OUTPUT = """Running main() from ./googletest/src/gtest_main.cc
[==========] Running 3 tests from 1 test suite.
[----------] 3 tests from Plain
[ RUN      ] Plain.Skips
tests/blackbox/x_test.cc:5: Skipped
built without gRPC

[  SKIPPED ] Plain.Skips (0 ms)
[ RUN      ] Plain.Runs
[       OK ] Plain.Runs (0 ms)
[ RUN      ] Plain.SkipsSilently
tests/blackbox/x_test.cc:9: Skipped

[  SKIPPED ] Plain.SkipsSilently (0 ms)
[----------] 3 tests from Plain (0 ms total)
[==========] 3 tests from 1 test suite ran. (0 ms total)
[  PASSED  ] 1 test.
[  SKIPPED ] 2 tests, listed below:
[  SKIPPED ] Plain.Skips
[  SKIPPED ] Plain.SkipsSilently
"""

JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)" tests="4" failures="1" disabled="0" skipped="1">
  <testcase name="tide_serve_x_test" status="run"><system-out>{binary}</system-out></testcase>
  <testcase name="Suite.Case" status="run"><system-out>[ RUN      ] Suite.Case
[       OK ] Suite.Case (0 ms)</system-out></testcase>
  <testcase name="tide_dashboard_browser_test" status="notrun">
    <skipped message="SKIP_RETURN_CODE=77"/>
    <system-out>SKIP: /usr/bin/chromium not found</system-out>
  </testcase>
  <testcase name="Broken.Case" status="fail"><failure message="Failed"/><system-out>boom</system-out></testcase>
</testsuite>
"""


class SkippedCasesTest(unittest.TestCase):
    def test_each_skipped_case_with_its_reason(self):
        self.assertEqual(test_summary.skipped_cases(BINARY_OUTPUT),
                         [('Plain.Skips', 'built without gRPC'), ('Plain.SkipsSilently', 'no reason given')])

    def test_a_case_cut_from_the_output_is_found_in_the_closing_list(self):
        cut = '[ RUN      ] A.B\n[This part of the test output was removed]\n[  PASSED  ] 1 test.\n' \
              '[  SKIPPED ] 1 test, listed below:\n[  SKIPPED ] A.C\n'
        self.assertEqual(test_summary.skipped_cases(cut), [('A.C', 'reason not in the captured output')])

    def test_a_passing_case_has_no_skip(self):
        self.assertEqual(test_summary.skipped_cases('[ RUN      ] A.B\n[       OK ] A.B (1 ms)\n'), [])


class SummaryTest(unittest.TestCase):
    def run_summary(self, text):
        with tempfile.NamedTemporaryFile('w', suffix='.xml', delete=False) as f:
            f.write(text)
        try:
            from io import StringIO
            from contextlib import redirect_stdout
            out = StringIO()
            with redirect_stdout(out):
                rc = test_summary.main(['--junit', f.name, '--seconds', '7'])
            return rc, out.getvalue()
        finally:
            os.unlink(f.name)

    def test_counts_skips_inside_passing_binaries_and_names_reasons(self):
        from xml.sax.saxutils import escape
        rc, out = self.run_summary(JUNIT.format(binary=escape(BINARY_OUTPUT)))
        self.assertEqual(rc, 1)  # one test failed
        last = out.strip().splitlines()[-1]
        self.assertEqual(last, 'make test: FAILED (4 tests: 2 passed, 1 failed, 1 skipped; '
                               '2 cases skipped inside passing binaries, reasons above) in 7 s')
        self.assertIn('1 x built without gRPC', out)
        self.assertIn('tide_serve_x_test: Plain.Skips', out)
        self.assertIn('1 x /usr/bin/chromium not found', out)
        self.assertIn('tide_dashboard_browser_test', out)

    def test_all_passed(self):
        rc, out = self.run_summary('<testsuite><testcase name="A.B" status="run"><system-out>'
                                   '[       OK ] A.B (0 ms)</system-out></testcase></testsuite>')
        self.assertEqual(rc, 0)
        self.assertEqual(out.strip(), 'make test: PASSED (1 tests: 1 passed, 0 failed, 0 skipped; '
                                      '0 cases skipped inside passing binaries) in 7 s')

    def test_unreadable_results(self):
        rc, out = self.run_summary('not xml')
        self.assertEqual(rc, 2)
        self.assertIn('no readable test results', out)


class TiersTest(unittest.TestCase):
    TIERS = {'unit', 'blackbox', 'parity', 'tools', 'fuzz'}

    @staticmethod
    def entry(name, labels):
        props = [{'name': 'LABELS', 'value': labels}] if labels is not None else []
        return {'name': name, 'properties': props}

    def test_exactly_one_tier(self):
        tests = [self.entry('a', ['unit', 'guard']), self.entry('b', ['blackbox']),
                 self.entry('c', None), self.entry('d', ['guard']), self.entry('e', ['unit', 'parity'])]
        found = check_test_tiers.problems(tests, self.TIERS)
        self.assertEqual([line.split(':')[0] for line in found], ['c', 'd', 'e'])
        self.assertIn('no labels', found[0])


if __name__ == '__main__':
    unittest.main()
