#!/usr/bin/python3
"""Self-test of tools/check_docs.py: small pages and code tables that agree, then one doctored
difference at a time, each of which must be reported naming its row."""
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_docs  # noqa: E402

TABLES = '\n'.join([
    'route\tPOST\t/rerank\ttenant\tmain',
    'route\tGET\t/metrics\tmonitor\tmain+admin',
    'rpc\t/tei.v1.Rerank/Rerank\ttenant',
    'error\tnot_found\t404\tnot_found\tNOT_FOUND',
    'error\toverloaded\t429\toverloaded\tRESOURCE_EXHAUSTED',
    'parameter\ttask',
    'parameter\tintra_op_threads',
    'parameter\tintra_op_thread_count',
]) + '\n'

HELP = '''Usage: tide serve [OPTIONS]

Options:
  -h,--help                   Print this help message and exit
  --host TEXT=127.0.0.1 (Env:TIDE_HOST)
                              Address to bind
  --max-body-bytes UINT=8388608 (Env:TIDE_MAX_BODY_BYTES)
                              Largest request body (413 above)
  --api-key TEXT (Env:TIDE_API_KEY)
                              The inference key
'''

API = '''# API

| method | path | access | listeners | what |
|---|---|---|---|---|
| POST | `/rerank` | tenant | main | TEI rerank |
| GET | `/metrics` | monitor | main+admin | metrics |

| RPC | access |
|---|---|
| `/tei.v1.Rerank/Rerank` | tenant |

| status | error_type | gRPC | kind | when |
|---|---|---|---|---|
| 404 | `not_found` | NOT_FOUND | not_found | unknown model |
| 429 | `overloaded` | RESOURCE_EXHAUSTED | overloaded | over a limit (`a \\| b`) |

| HTTP | gRPC |
|---|---|
| 404 | NOT_FOUND |
| 429 | RESOURCE_EXHAUSTED |
'''

CONFIGURATION = '''# Configuration

| flag | env | default | meaning |
|---|---|---|---|
| `--host` | `TIDE_HOST` | `127.0.0.1` | bind address |
| `--max-body-bytes` | `TIDE_MAX_BODY_BYTES` | 8 MiB | 413 above |
| `--api-key` | `TIDE_API_KEY` | none | the key |

| parameter | default | meaning |
|---|---|---|
| `task` | `rerank` | rerank or classify |
| `intra_op_threads` | 0 | threads per instance (alias `intra_op_thread_count`) |
'''


class CheckDocsTest(unittest.TestCase):
    def run_check(self, api=API, configuration=CONFIGURATION, tables=TABLES, help_text=HELP):
        with tempfile.TemporaryDirectory() as d:
            Path(d, 'api.md').write_text(api)
            Path(d, 'configuration.md').write_text(configuration)
            return check_docs.check(d, check_docs.parse_tables(tables), help_text)

    def assertReported(self, problems, *words):
        self.assertTrue(any(all(w in p for w in words) for p in problems), f'{words} not in {problems}')

    def test_agreeing_docs_pass(self):
        self.assertEqual(self.run_check(), [])

    def test_route_missing_from_docs(self):
        problems = self.run_check(api=API.replace('| GET | `/metrics` | monitor | main+admin | metrics |\n', ''))
        self.assertReported(problems, 'route table', 'missing row GET /metrics monitor main+admin')

    def test_route_access_differs(self):
        problems = self.run_check(api=API.replace('| POST | `/rerank` | tenant |', '| POST | `/rerank` | none |'))
        self.assertReported(problems, 'route table', 'missing row POST /rerank tenant')
        self.assertReported(problems, 'route table', 'extra row POST /rerank none')

    def test_extra_rpc_in_docs(self):
        problems = self.run_check(api=API.replace('| `/tei.v1.Rerank/Rerank` | tenant |',
                                                  '| `/tei.v1.Rerank/Rerank` | tenant |\n| `/tei.v1.Info/Info` | none |'))
        self.assertReported(problems, 'RPC table', 'extra row /tei.v1.Info/Info none')

    def test_error_status_differs(self):
        problems = self.run_check(api=API.replace('| 404 | `not_found`', '| 410 | `not_found`'))
        self.assertReported(problems, 'error table', 'missing row kind not_found: 404')
        self.assertReported(problems, 'error table', 'extra row kind not_found: 410')

    def test_http_to_grpc_summary_differs(self):
        problems = self.run_check(api=API.replace('| 404 | NOT_FOUND |', '| 404, 410 | NOT_FOUND |'))
        self.assertReported(problems, 'HTTP-to-gRPC table', 'missing row 404 -> NOT_FOUND')
        self.assertReported(problems, 'HTTP-to-gRPC table', 'extra row 404, 410 -> NOT_FOUND')

    def test_flag_missing_from_docs(self):
        problems = self.run_check(configuration=CONFIGURATION.replace(
            '| `--api-key` | `TIDE_API_KEY` | none | the key |\n', ''))
        self.assertReported(problems, 'flag table', 'missing row --api-key')

    def test_flag_not_in_code(self):
        problems = self.run_check(help_text=HELP.replace('--api-key TEXT', '--api-token TEXT'))
        self.assertReported(problems, 'flag table', 'extra row --api-key')
        self.assertReported(problems, 'flag table', 'missing row --api-token')

    def test_flag_env_differs(self):
        problems = self.run_check(help_text=HELP.replace('Env:TIDE_HOST', 'Env:TIDE_BIND_HOST'))
        self.assertReported(problems, '--host', 'env TIDE_BIND_HOST')

    def test_flag_default_differs(self):
        problems = self.run_check(help_text=HELP.replace('UINT=8388608', 'UINT=4194304'))
        self.assertReported(problems, '--max-body-bytes', 'default 4194304')

    def test_parameter_missing_and_extra(self):
        problems = self.run_check(tables=TABLES.replace('parameter\ttask\n', 'parameter\tbatch_grouping\n'))
        self.assertReported(problems, 'parameter table', 'missing row batch_grouping')
        self.assertReported(problems, 'parameter table', 'extra row task')

    def test_alias_must_be_named_somewhere(self):
        problems = self.run_check(configuration=CONFIGURATION.replace(' (alias `intra_op_thread_count`)', ''))
        self.assertReported(problems, 'parameter table', 'missing row intra_op_thread_count')

    def test_table_without_its_header(self):
        problems = self.run_check(api=API.replace('| RPC | access |', '| method | access |'))
        self.assertReported(problems, 'no table with the header | RPC | access |')

    def test_links(self):
        with tempfile.TemporaryDirectory() as d:
            Path(d, 'a.md').write_text('# A\n\n## Some heading (`x`)\n\n[ok](#some-heading-x) [ok](b.md#b) '
                                       '[bad](#nowhere) [bad](c.md) [web](https://example.org/#x)\n'
                                       '```\n[not a link](#in-code)\n```\n')
            Path(d, 'b.md').write_text('# B\n[bad](a.md#b)\n')
            problems = check_docs.check_links([Path(d, 'a.md'), Path(d, 'b.md')])
        self.assertEqual(sorted(problems), ['a.md:5: link to #nowhere: no such heading',
                                            'a.md:5: link to c.md: no such file',
                                            'b.md:2: link to a.md#b: no such heading'])

    def test_help_parsing(self):
        flags = check_docs.parse_help(HELP)
        self.assertEqual(flags['--host'], ('TIDE_HOST', '127.0.0.1'))
        self.assertEqual(flags['--api-key'], ('TIDE_API_KEY', None))
        self.assertNotIn('--help', flags)


if __name__ == '__main__':
    unittest.main()
