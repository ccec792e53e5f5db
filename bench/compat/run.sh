#!/usr/bin/env bash
# What a gzip request body costs. The same ~0.9 MB /tokenize body (100 texts of 1000
# words from Debian's word list, seeded) sent plain and as gzip -9 (Content-Encoding: gzip), 10
# times each, twice alternating; prints the median client-side time of each round and checks that
# both answers are byte-identical. Inflating runs on the connection's I/O thread.
# Usage: bench/compat/run.sh   (after `make models`; writes bench/results/compat_gzip.txt)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
MODELS=${TIDE_MODEL_REPOSITORY:-models}
cmake --build "$BUILD" --target tide >/dev/null
TIDE="$BUILD/tide"
source scripts/lib/tide_server.sh
server=""
tmp=$(mktemp -d); trap 'kill $server 2>/dev/null; rm -rf "$tmp"' EXIT
start_tide "$tmp/log" --model-repository "$MODELS" --log-level warn
/usr/bin/python3 -c "
import json, random
random.seed(1)
words = open('/usr/share/dict/words').read().split()[:5000]
print(json.dumps({'inputs': [' '.join(random.choice(words) for _ in range(1000)) for _ in range(100)]}))" >"$tmp/body.json"
gzip -9 -c "$tmp/body.json" >"$tmp/body.json.gz"
send() {  # send plain|gzip
  if [ "$1" = plain ]; then
    curl -s -o "$tmp/out.$1" -w '%{time_total}\n' "$url/tokenize" -H 'Content-Type: application/json' --data-binary @"$tmp/body.json"
  else
    curl -s -o "$tmp/out.$1" -w '%{time_total}\n' "$url/tokenize" -H 'Content-Type: application/json' \
      -H 'Content-Encoding: gzip' --data-binary @"$tmp/body.json.gz"
  fi
}
mkdir -p bench/results
{
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# body: $(stat -c %s "$tmp/body.json") bytes plain, $(stat -c %s "$tmp/body.json.gz") bytes gzip -9"
  for kind in plain gzip plain gzip; do
    for _ in $(seq 10); do send "$kind"; done | sort -n | awk -v k="$kind" '{a[NR]=$1} END {printf "%-5s median %.4f s (10 requests)\n", k, a[5]}'
  done
  cmp -s "$tmp/out.plain" "$tmp/out.gzip" && echo "answers identical" || echo "ANSWERS DIFFER"
} | tee bench/results/compat_gzip.txt
