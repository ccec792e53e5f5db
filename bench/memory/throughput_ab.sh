#!/usr/bin/env bash
# Companion of instances.sh: does sharing weights (and the Env's CPU arena) cost throughput?
# Alternating rounds of `tide serve` with instance_group count COUNT, share_weights false (A) then
# true (B), each under a closed loop of CLIENTS clients (tide bench) for DURATION s after WARMUP s;
# prints pairs/s of each and B / A = shared / not shared per round (bench/batching/param_ab.sh).
# usage: bench/memory/throughput_ab.sh [ROUNDS]   (COUNT=2 CLIENTS=8 DOCS=4 WARMUP=5 DURATION=20)
set -euo pipefail
cd "$(dirname "$0")/../.."
PARAM=share_weights A=false B=true COUNT=${COUNT:-2} CLIENTS=${CLIENTS:-8} DOCS=${DOCS:-4} WARMUP=${WARMUP:-5} \
  DURATION=${DURATION:-20} exec bash bench/batching/param_ab.sh "${1:-2}"
