#!/usr/bin/env bash
# check_alloc_seam.sh - every heap allocation of src/ goes through the allocation seam
# (src/core/alloc.h: mxl_malloc, mxl_free, ...), which counts live bytes and injects faults for
# tests/unit/test_alloc_faults.c. Checked on the objects, not the text: no object of src/ may call
# the C library's allocator (or a libc / library function that hands back malloc'd memory)
# except the ones allowed below, each with its reason. Comments, strings and names like
# mxl_free cannot confuse it; a macro cannot hide a call from it.
#
#   scripts/check_alloc_seam.sh [BUILD]     (default build/)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}

# Functions that allocate with libc's malloc or release it.
FORBIDDEN="malloc calloc realloc reallocarray free strdup strndup aligned_alloc posix_memalign memalign valloc pvalloc
  asprintf vasprintf open_memstream open_wmemstream getline getdelim scandir glob globfree canonicalize_file_name
  get_current_dir_name tempnam utf8proc_map utf8proc_map_custom utf8proc_NFD utf8proc_NFC utf8proc_NFKD utf8proc_NFKC
  utf8proc_NFKC_Casefold json_set_alloc_funcs __strdup __strndup"

# source:function  reason
ALLOWED="
src/core/alloc.c:malloc          the seam itself
src/core/alloc.c:calloc          the seam itself
src/core/alloc.c:realloc         the seam itself
src/core/alloc.c:free            the seam itself
src/core/alloc.c:posix_memalign  the seam itself (mxl_aligned_alloc)
src/core/alloc.c:json_set_alloc_funcs  routes jansson through the seam before main
src/cli/repl.c:getline           reads a line into getline's own buffer; copied out with mxl_strndup
src/cli/repl.c:free              releases getline's buffer
"

bad=0
checked=0
for src in $(find src -name '*.c' | sort); do
  obj=$BUILD/obj/${src%.c}.o
  if [ ! -f "$obj" ]; then echo "check_alloc_seam: $obj is missing (build first)"; bad=1; continue; fi
  checked=$((checked + 1))
  undef=$(nm -u "$obj" | awk '{print $NF}' | sed 's/@.*//')
  for fn in $FORBIDDEN; do
    # __strdup / __isoc99 variants are other names; match the plain symbol only
    if grep -qx "$fn" <<<"$undef"; then
      if ! grep -qE "^$src:$fn( |$)" <<<"$ALLOWED"; then
        echo "check_alloc_seam: $src calls $fn (use the mxl_ function of core/alloc.h, or allow it here with a reason)"
        bad=1
      fi
    fi
  done
done
echo "check_alloc_seam: $checked objects checked"
exit $bad
