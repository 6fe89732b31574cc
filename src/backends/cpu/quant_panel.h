/* quant_panel.h - the panel layout's facts shared by the panel path's files (quant_amx.c: the
 * packing, the tile kernels and their AVX-512 VNNI form, the plain reference; quant_panel_avx2.c:
 * the AVX2 form): code kinds, block sizes and offsets, where a block's codes and scales are.
 * Internal to src/backends/cpu; the layout itself is described in quant_amx.h. */
#ifndef MXL_BACKENDS_CPU_QUANT_PANEL_H
#define MXL_BACKENDS_CPU_QUANT_PANEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/matmul.h"
#include "backends/cpu/quant_gguf.h"
#include "core/dtype.h"

#define PANEL 16
#define CODES_Q8 512 /* bytes of one block's 8-bit codes (Q8_0, U8) */
#define CODES_Q4 256 /* nibbles of one block's codes (Q4_0 / Q4_1 / MLX 4-bit) */

/* Code kinds: K_Q8_0 signed 8-bit codes, d; K_Q4_0 unsigned nibbles, d (m = -8 d); K_Q4_1
 * unsigned nibbles, d and m; K_U8 unsigned 8-bit codes, d and m; K_Q4_K unsigned nibbles with
 * Q4_K's scales (d = d_sb * sc_j, m = -dmin_sb * m_j, both exact in f32, formed in the kernel);
 * K_Q5_K: K_Q4_K with the fifth bits of K_Q5_1. */
enum { K_Q8_0, K_Q4_0, K_Q4_1, K_U8, K_Q4_K, K_Q5_0, K_Q5_1, K_Q6_K, K_Q5_K, K_Q3_K, K_Q2_K, K_IQ4_NL, K_IQ4_XS, K_MXFP4 };
#define N_KINDS 14
/* K_Q5_0 / K_Q5_1: Q4_0 / Q4_1's nibbles, then the fifth bits as a 512-bit mask over the 512
 * code bytes (bit i: code byte i gets + 16), then d (and m); m = -16 d for Q5_0. */
#define HI_PLANE 256 /* offset of the fifth-bit mask in a Q5 block */
#define Q5_PARAMS 320
static inline int nib_kind(int kind) {
    return kind == K_Q4_0 || kind == K_Q4_1 || kind == K_Q4_K || kind == K_Q5_0 || kind == K_Q5_1 || kind == K_Q5_K;
}
/* K_IQ4_NL / K_IQ4_XS: nibbles (Q4_0's pairing) that index ggml's kvalues_iq4nl: signed codes
 * with no offset, as Q8_0's once looked up; IQ4_NL's blocks are Q4_0's (nibbles, d), IQ4_XS's
 * super-block is d[16] (f16) and the 8 blocks' signed scales ls - 32 as sc[8][16] (int8), then
 * the 8 blocks' nibbles - 2208 bytes per 256 x 16 for the GGUF's 2176 (d_w = d * sc, formed in
 * the kernel, exact in f32). */
#define IXSB (160 + 8 * CODES_Q4)
/* K_MXFP4: IQ4_NL's form with MXFP4's table (ggml's kvalues_mxfp4: the E2M1 values doubled,
 * -12..12) and its E8M0 scale halved as an f32 d ("wide": 2^(e - 128) is exact in f32, not in
 * f16) - 320 bytes per 16 rows x 32 for the GGUF's 272. */
static inline int lut_kind(int kind) { return kind == K_IQ4_NL || kind == K_IQ4_XS || kind == K_MXFP4; }
/* the 16-entry signed table of a lut_kind */
static inline const int8_t *lut_table(int kind) { return kind == K_MXFP4 ? mxl_kvalues_mxfp4 : mxl_kvalues_iq4nl; }
/* signed codes without an offset term: Q8_0's bytes, the IQ4 kinds' table values */
static inline int signed_kind(int kind) { return kind == K_Q8_0 || lut_kind(kind); }
/* kinds whose codes are split from nibbles before the products (nibble kinds, IQ4 kinds) */
static inline int split_kind(int kind) { return nib_kind(kind) || lut_kind(kind); }
/* nibble kinds with a fifth-bit mask after each block's nibbles */
static inline int q5_kind(int kind) { return kind == K_Q5_0 || kind == K_Q5_1 || kind == K_Q5_K; }

/* One Q4_K super-block of a panel (256 elements x 16 rows): sc[8][16] and m[8][16] (the 6-bit
 * values as bytes), d[16] and dmin[16] (f16), then the 8 sub-blocks' nibbles (256 bytes each,
 * as Q4_1's) - 2368 bytes for the GGUF's 2304, read front to back. */
#define KSB 2368
#define KSB_PARAMS 0
#define KSB_CODES 320
/* K_Q5_K: the same super-block with Q5_0's blocks (nibbles, then the 64-byte fifth-bit mask):
 * 320 + 8 x 320 = 2880 bytes for the GGUF's 2816 (d * sc and -dmin * m as Q4_K's). */
