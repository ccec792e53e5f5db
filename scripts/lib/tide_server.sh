# Sourced by the bench scripts. start_tide LOG [tide serve flags...] starts `$TIDE serve --port 0
# FLAGS...` in the background with its output in LOG, waits up to 300 s for its "listening on"
# line (printed once every model is loaded and warmed up) and sets `server` (its pid), `port` and
# `url`. If the server exits or does not start in time, prints LOG and exits the calling script.
start_tide() {
  local log=$1
  shift
  "$TIDE" serve --port 0 "$@" >"$log" 2>&1 &
  server=$!
  for _ in $(seq 3000); do
    grep -q "listening on" "$log" && break
    kill -0 "$server" 2>/dev/null || { echo "tide serve exited:" >&2; cat "$log" >&2; exit 1; }
    sleep 0.1
  done
  grep -q "listening on" "$log" || { echo "tide serve did not start in 300 s:" >&2; cat "$log" >&2; exit 1; }
  port=$(grep -o 'listening on http://[^ ]*' "$log" | sed 's/.*://')
  url="http://127.0.0.1:$port"
}

# rss_after_warmup LOG BODY N: sends N POST /rerank requests with BODY to the server start_tide
# started, waits 1 s, prints "VmRSS_kib VmHWM_kib" of it, then stops it (and clears `server`).
# If a request fails, prints LOG and exits the calling script.
rss_after_warmup() {
  local log=$1 body=$2 n=$3 rss hwm
  for _ in $(seq "$n"); do
    curl -sf -o /dev/null -H 'Content-Type: application/json' -d "$body" "$url/rerank" ||
      { echo "rerank request failed:" >&2; cat "$log" >&2; exit 1; }
  done
  sleep 1
  rss=$(awk '/^VmRSS:/{print $2}' "/proc/$server/status")
  hwm=$(awk '/^VmHWM:/{print $2}' "/proc/$server/status")
  kill "$server"; wait "$server" 2>/dev/null || true
  server=""
  echo "$rss $hwm"
}
