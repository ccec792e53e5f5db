#!/usr/bin/env bash
# make image-test: builds the image (make image), runs it with the model repository mounted
# read-only, waits for /v2/health/ready (through the published loopback port and the image's own
# HEALTHCHECK command), serves a rerank request, checks the process runs as uid 10001 as PID 1,
# then `podman stop` (SIGTERM) must end it with exit code 0 well within the grace period.
# Takes about a minute with the image built (the model's warm-up dominates). Not part of make test.
#
#   [IMAGE=...] [SKIP_IMAGE_BUILD=1] [GRACE_MS=5000] scripts/deploy/image-test.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
IMAGE=${IMAGE:-localhost/tide:latest}
MODELS_DIR=$(readlink -f "${MODEL_REPOSITORY:-models}")
GRACE_MS=${GRACE_MS:-5000}
P=scripts/podman.sh
name=tide-image-test-$$
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
fail() { echo "image-test: FAIL: $*" >&2; $P logs "$name" 2>&1 | tail -20 >&2 || true; exit 1; }
cleanup() { $P rm -f -t 0 "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# SKIP_IMAGE_BUILD=1: test $IMAGE as it is (e.g. IMAGE=localhost/tide:source built with BUILD_FROM=source).
[ "${SKIP_IMAGE_BUILD:-0}" = 1 ] || scripts/deploy/image.sh
echo "image-test: run $IMAGE on 127.0.0.1:$port, models from $MODELS_DIR"
# 2>/dev/null: podman reports that it cannot start the healthcheck timer without systemd; the
# HEALTHCHECK command is run by hand below instead.
$P run -d --name "$name" -p "127.0.0.1:$port:8000" -v "$MODELS_DIR:/models:ro" \
  -e TIDE_SHUTDOWN_GRACE_MS="$GRACE_MS" -e TIDE_IO_THREADS=1 -e TIDE_ADMIN_PORT=8002 "$IMAGE" >/dev/null 2>&1 \
  || fail "podman run"
start=$(date +%s)
until [ "$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v2/health/ready")" = 200 ]; do
  [ "$($P inspect -f '{{.State.Running}}' "$name")" = true ] || fail "container exited before ready"
  [ $(( $(date +%s) - start )) -lt 300 ] || fail "not ready after 300 s"
  sleep 1
done
echo "image-test: ready after $(( $(date +%s) - start )) s"
# The HEALTHCHECK command asks the admin listener (TIDE_ADMIN_PORT) inside the container.
$P healthcheck run "$name" >/dev/null 2>&1 || fail "HEALTHCHECK command did not report healthy"
body=$(curl -s -m 30 "http://127.0.0.1:$port/rerank" -H 'Content-Type: application/json' \
  -d '{"query":"what is a panda?","texts":["The giant panda is a bear.","Paris is in France."]}')
echo "$body" | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)
assert isinstance(r, list) and sorted(x["index"] for x in r) == [0, 1], r
assert all(isinstance(x["score"], float) for x in r), r' || fail "rerank answer: $body"
echo "image-test: rerank ok: $body"
who=$($P top "$name" user pid args 2>/dev/null | awk 'NR==2{print $1, $2, $3}')
[[ $who == "tide 1 /usr/local/bin/tide" ]] || fail "expected tide as PID 1 user tide, got: $who"
# Stop: SIGTERM, then SIGKILL after --time; tide must exit 0 by itself within the grace period.
t0=$(date +%s%N)
$P stop -t $(( GRACE_MS / 1000 + 10 )) "$name" >/dev/null 2>&1
stop_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
code=$($P inspect -f '{{.State.ExitCode}}' "$name")
[ "$code" = 0 ] || fail "exit code $code after SIGTERM (137 = killed after the grace period)"
[ "$stop_ms" -le $(( GRACE_MS + 2000 )) ] || fail "stop took $stop_ms ms, grace is $GRACE_MS ms"
logs=$($P logs "$name" 2>&1)  # (not piped into grep -q: pipefail would see podman's SIGPIPE)
# The fused graph goes to an unnamed file in the container's /tmp, not into the process's memory.
if grep -q 'the fused graph stays in memory' <<<"$logs"; then fail "the fused graph stayed in memory: $(grep -m1 'stays in memory' <<<"$logs")"; fi
grep -q 'received SIGTERM' <<<"$logs" || fail "no 'received SIGTERM' in the log"
echo "image-test: stopped by SIGTERM in $stop_ms ms (grace $GRACE_MS ms), exit code 0"
echo "image-test: PASSED"
