#!/usr/bin/env bash
# Cost per recorded answer of a rollout's guard windows at the largest window, incremental (now)
# against the copy-and-sort it replaced, measured in one run.
# usage: bench/rollout_window/run.sh   (after: cmake --build build --target rollout_window_bench)
# output: bench/results/rollout-window-<UTC time>.txt
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
bin=$BUILD/bench/rollout_window_bench
[ -x "$bin" ] || { echo "rollout_window: build $bin first" >&2; exit 2; }
out=bench/results/rollout-window-$(date -u +%Y%m%dT%H%MZ).txt
{
  echo "# bench/rollout_window/run.sh, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs"
  "$bin"
} | tee "$out"
