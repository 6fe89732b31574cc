/* synth.h - synthetic weights of any CPU format with valid, moderate scales: random codes with
 * finite f16 scales at the offsets of ggml-common.h, for the kernel benchmark (and for shapes no
 * real checkpoint on this machine has). */
#ifndef MXL_BACKENDS_CPU_SYNTH_H
#define MXL_BACKENDS_CPU_SYNTH_H

#include <stdint.h>

#include "core/dtype.h"

/* Fills nblocks blocks of GGUF type t (or n scalar elements of F32/F16/BF16 when t is dense)
 * at p. *seed is a xorshift64 state (nonzero). */
void mxl_synth_fill(mxl_dtype t, uint8_t *p, uint64_t nblocks, uint64_t *seed);

#endif
