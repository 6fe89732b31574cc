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

#endif
