/* amx_tile.c - the per-thread record of the loaded AMX tile configuration (amx_tile.h), so that
 * kernels called many times per forward pass load it only when it changes. */
#include "backends/cpu/amx_tile.h"

#include <string.h>

#if defined(__x86_64__)
static _Thread_local mxl_amx_tilecfg cur;
static _Thread_local int have;

void mxl_amx_set_config(const mxl_amx_tilecfg *c) {
    if (have && !memcmp(&cur, c, sizeof cur)) return;
    mxl_amx_load_config(c);
    cur = *c;
    have = 1;
}

void mxl_amx_release(void) {
    __asm__ volatile("tilerelease" ::: "memory");
    have = 0;
}
#endif