#define Q5KSB (KSB_CODES + 8 * Q5_PARAMS)
/* the super-block kinds (scales and mins per 32 elements inside 256-element super-blocks) */
static inline int ksb_kind(int kind) { return kind == K_Q4_K || kind == K_Q5_K; }
static inline size_t ksb_bytes(int kind) { return kind == K_Q5_K ? Q5KSB : KSB; }
/* the scales, mins, d and dmin of the super-block holding 32-element block b */
static inline const uint8_t *ksb_params(int kind, const uint8_t *pan, int64_t b) {
    return pan + (size_t)(b >> 3) * ksb_bytes(kind) + KSB_PARAMS;
}

/* One Q6_K super-block of a panel (256 elements x 16 rows): d[16] (f16), then 8 blocks of 32
 * elements: the two 16-element halves' scales sc[2][16] (int8), the low four bits as nibbles
 * (Q4's pairing) and the top two bits as a 2-bit plane over the 512 code bytes (row j of the B
 * tile: 16 bytes, code byte c at byte c % 16, bits 2 (c / 16)) - 3360 bytes, the GGUF's size.
 * Each half is its own K = 16 tile product (its own scale), on signed codes q = u - 32. */
#define Q6_SB 3360
#define Q6_BLK 416
/* One Q3_K super-block of a panel, Q6_K's form with 3-bit codes: d[16] (f16), then 8 blocks of
 * 32: sc[2][16] (int8: the 6-bit scales minus 32), the low two bits of the unsigned codes u = q +
 * 4 (0..7) as the 2-bit plane of Q6_K's top bits, the third bit as a 512-bit mask over the code
 * bytes (as Q5's fifth bit) - 1824 bytes for the GGUF's 1760; the products take q = u - 4. */
#define Q3_SB 1824
#define Q3_BLK 224
/* One Q2_K super-block of a panel: d[16] and dmin[16] (f16), then 8 blocks of 32: the halves'
 * GGUF scale bytes [2][16] (scale in the low four bits, min in the high four) and the 2-bit codes
 * u = q (0..3) as Q3_K's plane - 1344 bytes, the GGUF's size. The products take q = u and, per
 * half, the min term -(dmin * m_h) times the half's activation sum. */
#define Q2_SB 1344
#define Q2_BLK 160
/* the kinds with a scale per 16-element half (Q6_K, Q3_K, Q2_K): super-block bytes, block bytes,
 * the offset of their unsigned codes, block b's bytes (the halves' scales [2][16], then the
 * codes), where the 2-bit plane is among the codes */
static inline int half_kind(int kind) { return kind == K_Q6_K || kind == K_Q3_K || kind == K_Q2_K; }
static inline size_t half_sb(int kind) { return kind == K_Q3_K ? Q3_SB : kind == K_Q2_K ? Q2_SB : Q6_SB; }
static inline int half_off(int kind) { return kind == K_Q3_K ? 4 : kind == K_Q2_K ? 0 : 32; }
static inline const uint8_t *half_block(int kind, const uint8_t *pan, int64_t b) {
    return pan + (size_t)(b >> 3) * half_sb(kind) + (kind == K_Q2_K ? 64 : 32) +
           (size_t)(b & 7) * (kind == K_Q3_K ? Q3_BLK : kind == K_Q2_K ? Q2_BLK : Q6_BLK);
}
static inline size_t half_plane(int kind) { return kind == K_Q6_K ? CODES_Q4 : 0; }
/* the scale of half h of panel row n (signed; Q2_K's unsigned low four bits) and Q2_K's min */
static inline int half_scale(int kind, const uint8_t *blk, int h, int n) {
    return kind == K_Q2_K ? blk[PANEL * h + n] & 0x0F : (int8_t)blk[PANEL * h + n];
}
static inline int half_min(const uint8_t *blk, int h, int n) { return blk[PANEL * h + n] >> 4; }
/* the sums of an activation term's 32 codes per half (Q2_K's min terms; the AVX2 / VNNI forms'
 * offsets) */
static inline void half_sums_ref(const int8_t *q, int32_t *s) {
    s[0] = s[1] = 0;
    for (int i = 0; i < 32; i++) s[i / 16] += q[i];
}
#if defined(__x86_64__) && !defined(MXL_NO_TILE_KERNELS)
#include <immintrin.h>
/* half_sums_ref with AVX2 (the x86 forms run on AVX2 CPUs and above): 4 sums of 8 (x + 128) */
__attribute__((target("avx2"), always_inline)) static inline void half_sums(const int8_t *q, int32_t *s) {
    const __m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)q), _mm256_set1_epi8((char)0x80));
    const __m256i sad = _mm256_sad_epu8(u, _mm256_setzero_si256());
    s[0] = (int32_t)(_mm256_extract_epi64(sad, 0) + _mm256_extract_epi64(sad, 1)) - 16 * 128;
    s[1] = (int32_t)(_mm256_extract_epi64(sad, 2) + _mm256_extract_epi64(sad, 3)) - 16 * 128;
}
#endif

