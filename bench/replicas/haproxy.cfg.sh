#!/usr/bin/env bash
# Writes the haproxy (2.6, Debian 12) configuration for N tide replicas on 127.0.0.2.. :PORT.
#
#   BALANCE=leastconn|roundrobin bench/replicas/haproxy.cfg.sh LB_PORT STATS_PORT REPLICA_PORT N [AGENT_PORT]
#
# - balance leastconn: each request goes to the replica with the fewest requests in flight;
# - health: GET /v2/health/ready every 500 ms, 2 failures -> down, 2 successes -> up; a replica
#   that is warming up is not listening yet, and one that is draining answers 503;
# - retries: rerank calls are idempotent, so a request is re-sent (up to 3 times, to another
#   replica each time: option redispatch 1) when the connection fails, the replica closes it
#   without an answer (kill -9), or the answer is 502/503/504;
# - 429: haproxy 2.6's retry-on cannot name 429, tide's answer for "this replica is full". Each
#   replica therefore sits behind a small inner proxy (listen r<i>, on an abstract unix socket,
#   no port) that turns 429 into 503 + x-tide-shed, which the outer backend retries elsewhere;
#   when every attempt was shed, the frontend turns that 503 back into 429 for the client.
# - AGENT_PORT (optional): each replica's load agent (bench/replicas/load_agent.py on
#   127.0.0.<i+1>:AGENT_PORT) sets its weight from free capacity (agent-check, every 250 ms).
set -euo pipefail
lb=$1 stats=$2 port=$3 n=$4 agent=${5:-}
cat <<CFG
global
  maxconn 4096
  nbthread 1
  log stdout format raw local0 info

defaults
  mode http
  log global
  option httplog
  option http-keep-alive
  timeout connect 500ms
  timeout client 60s
  timeout server 30s
  timeout queue 10s
  timeout http-keep-alive 10s

frontend rerank
  bind 127.0.0.1:$lb
  default_backend replicas
  http-response set-status 429 if { status 503 } { res.hdr(x-tide-shed) -m found }
  http-response del-header x-tide-shed

listen stats
  bind 127.0.0.1:$stats
  stats enable
  stats uri /stats

backend replicas
  balance ${BALANCE:-leastconn}
  retries 3
  option redispatch 1
  # L7 retries need the whole request in haproxy's buffer before it is sent: without
  # http-buffer-request, haproxy 2.6 did not retry some requests that arrived on keep-alive client
  # connections (measured: 21 of 57 shed answers reached the client). http-reuse never: one new
  # local (unix socket) connection to the inner proxy per request; with reuse, 503s from a killed
  # replica's inner proxy came back with SD and were not retried (measured).
  option http-buffer-request
  http-reuse never
  retry-on conn-failure empty-response response-timeout 502 503 504
  option httpchk GET /v2/health/ready
  http-check expect status 200
  # observe layer7: a 5xx answer (a shed 429 turned into 503, a dead replica's 502/503) marks the
  # server down at once (outlier ejection), so leastconn stops choosing the replica that answers
  # fastest because it refuses; the readiness check brings it back after 2 passes (~1 s).
  default-server inter 500ms fastinter 250ms downinter 500ms fall 2 rise 2 weight 100
CFG
for i in $(seq 1 "$n"); do
  a="127.0.0.$(( i + 1 ))"
  extra=""
  [ -n "$agent" ] && extra=" agent-check agent-addr $a agent-port $agent agent-inter 250ms"
  echo "  server r$i abns@tide-r$i check addr $a port $port$extra"
done
for i in $(seq 1 "$n"); do
  cat <<CFG

listen r$i
  bind abns@tide-r$i
  retries 0
  http-response set-header x-tide-shed 1 if { status 429 }
  http-response set-status 503 if { status 429 }
  server tide 127.0.0.$(( i + 1 )):$port
CFG
done
