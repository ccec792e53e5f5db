"""Locust load for a TEI-style /rerank endpoint, replaying the request bodies `tide bench` writes
(`tide bench --dump-requests FILE ...`: the same realistic workload, same seed), to cross-check
`tide bench`'s figures with a third-party client.

usage (Debian python3-locust; headless, 50 closed-loop users, fixed run time, CSV stats):
  TIDE_BENCH_REQUESTS=requests.jsonl locust -f bench/locust/locustfile.py --headless \
      -u 50 -r 50 -t 60s --host http://127.0.0.1:8000 --csv out/locust --only-summary
Each user sends its next body as soon as the previous answer arrived (no think time); bodies are
taken round-robin across users. A non-200 answer, or a 200 whose body is not a list with one score
per document, is a failure. FastHttpUser (geventhttpclient) keeps the client's CPU use low; the
network timeout is long (TIDE_LOCUST_TIMEOUT_S, default 600) because a saturated prototype answers
50 clients slowly.
"""
import itertools
import json
import os

from locust import FastHttpUser, constant, task

_path = os.environ.get("TIDE_BENCH_REQUESTS")
if not _path:
    raise SystemExit("locustfile: set TIDE_BENCH_REQUESTS to a file written by tide bench --dump-requests")
with open(_path, encoding="utf-8") as _f:
    _BODIES = [(line.strip().encode(), len(json.loads(line)["texts"])) for line in _f if line.strip()]
if not _BODIES:
    raise SystemExit(f"locustfile: {_path} holds no request bodies")
_NEXT = itertools.cycle(range(len(_BODIES)))
_TIMEOUT = float(os.environ.get("TIDE_LOCUST_TIMEOUT_S", "600"))


class RerankUser(FastHttpUser):
    wait_time = constant(0)
    network_timeout = _TIMEOUT
    connection_timeout = _TIMEOUT

    @task
    def rerank(self):
        body, documents = _BODIES[next(_NEXT)]
        with self.client.post("/rerank", data=body, headers={"Content-Type": "application/json"},
                              name="/rerank", catch_response=True) as response:
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code}")
                return
            try:
                items = json.loads(response.content)
            except ValueError:
                response.failure("answer is not JSON")
                return
            if not isinstance(items, list) or len(items) != documents:
                response.failure(f"expected {documents} scores")
