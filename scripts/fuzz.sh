#!/usr/bin/env bash
# fuzz.sh - builds the libFuzzer harnesses (tests/fuzz/fuzz_*.c, clang + ASan + UBSan) and runs
# each for SECONDS (default 30) on its seed corpus (tests/fuzz/corpus/<name>/, copied to a scratch
# directory so runs never modify the repository). Fails if any harness finds a crash, or an input
# that runs longer than 25 s (-timeout=25, as OSS-Fuzz counts such a hang as a crash).
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
# the harnesses run side by side, as many at once as there are CPUs (libFuzzer runs on one);
# their reports are printed in order once all have ended
jobs_max=$(nproc)
declare -A work
for n in "${names[@]}"; do
  work[$n]=$(mktemp -d /tmp/mxl-fuzz-"$n"-XXXXXX)
  w=${work[$n]}
  mkdir -p "$w/corpus"
  [ -d "tests/fuzz/corpus/$n" ] && cp -r "tests/fuzz/corpus/$n/." "$w/corpus/"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  (cd "$w" && "$OLDPWD/build/fuzz/fuzz_$n" -max_total_time="$secs" -max_len=8192 -timeout=25 \
     -print_final_stats=1 -artifact_prefix="$w/" corpus >"$w/log" 2>&1; echo $? >"$w/rc") &
done
wait
rc=0
for n in "${names[@]}"; do
  w=${work[$n]}
  echo "fuzz_$n: ${secs}s"
  if [ "$(cat "$w/rc" 2>/dev/null)" != 0 ]; then
    echo "fuzz_$n FAILED; log and crashing input in $w"
    tail -40 "$w/log"
    rc=1
  else
    grep -E "stat::number_of_executed_units|Done" "$w/log" | tail -2
    rm -rf "$w"
  fi
done
exit $rc
