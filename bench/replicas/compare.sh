#!/usr/bin/env bash
# Balancing comparison with skewed request sizes (80% of requests with 2 documents, 20% with 48):
# 3 replicas, 6 closed-loop clients, steady state only, under haproxy
#   roundrobin | leastconn | leastconn + agent-check from each replica's GET /load (load_agent.py)
# Prints each mode's throughput and latency percentiles (bench/replicas/run.sh's summary).
#
#   bash bench/replicas/compare.sh     (about 3 minutes; MODEL_REPOSITORY, TIDE_BINARY as run.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
export ONLY_STEADY=1 SKEW=${SKEW:-2:48:0.2} STEADY_S=${STEADY_S:-30} REPLICAS=${REPLICAS:-3} CLIENTS=${CLIENTS:-6}
for mode in roundrobin leastconn leastconn+agent; do
  agent=0; balance=$mode
  [ "$mode" = leastconn+agent ] && { agent=1; balance=leastconn; }
  echo "== $mode"
  AGENT=$agent BALANCE=$balance bench/replicas/run.sh | grep -E '^\| steady|^client requests'
done
