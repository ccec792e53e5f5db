#!/usr/bin/env bash
# max_batch_tokens sweep on CPU: for each budget, `tide serve` on the default model (its entry's
# config, no deadline) and `tide bench` with 1-document requests — 50 closed-loop clients, then
# Poisson arrivals at RATE req/s. Prints pairs/s and latency per budget; the ratio between budgets
# is measured in one run. Output: bench/results/max_batch_tokens.txt.
# usage: bench/batching/max_batch_tokens.sh [BUDGET ...]   (default 1024 2048 4096; after `make models`)
# env: BUILD_DIR (build), RATE (3.59), MODELS (models)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
MODELS=${MODELS:-models}
RATE=${RATE:-3.59}
TIDE="$BUILD/tide"
budgets=("$@"); [ ${#budgets[@]} -gt 0 ] || budgets=(1024 2048 4096)
out=bench/results/max_batch_tokens.txt
{
echo "# bench/batching/max_batch_tokens.sh ${budgets[*]} — $(date -u +%Y-%m-%dT%H:%MZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
for mbt in "${budgets[@]}"; do
  log=$(mktemp)
  "$TIDE" serve --model-repository "$MODELS" --port 0 --default-timeout-ms 0 --max-batch-tokens "$mbt" \
    --log-level warn > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 1500); do grep -q "listening on" "$log" && break; sleep 0.2; done
  port=$(grep -o 'listening on http://[^ ]*' "$log" | sed 's/.*://')
  common=(--url "http://127.0.0.1:$port" --tokenizer "$MODELS/minilm-l6/tokenizer.json" --documents 1)
  echo "== max_batch_tokens $mbt"
  "$TIDE" bench "${common[@]}" --concurrency 50 --warmup 15s --duration 45s 2>&1 | grep -E "^run|^c=|server"
  "$TIDE" bench "${common[@]}" --request-rate "$RATE" --arrivals poisson --max-connections 512 --warmup 5s \
    --duration 30s 2>&1 | grep -E "^rate|server"
  kill "$pid"; wait "$pid" 2>/dev/null || true; rm -f "$log"
done
} | tee "$out.new"
mv "$out.new" "$out"