/* codes of 32-element block b of a panel */
static inline const uint8_t *codes_at(int kind, const uint8_t *pan, int64_t b, size_t bb) {
    if (kind == K_IQ4_XS) return pan + (size_t)(b >> 3) * IXSB + 160 + (size_t)(b & 7) * CODES_Q4;
    return ksb_kind(kind) ? pan + (size_t)(b >> 3) * ksb_bytes(kind) + KSB_CODES + (size_t)(b & 7) * (kind == K_Q5_K ? Q5_PARAMS : CODES_Q4)
                          : pan + (size_t)b * bb;
}

/* A weight's panel layout: code kind, f32 scales ("wide": MLX bf16 / f32 scales, which f16
 * would not hold exactly) or f16, the offset of the scales in a block (after the codes) and bytes
 * per (panel, block) */
typedef struct layout {
    int kind, wide;
    size_t codes, bb;
} layout;

static inline bool layout_of(const mxl_weight *W, layout *L) {
    memset(L, 0, sizeof *L);
    if (W->kind == MXL_W_GGUF) {
        switch (W->dtype) {
        case MXL_DTYPE_Q8_0: *L = (layout){K_Q8_0, 0, CODES_Q8, CODES_Q8 + 32}; return true;
        case MXL_DTYPE_Q4_0: *L = (layout){K_Q4_0, 0, CODES_Q4, CODES_Q4 + 32}; return true;
        case MXL_DTYPE_Q4_1: *L = (layout){K_Q4_1, 0, CODES_Q4, CODES_Q4 + 64}; return true;
        case MXL_DTYPE_Q4_K: *L = (layout){K_Q4_K, 0, CODES_Q4, KSB / 8}; return true; /* bb: per 32 */
        case MXL_DTYPE_Q5_0: *L = (layout){K_Q5_0, 0, Q5_PARAMS, Q5_PARAMS + 32}; return true;
        case MXL_DTYPE_Q5_1: *L = (layout){K_Q5_1, 0, Q5_PARAMS, Q5_PARAMS + 64}; return true;
        case MXL_DTYPE_Q6_K: *L = (layout){K_Q6_K, 0, 0, Q6_SB / 8}; return true; /* bb: per 32 */
        case MXL_DTYPE_Q5_K: *L = (layout){K_Q5_K, 0, Q5_PARAMS, Q5KSB / 8}; return true; /* bb: per 32 */
        case MXL_DTYPE_Q3_K: *L = (layout){K_Q3_K, 0, 0, Q3_SB / 8}; return true;       /* bb: per 32 */
        case MXL_DTYPE_Q2_K: *L = (layout){K_Q2_K, 0, 0, Q2_SB / 8}; return true;       /* bb: per 32 */
        /* the ternary formats as Q2_K: codes t = q + 1, every scale and min 1, d and dmin the
         * block's d (d * t - d = d * q, exactly) */
        case MXL_DTYPE_TQ1_0:
        case MXL_DTYPE_TQ2_0: *L = (layout){K_Q2_K, 0, 0, Q2_SB / 8}; return true;
        case MXL_DTYPE_IQ4_NL: *L = (layout){K_IQ4_NL, 0, CODES_Q4, CODES_Q4 + 32}; return true;
        case MXL_DTYPE_IQ4_XS: *L = (layout){K_IQ4_XS, 0, 0, IXSB / 8}; return true;   /* bb: per 32 */
        case MXL_DTYPE_MXFP4: *L = (layout){K_MXFP4, 1, CODES_Q4, CODES_Q4 + 64}; return true;
        default: return false;
        }
    }
    /* MLX affine: codes of up to 4 bits (2, 3, 4) as Q4_1's nibbles, wider ones (5, 6, 8) as
     * bytes, each block with its group's scale and bias */
    const int bits = W->kind == MXL_W_MLX ? W->mlx.bits : 0;
    if (!(bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8) || W->mlx.group_size % 32) return false;
    L->kind = bits <= 4 ? K_Q4_1 : K_U8;
    L->wide = W->mlx.scale_dtype != MXL_DTYPE_F16;
    L->codes = bits <= 4 ? CODES_Q4 : CODES_Q8;
    L->bb = L->codes + (L->wide ? 128 : 64);
    return true;
}

/* byte of element k of panel row n in a block's B-tile code order */
static inline size_t code_index(int k, int n) { return (size_t)(k / 4) * 64 + (size_t)n * 4 + (size_t)(k % 4); }

/* panel p of W's panel layout (W->prepared), nb blocks of L->bb bytes per panel */
static inline const uint8_t *panel_at(const mxl_weight *W, const layout *L, int64_t p) {
    return (const uint8_t *)W->prepared + (size_t)p * (size_t)(W->cols / 32) * L->bb;
}
/* rows of W in panel p (PANEL but in a last partial panel) */
static inline int panel_rows(const mxl_weight *W, int64_t p) {
    return W->rows - p * PANEL < PANEL ? (int)(W->rows - p * PANEL) : PANEL;
}

/* activation blocks: two-term q8a (quant_amx.h) */
#define XB sizeof(mxl_block_q8a2)
#define XQ1 offsetof(mxl_block_q8a2, qs)
#define XQ2 offsetof(mxl_block_q8a2, qs2)

#endif
