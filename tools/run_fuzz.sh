#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, -DTIDE_FUZZ=ON) in $FUZZ_DIR (default build-fuzz)
# and runs each for the given number of seconds (default 60). A fuzz target is any CMake executable
# target named <name>_fuzz (fuzz/CMakeLists.txt's convention) or fuzz_<name>; its seed corpus, when
# present, is fuzz/corpus/<name>/ (or fuzz/corpus/<target>/). New inputs go to
# $FUZZ_DIR/corpus/<name>, never into the source tree.
# Exit status: 0 when every target ran clean, 1 when one crashed, timed out or leaked.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
FUZZ_DIR=${FUZZ_DIR:-build-fuzz}

if [ ! -f "$FUZZ_DIR/build.ninja" ]; then
  cmake -S . -B "$FUZZ_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIDE_FUZZ=ON \
    -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang
fi
mapfile -t targets < <(cmake --build "$FUZZ_DIR" --target help | sed -n -e 's/^\(fuzz_[A-Za-z0-9_]*\): phony$/\1/p' -e 's/^\([A-Za-z0-9_]*_fuzz\): phony$/\1/p' | sort -u)
if [ ${#targets[@]} -eq 0 ]; then
  echo "run_fuzz: no <name>_fuzz or fuzz_<name> targets in the build (fuzz/ has none yet)"
  exit 0
fi
cmake --build "$FUZZ_DIR" --target "${targets[@]}"

failed=()
for t in "${targets[@]}"; do
  bin=$(find "$FUZZ_DIR" -type f -name "$t" -perm -u+x | head -1)
  [ -n "$bin" ] || { echo "run_fuzz: built $t but cannot find its binary" >&2; failed+=("$t"); continue; }
  name=${t#fuzz_}; name=${name%_fuzz}
  work="$FUZZ_DIR/corpus/$name"; mkdir -p "$work" "$FUZZ_DIR/artifacts"
  seeds=()
  for d in "fuzz/corpus/$name" "fuzz/corpus/$t"; do [ -d "$d" ] && seeds+=("$d"); done
  echo "run_fuzz: $t for ${SECONDS_PER_TARGET}s (seeds: ${seeds[*]:-none})"
  if ! "$bin" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
       -artifact_prefix="$FUZZ_DIR/artifacts/$name-" "$work" "${seeds[@]}" > "$FUZZ_DIR/$name.log" 2>&1; then
    echo "run_fuzz: $t FAILED; see $FUZZ_DIR/$name.log and $FUZZ_DIR/artifacts/" >&2
    tail -30 "$FUZZ_DIR/$name.log" >&2
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "run_fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
echo "run_fuzz: ${#targets[@]} targets ran ${SECONDS_PER_TARGET}s each without findings"
