#!/usr/bin/python3
"""Self-test of tools/check_layers.py on small trees written to a temporary folder: a wrong-way
include, a wrong-way DEPS, a cycle in the table and an unlisted folder must fail with file:line;
a use the table does not declare directly (transitive only), a stale declaration and an include
no DEPS links must fail too; the allowed cases (own folder, declared use, tests, third-party
headers) must pass."""
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_layers  # noqa: E402

TABLE = """# bottom to top
base:
mid:        base
top/part:   mid base
"""


class CheckLayersTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.write('layers.txt', TABLE)
        self.write('src/base/base.h', '#pragma once\n#include <vector>\n#include "absl/status/status.h"\n')
        self.write('src/mid/mid.h', '#pragma once\n#include "base/base.h"\n')
        self.write('src/top/part/part.cc', '#include "top/part/part.h"\n#include "base/base.h"\n#include "mid/mid.h"\n')
        self.write('src/top/part/part.h', '#pragma once\n')

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, rel, text):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w', encoding='utf-8') as f:
            f.write(text)
        return path

    def run_check(self, *extra):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = check_layers.main(['--src', os.path.join(self.root, 'src'),
                                    '--table', os.path.join(self.root, 'layers.txt'), *extra])
        return rc, out.getvalue() + err.getvalue()

    def test_allowed_tree_passes(self):
        rc, out = self.run_check()
        self.assertEqual(rc, 0, out)

    def test_wrong_way_include_fails_with_file_and_line(self):
        self.write('src/base/clock.h', '#pragma once\n\n#include "mid/mid.h"\n')
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn(os.path.join('src', 'base', 'clock.h') + ':3: base may not include "mid/mid.h"', out)

    def test_testing_header_only_from_tests_and_testing_headers(self):
        self.write('src/mid/testing/fake.h', '#pragma once\n#include "base/testing/ref.h"\n')
        self.write('src/base/testing/ref.h', '#pragma once\n')
        self.write('src/mid/mid_test.cc', '#include "mid/testing/fake.h"\n')
        rc, out = self.run_check()
        self.assertEqual(rc, 0, out)
        self.write('src/top/part/prod.cc', '#include "top/part/part.h"\n#include "mid/testing/fake.h"\n')
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn(os.path.join('src', 'top', 'part', 'prod.cc') + ':2: "mid/testing/fake.h" is test-only', out)

    def test_upward_include_into_a_nested_folder_fails(self):
        self.write('src/mid/flag_user.h', '#pragma once\n#include "top/part/part.h"\n')
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn('flag_user.h:2: mid may not include "top/part/part.h" (top/part is not among its direct dependencies', out)

    def test_angle_bracket_include_is_checked_too(self):
        self.write('src/base/x.cc', '#include <mid/mid.h>\n')
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn('x.cc:1:', out)

    def test_tests_benchmarks_and_fuzzers_are_leaves(self):
        for name in ('base/base_test.cc', 'base/base_benchmark.cc', 'base/base_fuzz.cc'):
            self.write('src/' + name, '#include "top/part/part.h"\n')
        rc, out = self.run_check()
        self.assertEqual(rc, 0, out)

    def test_transitive_use_must_be_declared(self):
        # top/part reaches base through mid, but uses it directly: its line must say so.
        self.write('layers.txt', TABLE.replace('top/part:   mid base', 'top/part:   mid'))
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn('part.cc:2: top/part may not include "base/base.h" (base is not among its direct '
                      'dependencies in the layer table: mid', out)

    def test_a_declared_folder_that_is_never_included_is_stale(self):
        self.write('src/top/part/part.cc', '#include "top/part/part.h"\n#include "mid/mid.h"\n')
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn('top/part declares base, but no file of top/part includes a header of it', out)

    def test_a_folder_must_link_what_it_includes(self):
        declared = self.write('declared.txt', 'tide_base base:\ntide_mid mid: tide_base\ntide_part top/part: tide_mid\n')
        rc, out = self.run_check('--declared', declared)
        self.assertEqual(rc, 1, out)
        self.assertIn('top/part includes headers of base but none of its libraries lists a base library', out)

    def test_folder_missing_from_the_table_fails(self):
        self.write('src/extra/extra.h', '#pragma once\n')
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn('extra.h:1: its folder is not in the layer table', out)

    def test_include_of_an_unlisted_folder_fails(self):
        os.makedirs(os.path.join(self.root, 'src', 'top', 'other'))
        self.write('src/top/part/y.h', '#include "top/other/z.h"\n')
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn('y.h:1: "top/other/z.h" is in no folder of the layer table', out)

    def test_cycle_in_the_table_is_an_error(self):
        self.write('layers.txt', 'base: mid\nmid: base\ntop/part: mid\n')
        rc, out = self.run_check()
        self.assertEqual(rc, 2, out)
        self.assertIn('cycle', out)

    def test_dependency_without_a_line_is_an_error(self):
        self.write('layers.txt', TABLE + 'late: nowhere\n')
        rc, out = self.run_check()
        self.assertEqual(rc, 2, out)
        self.assertIn('nowhere', out)

    def test_declared_deps_against_the_table(self):
        declared = self.write('declared.txt',
                              '# comment\n'
                              'tide_base base: absl::status\n'
                              'tide_mid mid: tide_base absl::strings\n'
                              'tide_part top/part: tide_mid tide_base\n')
        rc, out = self.run_check('--declared', declared)
        self.assertEqual(rc, 0, out)
        self.write('declared.txt', 'tide_base base: tide_mid\ntide_mid mid: tide_base\n')
        rc, out = self.run_check('--declared', declared)
        self.assertEqual(rc, 1, out)
        self.assertIn('declared.txt:1: tide_base (base) links tide_mid (mid)', out)


if __name__ == '__main__':
    unittest.main(verbosity=2)
