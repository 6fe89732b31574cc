#!/usr/bin/env bash
# test_arm64.sh - cross-compiles mlxcel for AArch64 (`make arm64` -> build/arm64) and runs the
# CPU kernel unit tests under qemu-aarch64 (user mode, the arm64 multiarch libc; no -L sysroot:
# mixing the cross sysroot's libc with the multiarch libraries hangs pthread programs here).
# Four passes:
#   1. -cpu max (NEON + dot product): every kernel filter, SDOT variants dispatched;
#   2. the same with MXL_CPU_ISA=neon: dispatch capped to the baseline NEON kernels;
#   3. -cpu cortex-a53 (ARMv8.0, no dot product): the NEON and panel-path tests again, so
#      run-time detection is shown to keep the SDOT kernels out (they would raise SIGILL there);
#   4. the NEON tests under ASan+UBSan: a kernels-only runner (src/core, src/backends/cpu and
#      test_kernels_neon.c; build/arm64-san/), leak checking off (LSan cannot run under qemu).
#      The panel-path test (kernels_qamx) is left out here: under ASan and qemu it ran over 10
#      minutes; the x86 ASan step runs it on the shared C.
# No speed is measured: qemu timings say nothing about ARM hardware. Prints one
# "arm64: N passed, N failed" line; exit 0 only if every run passed.
set -uo pipefail
cd "$(dirname "$0")/.."
export MXL_REPO_ROOT=$PWD
# the filters are substrings, so "decoder_kv" would also take slow_decoder_kv_smollm2 (a real model,
# six minutes under qemu): the slow_ tests are left out by name
export MXL_TEST_EXCLUDE=slow_
# every pass's CPU has NEON at least: a runner that found none would skip the kernels it tests
export MXL_TEST_REQUIRE_ISA=neon
QEMU=${QEMU_AARCH64:-qemu-aarch64}
# test-name filters (substrings): the kernel tests, the kernels' users that compare dispatch with
# references, attention over the KV caches (and their block formats), and the thread pool they run
# on (the slow real-model tests are left out)
FILTERS=(kernels gemm_ enc_attention threadpool decoder_kv kv_pool kv_quant)

command -v aarch64-linux-gnu-gcc >/dev/null && command -v "$QEMU" >/dev/null ||
  { echo "test_arm64: aarch64-linux-gnu-gcc or $QEMU missing (scripts/setup.sh installs them)"; exit 1; }
make -s -j"$(nproc)" arm64 || { echo "test_arm64: cross build failed"; exit 1; }

passed=0
failed=0
report() { # label, output, exit status
  local label=$1 out=$2 rc=$3
  local line
  line=$(printf '%s\n' "$out" | grep -E '^unit: [0-9]+ passed' | tail -1)
  if [ "$rc" -ne 0 ] || [ -z "$line" ]; then
    printf '%s\n' "$out" | grep -E 'FAIL|CHECK|REQUIRE' | head -20
    echo "  $label: FAILED (rc $rc) ${line}"
    failed=$((failed + 1))
  else
    echo "  $label: $line (at ${SECONDS} s)"
    passed=$((passed + 1))
  fi
}
run() { # label, env/qemu args..., then the filter last
  local label=$1; shift
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  report "$label" "$out" $rc
}
# a filter's two dispatch levels side by side (each qemu process runs mostly on one host thread)
run_pair() { # filter
  local f=$1 d
  d=$(mktemp -d)
  ("$QEMU" -cpu max build/arm64/mlxcel-tests "$f" >"$d/max" 2>&1; echo $? >"$d/max.rc") &
  (env MXL_CPU_ISA=neon "$QEMU" -cpu max build/arm64/mlxcel-tests "$f" >"$d/neon" 2>&1; echo $? >"$d/neon.rc") &
  wait
  report "max cpu (neon+dotprod) [$f]" "$(cat "$d/max")" "$(cat "$d/max.rc")"
  report "MXL_CPU_ISA=neon [$f]" "$(cat "$d/neon")" "$(cat "$d/neon.rc")"
  rm -rf "$d"
}
for f in "${FILTERS[@]}"; do run_pair "$f"; done
run "cortex-a53 (no dotprod) [kernels_neon]" "$QEMU" -cpu cortex-a53 build/arm64/mlxcel-tests kernels_neon
run "cortex-a53 (no dotprod) [kernels_matmul]" "$QEMU" -cpu cortex-a53 build/arm64/mlxcel-tests kernels_matmul
run "cortex-a53 (no dotprod) [kernels_qamx]" "$QEMU" -cpu cortex-a53 build/arm64/mlxcel-tests kernels_qamx

# 4: sanitizer runner (the cross libasan lives in the cross sysroot's lib directory)
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
SANDIR=build/arm64-san
mkdir -p "$SANDIR"
san_ok=1
SAN_SRC=(src/core/*.c src/backends/weight.c src/backends/cpu/*.c tests/unit/test_kernels_neon.c tests/unit/test_main.c tests/unit/test_mlx_params.c)
for f in "${SAN_SRC[@]}"; do
  o="$SANDIR/$(echo "$f" | tr / _).o"
  if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ -n "$(find src/core src/backends tests/unit -name '*.h' -newer "$o" 2>/dev/null | head -1)" ]; then
    aarch64-linux-gnu-gcc -std=c17 -D_GNU_SOURCE -DMXL_VERSION=\"arm64-san\" -Wall -Wextra -Wpedantic -Werror -Wshadow \
      -Wstrict-prototypes -Wno-unused-parameter -Isrc -O1 -g $SAN -pthread -c "$f" -o "$o" || san_ok=0
  fi
done
objs=()
for f in "${SAN_SRC[@]}"; do objs+=("$SANDIR/$(echo "$f" | tr / _).o"); done
if [ $san_ok -eq 1 ] && aarch64-linux-gnu-gcc $SAN -o "$SANDIR/kernels-tests" "${objs[@]}" -ljansson -lpcre2-8 -lm -lpthread; then
  for cap in "" neon; do
    run "ASan+UBSan ${cap:-neon+dotprod} [kernels_neon]" env ${cap:+MXL_CPU_ISA=$cap} ASAN_OPTIONS=detect_leaks=0 \
      "$QEMU" -cpu max -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib "$SANDIR/kernels-tests" kernels_neon
  done
else
  echo "  ASan+UBSan runner: build FAILED"
  failed=$((failed + 1))
fi
echo "arm64: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
