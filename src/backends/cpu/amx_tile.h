/* amx_tile.h - the 64-byte AMX tile configuration LDTILECFG reads (palette 1: per tile register,
 * its row count and bytes per row), shared by the AMX kernels (gemm_f32_amx.c, quant_amx.c). */
#ifndef MXL_BACKENDS_CPU_AMX_TILE_H
#define MXL_BACKENDS_CPU_AMX_TILE_H

#include <stdint.h>

typedef struct mxl_amx_tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((packed)) mxl_amx_tilecfg;

_Static_assert(sizeof(mxl_amx_tilecfg) == 64, "LDTILECFG reads 64 bytes");

#if defined(__x86_64__)
/* LDTILECFG from *c. Not _tile_loadconfig: GCC 12 does not model that builtin as reading the
 * whole 64 bytes, and in an out-of-line caller it dropped the stores of the row and column
 * counts as dead (every tile then unconfigured: #UD at the first tile load). The "m" operand
 * of the whole struct makes the compiler keep them. */
static inline void mxl_amx_load_config(const mxl_amx_tilecfg *c) {
    __asm__ volatile("ldtilecfg %0" : : "m"(*c));
}
/* The same, skipped when this thread's tiles already have that configuration (the tile state
 * is per thread and survives context switches; every configuration goes through this function,
 * amx_tile.c, so its record of the current one is right). LDTILECFG also zeroes the tiles; once
 * per matmul task it was about 1% of a batched decode step. */
void mxl_amx_set_config(const mxl_amx_tilecfg *c);
/* TILERELEASE (tiles back to their initial, unconfigured state, which the kernel need not save),
 * forgetting the record: every release goes through here, never _tile_release. */
void mxl_amx_release(void);
#endif

#endif
