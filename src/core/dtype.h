/* dtype.h - element types of tensors: plain scalars (safetensors dtypes) and ggml block formats.
 *
 * Every dtype is described as blocks: `block_elems` elements stored in `block_bytes` bytes
 * (1 element per block for scalar types). Byte sizes of a row are computed with
 * mxl_dtype_row_bytes, which refuses (returns nonzero) a row length that is not a whole number of
 * blocks or whose size overflows. Block layouts follow ggml's ggml-common.h. */
#ifndef MXL_CORE_DTYPE_H
#define MXL_CORE_DTYPE_H

#include <stdbool.h>
#include <stdint.h>

typedef enum mxl_dtype {
    MXL_DTYPE_INVALID = 0,
    /* scalar types */
    MXL_DTYPE_F32,
    MXL_DTYPE_F16,
    MXL_DTYPE_BF16,
    MXL_DTYPE_F64,
    MXL_DTYPE_F8_E4M3,
    MXL_DTYPE_F8_E5M2,
    MXL_DTYPE_I8,
    MXL_DTYPE_U8,
    MXL_DTYPE_I16,
    MXL_DTYPE_U16,
    MXL_DTYPE_I32,
    MXL_DTYPE_U32,
    MXL_DTYPE_I64,
    MXL_DTYPE_U64,
    MXL_DTYPE_BOOL,
    /* ggml block formats */
    MXL_DTYPE_Q4_0,
    MXL_DTYPE_Q4_1,
    MXL_DTYPE_Q5_0,
    MXL_DTYPE_Q5_1,
    MXL_DTYPE_Q8_0,
    MXL_DTYPE_Q8_1,
    MXL_DTYPE_Q2_K,
    MXL_DTYPE_Q3_K,
    MXL_DTYPE_Q4_K,
    MXL_DTYPE_Q5_K,
    MXL_DTYPE_Q6_K,
    MXL_DTYPE_Q8_K,
    MXL_DTYPE_MXFP4, /* ggml's MXFP4: an E8M0 scale byte + 32 E2M1 nibbles */
    MXL_DTYPE_TQ1_0, /* ggml's ternary formats (BitNet b1.58): 256 values in base-3 digits */
    MXL_DTYPE_TQ2_0, /* ... or 2 bits each, one f16 scale per 256 */
    MXL_DTYPE_IQ4_NL, /* ggml's IQ4_NL: 32 nibbles looked up in a 16-entry non-linear table */
    MXL_DTYPE_IQ4_XS, /* ... the same table, 256 elements with 6-bit scales per 32 */
    /* ggml's IQ grid formats: 256 elements as indices into fixed grids of 4 or 8 values, with
     * signs and small per-group scales (quant_gguf.h) */
    MXL_DTYPE_IQ2_XXS,
    MXL_DTYPE_IQ2_XS,
    MXL_DTYPE_IQ2_S,
    MXL_DTYPE_IQ3_XXS,
    MXL_DTYPE_IQ3_S,
    MXL_DTYPE_IQ1_S,
    MXL_DTYPE_IQ1_M,
    /* the KV cache's TurboQuant blocks (backends/cpu/kv_quant.h): 32 rotated coordinates as an f16
     * scale and 4- or 3-bit indices into a Lloyd-Max codebook; never a weight type */
    MXL_DTYPE_TURBO4,
    MXL_DTYPE_TURBO3,
    MXL_DTYPE_COUNT
} mxl_dtype;

typedef struct mxl_dtype_info {
    const char *name;     /* "F32", "BF16", "Q4_K", ... (safetensors / ggml spelling) */
    uint32_t block_elems; /* elements per block (1 for scalar types) */
    uint32_t block_bytes; /* bytes per block */
    bool is_float;        /* scalar floating point */
    bool is_block_quant;  /* ggml block format */
} mxl_dtype_info;

const mxl_dtype_info *mxl_dtype_get_info(mxl_dtype dtype);
const char *mxl_dtype_name(mxl_dtype dtype);
/* Parses a safetensors dtype string ("F32", "BF16", "F8_E4M3", "I64", ...). INVALID if unknown. */
mxl_dtype mxl_dtype_from_safetensors(const char *name);
/* Bytes of n_elems elements; returns nonzero when n_elems is not a whole number of blocks or the
 * product overflows. */
int mxl_dtype_row_bytes(mxl_dtype dtype, uint64_t n_elems, uint64_t *out_bytes);

/* Scalar conversions (reference implementations; IEEE semantics incl. subnormals, inf, nan). */
float mxl_f16_to_f32(uint16_t h);
uint16_t mxl_f32_to_f16(float f); /* round to nearest even */
float mxl_bf16_to_f32(uint16_t b);
uint16_t mxl_f32_to_bf16(float f); /* round to nearest even, nan kept nan */
float mxl_f8_e4m3_to_f32(uint8_t v); /* OCP E4M3FN: no inf, 0x7f/0xff are nan */

#endif
