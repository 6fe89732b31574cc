#!/usr/bin/env bash
# check_prefetch.sh - the x86 CPU kernels keep their software prefetches: every object of
# src/backends/cpu whose source prefetches (_mm_prefetch, __builtin_prefetch or a helper named
# *prefetch*) holds at least one prefetch instruction. GCC deletes a call it does not inline to a
# function whose only effect is a prefetch, silently: the decode step then ran up to 1.4x slower
# with the same bits, which no other test sees. On other architectures there is nothing to check.
#
#   scripts/check_prefetch.sh [BUILD]     (default build/)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
[ "$(uname -m)" = x86_64 ] || { echo "check_prefetch: not x86-64, nothing to check"; exit 0; }
bad=0
checked=0
for src in src/backends/cpu/*.c; do
  case $src in *_neon.c) continue ;; esac
  grep -q -E "prefetch[a-z_]*\(" <(grep -v -E "^ *(\*|/\*)" "$src") || continue # code lines, not comments
  obj=$BUILD/obj/${src%.c}.o
  if [ ! -f "$obj" ]; then echo "check_prefetch: $obj is missing (build first)"; bad=1; continue; fi
  n=$(objdump -d "$obj" | grep -c -E "\sprefetch")
  checked=$((checked + 1))
  if [ "$n" -eq 0 ]; then echo "check_prefetch: $obj has no prefetch instruction though $src prefetches"; bad=1; fi
done
echo "check_prefetch: $checked objects checked"
exit $bad
