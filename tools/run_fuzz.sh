#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, -DTIDE_FUZZ=ON) in $FUZZ_DIR (default build-fuzz)
# and runs each for the given number of seconds (default 60), one after the other, one process each.
# A fuzz target is any CMake executable target named <name>_fuzz or fuzz_<name>; all of them live in
# fuzz/ (fuzz/CMakeLists.txt). Its seed corpus is fuzz/corpus/<name>/ (and fuzz/corpus/<target>/ if
# that exists). New inputs go to $FUZZ_DIR/corpus/<name>, never
# into the source tree; logs to $FUZZ_DIR/<name>.log, crashes to $FUZZ_DIR/artifacts/.
#   FUZZ_TARGETS="http_fuzz api_fuzz"   run only these targets (default: all)
# Only the fuzz targets and the libraries they link are built (not the server or the tests).
# Exit status: 0 when every target ran clean, 1 when one crashed, timed out or leaked.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
FUZZ_DIR=${FUZZ_DIR:-build-fuzz}

if [ ! -f "$FUZZ_DIR/build.ninja" ]; then
  launcher=()
  if command -v ccache > /dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S . -B "$FUZZ_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIDE_FUZZ=ON \
    -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang "${launcher[@]}"
fi
mapfile -t targets < <(cmake --build "$FUZZ_DIR" --target help | sed -n -e 's/^\(fuzz_[A-Za-z0-9_]*\): phony$/\1/p' -e 's/^\([A-Za-z0-9_]*_fuzz\): phony$/\1/p' | sort -u)
if [ -n "${FUZZ_TARGETS:-}" ]; then
  wanted=()
  for t in $FUZZ_TARGETS; do
    if printf '%s\n' "${targets[@]}" | grep -qx "$t"; then wanted+=("$t"); else echo "run_fuzz: no fuzz target $t" >&2; exit 1; fi
  done
  targets=("${wanted[@]}")
fi
if [ ${#targets[@]} -eq 0 ]; then
  echo "run_fuzz: no <name>_fuzz or fuzz_<name> targets in the build (fuzz/ has none yet)"
  exit 0
fi
cmake --build "$FUZZ_DIR" --target "${targets[@]}"

failed=()
summary=()
for t in "${targets[@]}"; do
  bin=$(find "$FUZZ_DIR" -type f -name "$t" -perm -u+x | head -1)
  [ -n "$bin" ] || { echo "run_fuzz: built $t but cannot find its binary" >&2; failed+=("$t"); continue; }
  name=${t#fuzz_}; name=${name%_fuzz}
  work="$FUZZ_DIR/corpus/$name"; mkdir -p "$work" "$FUZZ_DIR/artifacts"
  seeds=()
  for d in "fuzz/corpus/$name" "fuzz/corpus/$t"; do [ -d "$d" ] && seeds+=("$d"); done
  echo "run_fuzz: $t for ${SECONDS_PER_TARGET}s (seeds: ${seeds[*]:-none}; load average $(cut -d' ' -f1-3 /proc/loadavg))"
  log="$FUZZ_DIR/$name.log"
  if ! "$bin" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
       -artifact_prefix="$FUZZ_DIR/artifacts/$name-" "$work" "${seeds[@]}" > "$log" 2>&1; then
    echo "run_fuzz: $t FAILED; see $log and $FUZZ_DIR/artifacts/" >&2
    tail -30 "$log" >&2
    failed+=("$t")
    continue
  fi
  # libFuzzer's last status line (cov: edges, ft: features, corp: units/bytes) and final stats.
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 | sed -e 's/^#\([0-9]*\)[[:space:]]*DONE[[:space:]]*/\1 execs, /')
  summary+=("$t: ${done_line:-no DONE line} ($(sed -n 's/^stat::average_exec_per_sec:[[:space:]]*//p' "$log") exec/s)")
done
for line in "${summary[@]}"; do echo "run_fuzz: $line"; done
if [ ${#failed[@]} -gt 0 ]; then
  echo "run_fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
echo "run_fuzz: ${#targets[@]} targets ran ${SECONDS_PER_TARGET}s each without findings"
