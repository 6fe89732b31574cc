#!/usr/bin/env bash
# fuzz.sh - builds the libFuzzer harnesses (tests/fuzz/fuzz_*.c, clang + ASan + UBSan) and runs
# each for SECONDS (default 30) on its seed corpus (tests/fuzz/corpus/<name>/, copied to a scratch
# directory so runs never modify the repository). Fails if any harness finds a crash.
#
#   scripts/fuzz.sh [SECONDS] [HARNESS...]      e.g. scripts/fuzz.sh 600 gguf
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
shift || true
names=("$@")
if [ "${#names[@]}" -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.c; do n=${f#tests/fuzz/fuzz_}; names+=("${n%.c}"); done
fi
make -s -j"$(nproc)" fuzz
rc=0
for n in "${names[@]}"; do
  work=$(mktemp -d /tmp/mxl-fuzz-"$n"-XXXXXX)
  mkdir -p "$work/corpus"
  [ -d "tests/fuzz/corpus/$n" ] && cp -r "tests/fuzz/corpus/$n/." "$work/corpus/"
  echo "fuzz_$n: ${secs}s"
  if ! (cd "$work" && "$OLDPWD/build/fuzz/fuzz_$n" -max_total_time="$secs" -max_len=8192 \
          -print_final_stats=1 -artifact_prefix="$work/" corpus >"$work/log" 2>&1); then
    echo "fuzz_$n FAILED; log and crashing input in $work"
    tail -40 "$work/log"
    rc=1
  else
    grep -E "stat::number_of_executed_units|Done" "$work/log" | tail -2
    rm -rf "$work"
  fi
done
exit $rc
