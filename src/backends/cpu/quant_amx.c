/* quant_amx.c - the panel matmul path for GGUF Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / Q2_K / Q3_K / Q4_K / Q5_K /
 * Q6_K and MLX 4- / 8-bit (quant_amx.h): the panel layout (packing at load and its scalar
 * dequantization), the tile kernel, its AVX-512 VNNI form (a few tokens on AMX CPUs, every
 * token count on the other AVX-512 ones) and the plain reference of the products
 * (mxl_qamx_panels_ref); the AVX2 form is quant_panel_avx2.c, the AArch64 NEON form
 * quant_panel_neon.c.
 *
 * Kernel, per panel of 16 rows and group of NT <= 16 tokens (tiles: configure()):
 *   for each block b: B <- the block's codes (8-bit: straight from the panel; 4/5-bit: nibbles
 *   (and fifth bits) split into a 512-byte buffer, or the panel's blocks split once beforehand
 *   when several token groups share them); for each activation term: A <- the NT tokens' codes
 *   of block b (in place, token stride), C = 0, C += A . B (TDPBSSD / TDPBSUD), C -> memory;
 *   then, while the tile unit works on block b + 1, acc[t] += cvt(256 C1[t] + C2[t]) *
 *   (d_w * d2_x[t]) (+ m_w * s_x[t]), 16 rows per vector (d2_x = d_x / 256: quant_gguf.h).
 * Q4_0's codes are stored unsigned (q + 8); its -8 is the offset term m_w = -8 d_w against the
 * activation's scaled sum s_x (both terms), as Q4_1's m (Q5_0: -16 d_w). MLX affine weights are
 * Q4_1's form (4-bit: d = scale, m = bias of the block's group) or unsigned 8-bit codes with d
 * and m (U8). Q6_K, Q3_K and Q2_K run their own kernels (two 16-element halves per block, each with its
 * scale). */
#include "backends/cpu/quant_amx.h"
#include "backends/cpu/quant_panel.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "backends/cpu/kernels.h"
#include "backends/cpu/quant_gguf.h"
#include "backends/cpu/quant_mlx.h"
#include "core/alloc.h"
#include "core/dtype.h"

bool mxl_qamx_format(const mxl_weight *W) {
    layout L;
    return layout_of(W, &L);
}

size_t mxl_qamx_packed_bytes(const mxl_weight *W) {
    layout L;
    if (!layout_of(W, &L)) return 0;
    return (size_t)((W->rows + PANEL - 1) / PANEL) * (size_t)(W->cols / 32) * L.bb;
}


/* Both layouts are a transpose of 4-byte groups: B-tile dword (kk, n) is row n's code dword kk.
 * For Q4 the nibble byte i = (kk, n, j) holds element 4kk + j in its low half and element
 * 16 + 4kk + j in its high half - exactly the GGUF qs byte 4kk + j - so the nibble area is the
 * transpose of the rows' qs words, kk < 4. */
/* MLX: each block's 32 codes unpacked from the bit stream (mxl_mlx_unpack_row_ref; a block is
 * `bits` words of its row), then into the B-tile order - bytes (K_U8, 5 to 8 bits): the same
 * dword transpose as Q8_0; nibbles (K_Q4_1, 2 to 4 bits): elements (k, k + 16) paired in a byte -
 * then the scale and bias of each block's group (f16 bits copied, else as f32). */
static void pack_mlx(const mxl_weight *W, const layout *L, uint8_t *dst) {
    const mxl_mlx_qweight *M = &W->mlx;
    const int64_t nb = W->cols / 32, ng = W->cols / M->group_size, words = W->cols * M->bits / 32;
    uint8_t qb[32];
    for (int64_t r = 0; r < W->rows; r++) {
        const int n = (int)(r % PANEL);
        uint8_t *pan = dst + (size_t)(r / PANEL) * (size_t)nb * L->bb;
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *blk = pan + (size_t)b * L->bb;
            mxl_mlx_unpack_row_ref(M->bits, M->w + r * words + b * M->bits, qb, 32);
            if (L->kind == K_U8) {
                for (int kk = 0; kk < 8; kk++) memcpy(blk + (size_t)kk * 64 + (size_t)n * 4, qb + 4 * kk, 4);
            } else {
                for (int k = 0; k < 16; k++) blk[code_index(k, n)] = (uint8_t)(qb[k] | qb[k + 16] << 4);
            }
            int64_t gi = r * ng + b * 32 / M->group_size;
            if (L->wide) {
                float d = mxl_mlx_param(M->scales, M->scale_dtype, gi), m = mxl_mlx_param(M->biases, M->scale_dtype, gi);
                memcpy(blk + L->codes + 4 * n, &d, 4);
                memcpy(blk + L->codes + 4 * (PANEL + n), &m, 4);
            } else {
                memcpy(blk + L->codes + 2 * n, (const uint8_t *)M->scales + 2 * gi, 2);
                memcpy(blk + L->codes + 2 * (PANEL + n), (const uint8_t *)M->biases + 2 * gi, 2);
            }
        }
    }
}

/* Q4_K / Q5_K: sub-block j's element e is nibble j % 2 of qs[32 (j / 2) + e], re-paired (e, e +
 * 16), and for Q5_K its fifth bit is bit j of qh[e] (into the block's mask, as Q5_0's); the 6-bit
 * scales and mins unpacked to bytes; d and dmin copied. */
static void pack_k(const mxl_weight *W, int kind, uint8_t *dst) {
    const int64_t nsb = W->cols / 256, rb = mxl_weight_row_bytes(W);
    const size_t sbb = ksb_bytes(kind), sub = kind == K_Q5_K ? Q5_PARAMS : CODES_Q4;
    const size_t src_bytes = kind == K_Q5_K ? sizeof(mxl_block_q5_k) : sizeof(mxl_block_q4_k);
    for (int64_t r = 0; r < W->rows; r++) {
        const uint8_t *row = (const uint8_t *)W->data + r * rb;
        const int n = (int)(r % PANEL);
        uint8_t *pan = dst + (size_t)(r / PANEL) * (size_t)nsb * sbb;
        for (int64_t s = 0; s < nsb; s++) {
            const uint8_t *src = row + (size_t)s * src_bytes, *qs, *scales, *qh = NULL;
            uint16_t d, dmin;
            if (kind == K_Q5_K) {
                const mxl_block_q5_k *q = (const mxl_block_q5_k *)src;
                qs = q->qs, scales = q->scales, qh = q->qh, d = q->d, dmin = q->dmin;
            } else {
                const mxl_block_q4_k *q = (const mxl_block_q4_k *)src;
                qs = q->qs, scales = q->scales, d = q->d, dmin = q->dmin;
            }
            uint8_t *sb = pan + (size_t)s * sbb + KSB_CODES, *sp = pan + (size_t)s * sbb + KSB_PARAMS;
            for (int j = 0; j < 8; j++) {
                const uint8_t *q = qs + 32 * (j / 2);
                const int sh = 4 * (j % 2);
                uint8_t *blk = sb + (size_t)j * sub;
                for (int k = 0; k < 16; k++)
                    blk[code_index(k, n)] = (uint8_t)(((q[k] >> sh) & 0x0F) | ((q[k + 16] >> sh) & 0x0F) << 4);
                if (qh)
                    for (int k = 0; k < 32; k++)
                        if ((qh[k] >> j) & 1) {
                            size_t i = code_index(k, n);
                            blk[HI_PLANE + i / 8] |= (uint8_t)(1u << (i % 8));
                        }
                mxl_q4k_scale_min(j, scales, &sp[16 * j + n], &sp[128 + 16 * j + n]);
            }
            memcpy(sp + 256 + 2 * n, &d, 2);
            memcpy(sp + 288 + 2 * n, &dmin, 2);
        }
    }
}

/* Unsigned code u of code byte i (code_index) in the codes of a Q6_K / Q3_K block (after its
 * scales): Q6_K's low four bits as nibbles (Q4's pairing) and top two in the 2-bit plane; Q3_K's
 * low two in the plane and the third in the mask (quant_panel.h). */
static void put_half_code(int kind, uint8_t *codes, size_t i, int u) {
    const size_t c = i % 64;
    codes[half_plane(kind) + (i / 64) * 16 + c % 16] |= (uint8_t)(((kind == K_Q6_K ? u >> 4 : u) & 3) << (2 * (c / 16)));
    if (kind == K_Q3_K) codes[128 + i / 8] |= (uint8_t)(((u >> 2) & 1) << (i % 8));
    if (kind == K_Q6_K) codes[i % CODES_Q4] |= (uint8_t)((u & 0x0F) << (i < CODES_Q4 ? 0 : 4));
}
static int get_half_code(int kind, const uint8_t *codes, size_t i) {
    const size_t c = i % 64;
    const int two = (codes[half_plane(kind) + (i / 64) * 16 + c % 16] >> (2 * (c / 16))) & 3;
    if (kind == K_Q3_K) return two | ((codes[128 + i / 8] >> (i % 8)) & 1) << 2;
    if (kind == K_Q2_K) return two;
    return (i < CODES_Q4 ? codes[i] & 0x0F : codes[i - CODES_Q4] >> 4) | two << 4;
}

/* Q6_K / Q3_K / Q2_K: per super-block d (and Q2_K's dmin), per block the halves' scales (Q2_K:
 * its scale-and-min bytes) and the codes + the kind's offset (half_off) */
static void pack_half(const mxl_weight *W, int kind, uint8_t *dst) {
    const int64_t nsb = W->cols / 256, rb = mxl_weight_row_bytes(W);
    const size_t sbb = half_sb(kind), src_bytes = (size_t)mxl_dtype_get_info(W->dtype)->block_bytes;
    const bool tq = W->dtype == MXL_DTYPE_TQ1_0 || W->dtype == MXL_DTYPE_TQ2_0;
    int q[256], sc[16];
    for (int64_t r = 0; r < W->rows; r++) {
        const uint8_t *row = (const uint8_t *)W->data + r * rb;
        const int n = (int)(r % PANEL);
        uint8_t *pan = dst + (size_t)(r / PANEL) * (size_t)nsb * sbb;
        for (int64_t s = 0; s < nsb; s++) {
            uint16_t d;
            if (tq) { /* (layout_of: Q2_K with t = q + 1, scales and mins 1, dmin = d) */
                const uint8_t *b = row + (size_t)s * src_bytes;
                if (W->dtype == MXL_DTYPE_TQ1_0) mxl_tq1_0_codes((const mxl_block_tq1_0 *)b, q), d = ((const mxl_block_tq1_0 *)b)->d;
                else mxl_tq2_0_codes((const mxl_block_tq2_0 *)b, q), d = ((const mxl_block_tq2_0 *)b)->d;
                for (int e = 0; e < 256; e++) q[e] += 1;
                for (int i = 0; i < 16; i++) sc[i] = 0x11;
                memcpy(pan + (size_t)s * sbb + 32 + 2 * n, &d, 2);
            } else if (kind == K_Q2_K) {
                const mxl_block_q2_k *b = (const mxl_block_q2_k *)(row + (size_t)s * src_bytes);
                for (int e = 0; e < 256; e++) q[e] = mxl_k2bits(b->qs, e);
                for (int i = 0; i < 16; i++) sc[i] = b->scales[i];
                d = b->d;
                memcpy(pan + (size_t)s * sbb + 32 + 2 * n, &b->dmin, 2);
            } else if (kind == K_Q3_K) {
                const mxl_block_q3_k *b = (const mxl_block_q3_k *)(row + (size_t)s * src_bytes);
                mxl_q3k_codes(b, q);
                for (int i = 0; i < 16; i++) sc[i] = mxl_q3k_scale(b->scales, i);
                d = b->d;
            } else {
                const mxl_block_q6_k *b = (const mxl_block_q6_k *)(row + (size_t)s * src_bytes);
                mxl_q6k_codes(b, q);
                for (int i = 0; i < 16; i++) sc[i] = b->scales[i];
                d = b->d;
            }
            memcpy(pan + (size_t)s * sbb + 2 * n, &d, 2);
            for (int j = 0; j < 8; j++) {
                uint8_t *blk = (uint8_t *)half_block(kind, pan, s * 8 + j);
                blk[n] = (uint8_t)sc[2 * j];
                blk[PANEL + n] = (uint8_t)sc[2 * j + 1];
                for (int k = 0; k < 32; k++) put_half_code(kind, blk + 32, code_index(k, n), q[32 * j + k] + half_off(kind));
            }
        }
    }
}

/* IQ4_XS: per super-block d and the 8 blocks' signed scales ls - 32, then each block's nibbles
 * as Q4_0's (its qs[16 j + k] holds elements k and k + 16, Q4_0's pairing) */
static void pack_iq4xs(const mxl_weight *W, uint8_t *dst) {
    const int64_t nsb = W->cols / 256, rb = mxl_weight_row_bytes(W);
    for (int64_t r = 0; r < W->rows; r++) {
        const mxl_block_iq4_xs *row = (const mxl_block_iq4_xs *)((const uint8_t *)W->data + r * rb);
        const int n = (int)(r % PANEL);
        uint8_t *pan = dst + (size_t)(r / PANEL) * (size_t)nsb * IXSB;
        for (int64_t s = 0; s < nsb; s++) {
            uint8_t *sb = pan + (size_t)s * IXSB;
            memcpy(sb + 2 * n, &row[s].d, 2);
            for (int j = 0; j < 8; j++) {
                sb[32 + 16 * j + n] = (uint8_t)(int8_t)mxl_iq4xs_scale(&row[s], j);
                for (int kk = 0; kk < 4; kk++) memcpy(sb + 160 + (size_t)j * CODES_Q4 + (size_t)kk * 64 + (size_t)n * 4, row[s].qs + 16 * j + 4 * kk, 4);
            }
        }
    }
}

void mxl_qamx_pack(const mxl_weight *W, uint8_t *dst) {
    layout L;
    MXL_ASSERT(layout_of(W, &L));
    memset(dst, 0, mxl_qamx_packed_bytes(W));
    if (W->kind == MXL_W_MLX) {
        pack_mlx(W, &L, dst);
        return;
    }
    if (ksb_kind(L.kind)) {
        pack_k(W, L.kind, dst);
        return;
    }
    if (half_kind(L.kind)) {
        pack_half(W, L.kind, dst);
        return;
    }
    if (L.kind == K_IQ4_XS) {
        pack_iq4xs(W, dst);
        return;
    }
    const int64_t nb = W->cols / 32, rb = mxl_weight_row_bytes(W);
    const size_t bb = L.bb;
    const int q8 = W->dtype == MXL_DTYPE_Q8_0, has_m = W->dtype == MXL_DTYPE_Q4_1 || W->dtype == MXL_DTYPE_Q5_1;
    const int q5 = W->dtype == MXL_DTYPE_Q5_0 || W->dtype == MXL_DTYPE_Q5_1;
    const int words = q8 ? 8 : 4;
    const size_t codes = L.codes; /* where the scales start */
    const size_t sb = (size_t)mxl_dtype_get_info(W->dtype)->block_bytes; /* source block bytes */
    size_t qs_off = offsetof(mxl_block_q4_0, qs), qh_off = 0;
    const int mx = W->dtype == MXL_DTYPE_MXFP4;
    switch (W->dtype) {
    case MXL_DTYPE_MXFP4: qs_off = offsetof(mxl_block_mxfp4, qs); break;
    case MXL_DTYPE_Q8_0: qs_off = offsetof(mxl_block_q8_0, qs); break;
    case MXL_DTYPE_Q4_1: qs_off = offsetof(mxl_block_q4_1, qs); break;
    case MXL_DTYPE_Q5_0: qs_off = offsetof(mxl_block_q5_0, qs), qh_off = offsetof(mxl_block_q5_0, qh); break;
    case MXL_DTYPE_Q5_1: qs_off = offsetof(mxl_block_q5_1, qs), qh_off = offsetof(mxl_block_q5_1, qh); break;
    default: break;
    }
    for (int64_t r = 0; r < W->rows; r++) {
        const uint8_t *row = (const uint8_t *)W->data + r * rb;
        const int n = (int)(r % PANEL);
        uint8_t *pan = dst + (size_t)(r / PANEL) * (size_t)nb * bb;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *src = row + (size_t)b * sb;
            uint8_t *blk = pan + (size_t)b * bb;
            for (int kk = 0; kk < words; kk++) memcpy(blk + (size_t)kk * 64 + (size_t)n * 4, src + qs_off + 4 * kk, 4);
            if (mx) { /* MXFP4: E8M0 e first, d = 2^(e - 128) as f32 */
                const float d = mxl_e8m0_half(src[0]);
                memcpy(blk + codes + 4 * n, &d, 4);
                continue;
            }
            memcpy(blk + codes + 2 * n, src, 2);                          /* d: first in every block */
            if (has_m) memcpy(blk + codes + 2 * (PANEL + n), src + 2, 2); /* Q4_1 / Q5_1's m follows d */
            if (q5) { /* element k's fifth bit is bit k of qh */
                uint32_t qh;
                memcpy(&qh, src + qh_off, 4);
                for (int k = 0; k < 32; k++)
                    if ((qh >> k) & 1) {
                        size_t i = code_index(k, n); /* the code byte; its bit in the mask */
                        blk[HI_PLANE + i / 8] |= (uint8_t)(1u << (i % 8));
                    }
            }
        }
    }
}

/* scale (i = n) or offset (i = PANEL + n) of a block: f16 bits or f32 */
static float param_at(const layout *L, const uint8_t *blk, int i) {
    if (L->wide) {
        float v;
        memcpy(&v, blk + L->codes + 4 * i, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, blk + L->codes + 2 * i, 2);
    return mxl_f16_to_f32(h);
}

/* The integer code of element k of panel row n in 32-element block b, as the kernels' int32
 * dots take it: Q8_0 signed; Q6_K / Q3_K signed (u - 32 / u - 4); IQ4 the table's signed value;
 * the others unsigned (Q4_0 / Q5_0's offset is the m = -8 d / -16 d term). */
static int panel_code(const layout *L, const uint8_t *pan, int64_t b, int n, int k) {
    const size_t i = code_index(k, n);
    if (half_kind(L->kind)) return get_half_code(L->kind, half_block(L->kind, pan, b) + 32, i) - half_off(L->kind);
    const uint8_t *c = codes_at(L->kind, pan, b, L->bb);
    if (L->kind == K_Q8_0) return (int8_t)c[i];
    if (L->kind == K_U8) return c[i];
    int u = i < CODES_Q4 ? c[i] & 0x0F : c[i - CODES_Q4] >> 4;
    if (q5_kind(L->kind)) u |= ((c[HI_PLANE + i / 8] >> (i % 8)) & 1) << 4;
    return lut_kind(L->kind) ? lut_table(L->kind)[u] : u;
}

/* Scale d_w and offset m_w of panel row n in block b (not Q6_K / Q3_K / Q2_K), as the kernels
 * form them: Q4_K / Q5_K d * sc and -(dmin * m); IQ4_XS d * sc; Q4_0 / Q5_0 -8 d / -16 d; Q8_0 and
 * IQ4 no offset. */
static void panel_scales(const layout *L, const uint8_t *pan, int64_t b, int n, float *dw, float *mw) {
    if (L->kind == K_IQ4_XS) {
        const uint8_t *sb = pan + (size_t)(b >> 3) * IXSB;
        uint16_t hd;
        memcpy(&hd, sb + 2 * n, 2);
        *dw = mxl_f16_to_f32(hd) * (float)(int8_t)sb[32 + 16 * (b & 7) + n];
        *mw = 0.0f;
        return;
    }
    if (ksb_kind(L->kind)) {
        const uint8_t *sp = ksb_params(L->kind, pan, b);
        const int j = (int)(b & 7);
        uint16_t hd, hm;
        memcpy(&hd, sp + 256 + 2 * n, 2);
        memcpy(&hm, sp + 288 + 2 * n, 2);
        *dw = mxl_f16_to_f32(hd) * (float)sp[16 * j + n];
        *mw = -(mxl_f16_to_f32(hm) * (float)sp[128 + 16 * j + n]);
        return;
    }
    const uint8_t *blk = pan + (size_t)b * L->bb;
    *dw = param_at(L, blk, n);
    *mw = signed_kind(L->kind) ? 0.0f
          : L->kind == K_Q4_0 ? *dw * -8.0f
          : L->kind == K_Q5_0 ? *dw * -16.0f
                              : param_at(L, blk, PANEL + n);
}

/* Q6_K / Q3_K / Q2_K's per-row scale d (f16; dmin: Q2_K's dmin) of the super-block holding
 * block b */
static float half_d(int kind, const uint8_t *pan, int64_t b, int n, int dmin) {
    uint16_t hd;
    memcpy(&hd, pan + (size_t)(b >> 3) * half_sb(kind) + (dmin ? 32 : 0) + 2 * n, 2);
    return mxl_f16_to_f32(hd);
}

void mxl_qamx_dequant_row_ref(const mxl_weight *W, int64_t r, float *out) {
    layout L;
    MXL_ASSERT(layout_of(W, &L));
    const int64_t nb = W->cols / 32;
    const int n = (int)(r % PANEL);
    const uint8_t *pan = panel_at(W, &L, r / PANEL);
    for (int64_t b = 0; b < nb; b++) {
        float *o = out + b * 32;
        if (half_kind(L.kind)) { /* GGUF's (d * sc) * q (Q2_K: - dmin * m) */
            const uint8_t *blk = half_block(L.kind, pan, b);
            const float d = half_d(L.kind, pan, b, n, 0);
            for (int k = 0; k < 32; k++) {
                float dl = d * (float)half_scale(L.kind, blk, k / 16, n);
                float prod = dl * (float)panel_code(&L, pan, b, n, k);
                if (L.kind == K_Q2_K) {
                    float ml = half_d(L.kind, pan, b, n, 1) * (float)half_min(blk, k / 16, n);
                    o[k] = prod - ml;
                } else o[k] = prod;
            }
            continue;
        }
        float d, m;
        panel_scales(&L, pan, b, n, &d, &m);
        for (int k = 0; k < 32; k++) {
            const int u = panel_code(&L, pan, b, n, k);
            /* each reference's own expressions: GGUF q * d, (q - 8) * d, d * (q - 16), q * d + m,
             * Q4_K (d * sc) * q - (dmin * m); MLX s * q + b - as separate statements (never an FMA) */
            if (signed_kind(L.kind)) o[k] = d * (float)u; /* (IQ4_XS: d = d_sb * sc, ggml's dl) */
            else if (L.kind == K_Q4_0) o[k] = (float)(u - 8) * d;
            else if (L.kind == K_Q5_0) o[k] = d * (float)(u - 16);
            else if (ksb_kind(L.kind)) {
                float prod = d * (float)u;
                o[k] = prod + m;
            } else if (W->kind == MXL_W_GGUF) o[k] = (float)u * d + m;
            else {
                float t = d * (float)u;
                o[k] = t + m;
            }
        }
    }
}

void mxl_qamx_panels_ref(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act, size_t act_stride,
                         int64_t n_tok, float *y, int64_t ys) {
    layout L;
    MXL_ASSERT(layout_of(W, &L));
    const int64_t nb = W->cols / 32;
    for (int64_t p = p0; p < p1; p++) {
        const uint8_t *pan = panel_at(W, &L, p);
        for (int n = 0; n < panel_rows(W, p); n++)
            for (int64_t t = 0; t < n_tok; t++) {
                const mxl_block_q8a2 *x = (const mxl_block_q8a2 *)(act + (size_t)t * act_stride);
                float acc = 0.0f;
                for (int64_t b = 0; b < nb; b++) {
                    if (half_kind(L.kind)) { /* per half: (256 dot1 + dot2) x d * sc_h * d2_x */
                        const uint8_t *blk = half_block(L.kind, pan, b);
                        const float d = half_d(L.kind, pan, b, n, 0);
                        const float dh[2] = {d * (float)half_scale(L.kind, blk, 0, n), d * (float)half_scale(L.kind, blk, 1, n)};
                        int32_t c[2][2] = {{0, 0}, {0, 0}};
                        for (int k = 0; k < 32; k++) {
                            const int q = panel_code(&L, pan, b, n, k);
                            c[0][k / 16] += q * x[b].qs[k];
                            c[1][k / 16] += q * x[b].qs2[k];
                        }
                        /* the terms folded, 256 dot1 + dot2 (|.| < 2^24: exact in f32) */
                        for (int h = 0; h < 2; h++) acc = fmaf((float)(256 * c[0][h] + c[1][h]), dh[h] * x[b].d2, acc);
                        if (L.kind == K_Q2_K) { /* then the mins: -(dmin * m_h) * d2_x x the half's folded sum */
                            const float dmin = half_d(L.kind, pan, b, n, 1);
                            const float mh[2] = {-(dmin * (float)half_min(blk, 0, n)), -(dmin * (float)half_min(blk, 1, n))};
                            int32_t sx[2][2];
                            half_sums_ref(x[b].qs, sx[0]);
                            half_sums_ref(x[b].qs2, sx[1]);
                            for (int h = 0; h < 2; h++) acc = fmaf((float)(256 * sx[0][h] + sx[1][h]), mh[h] * x[b].d2, acc);
                        }
                        continue;
                    }
                    int32_t D = 0; /* exact: |D| < 2^31 for every kind */
                    for (int k = 0; k < 32; k++) D += panel_code(&L, pan, b, n, k) * (256 * x[b].qs[k] + x[b].qs2[k]);
                    float dw, mw;
                    panel_scales(&L, pan, b, n, &dw, &mw);
                    const float sc = dw * x[b].d2;
                    acc = fmaf((float)D, sc, acc);
                    if (!signed_kind(L.kind)) acc = fmaf(mw, x[b].s, acc);
                }
                y[t * ys + p * PANEL + n] = acc;
            }
    }
}

/* the path runs where the kernel table has a panel kernel (AVX2 and above, NEON; none in the
 * fuzzing build), and uses the tiles where the AMX level found AMX-INT8 (mxl_qamx_tiles_cpu) */
bool mxl_qamx_available(void) { return mxl_cpu_kern()->qamx_panels != NULL; }
bool mxl_qamx_tiles_available(void) { return mxl_cpu_kern()->qamx_tiles; }

mxl_status mxl_qamx_prepare(mxl_weight *W, mxl_arena *arena, mxl_error *err) {
    if (W->prepared || !mxl_qamx_format(W) || !mxl_qamx_available()) return MXL_OK;
    uint8_t *p = mxl_arena_alloc(arena, mxl_qamx_packed_bytes(W), 64);
    if (!p)
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory for the AMX layout of a %lld x %lld weight",
                             (long long)W->rows, (long long)W->cols);
    mxl_qamx_pack(W, p);
    W->prepared = p;
    return MXL_OK;
}

/* MXL_NO_TILE_KERNELS (the fuzzing build): no kernels, the path reported unavailable */
/* the pair form's A operands, block b: rows t (term 1 of token t) and n_tok + t (its term 2),
 * 32 bytes each */
void mxl_qamx_pair_token(const mxl_weight *W, int64_t n_tok, int64_t t, const void *act_t, uint8_t *abuf) {
    const mxl_block_q8a2 *x = act_t;
    for (int64_t b = 0; b < W->cols / 32; b++) {
        memcpy(abuf + (size_t)(b * 2 * n_tok + t) * 32, x[b].qs, 32);
        memcpy(abuf + (size_t)(b * 2 * n_tok + n_tok + t) * 32, x[b].qs2, 32);
    }
}

#if defined(__x86_64__) && !defined(MXL_NO_TILE_KERNELS)
#include <cpuid.h>
#include <immintrin.h>

#include "backends/cpu/amx_tile.h"

/* AMX-INT8 (CPUID.7.0:EDX bit 25); the AMX level (tile data permission granted) asks this */
bool mxl_qamx_tiles_cpu(void) {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((d >> 25) & 1);
}

/* VNNI: the AVX-512 code every CPU of the path runs (the VNNI form, the float steps); AMX: the
 * tile kernels, called only where mxl_qamx_tiles_available() */
#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define AMX __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

/* For nt tokens. Accumulators C [nt][16] int32 in 0, 1, 4, 5 (32-element kinds: the two
 * activation terms of even blocks in 0 / 1, of odd blocks in 4 / 5; Q6_K: term 1 of its halves
 * in 0 / 1, term 2 in 4 / 5); A (activation codes) in 2 ([nt][32]) or 6 (Q6_K: [nt][16]); B
 * (weight codes) in 3 ([8][64]) or 7 (Q6_K: [4][64]). The pair form (panel_kernel_pair) runs
 * with nt = twice its tokens: C in 0 / 4 and A in 2 hold both terms' rows. */
AMX static void configure(int nt) {
    mxl_amx_tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) c.rows[t] = (uint8_t)nt, c.colsb[t] = 64;
    c.colsb[2] = 32;
    c.rows[3] = 8;
    c.colsb[6] = 16;
    c.rows[7] = 4;
    mxl_amx_set_config(&c);
}

/* Code bytes 64 j .. 64 j + 63 of a nibble block (j < 8: B-tile row j): byte i of the nibbles
 * gives code bytes i (low half) and 256 + i (high half); Q5 kinds add 16 where the block's
 * fifth-bit mask says so; IQ4 kinds look the nibbles up in kvalues_iq4nl (signed). */
VNNI __attribute__((always_inline)) static inline __m512i nib_row(int kind, const uint8_t *nib, int j) {
    __m512i v = _mm512_loadu_si512((const void *)(nib + 64 * (j & 3)));
    if (j >= 4) v = _mm512_srli_epi16(v, 4);
    v = _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
    if (q5_kind(kind)) {
        uint64_t hb;
        memcpy(&hb, nib + HI_PLANE + 8 * j, 8);
        v = _mm512_or_si512(v, _mm512_maskz_mov_epi8(_cvtu64_mask64(hb), _mm512_set1_epi8(0x10)));
    }
    if (lut_kind(kind)) v = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)lut_table(kind))), v);
    return v;
}
/* a nibble block's 512 code bytes (B-tile order) */
VNNI __attribute__((always_inline)) static inline void split_nibbles(int kind, const uint8_t *nib, uint8_t *codes) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) _mm512_store_si512((void *)(codes + 64 * j), nib_row(kind, nib, j));
}

/* every cache line of the block PF_BLOCKS ahead (the panels are one contiguous stream; the
 * hardware prefetchers alone leave decode short of the read bandwidth). always_inline: a call
 * to a function whose only effect is __builtin_prefetch is a call without effects to GCC, which
 * deletes it where it does not inline it first (GCC 12 did so for every caller here). */
#ifndef PF_BLOCKS
#define PF_BLOCKS 32
#endif
VNNI __attribute__((always_inline)) static inline void prefetch_ahead(const uint8_t *blk, size_t bb) {
    const char *p = (const char *)blk + PF_BLOCKS * bb;
    for (size_t o = 0; o < bb; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
}

/* block b's scales d_w and offsets m_w of the panel's 16 rows */
VNNI __attribute__((always_inline)) static inline void block_scales(int kind, int wide, const uint8_t *pan, size_t bb, int64_t b,
                                                                   __m512 *dwp, __m512 *mwp) {
    const size_t codes = kind == K_Q8_0 || kind == K_U8 ? CODES_Q8 : q5_kind(kind) ? Q5_PARAMS : CODES_Q4;
    const uint8_t *blk = pan + (size_t)b * bb;
    __m512 dw, mw;
    if (ksb_kind(kind)) {
        const uint8_t *sp = ksb_params(kind, pan, b);
        const int j = (int)(b & 7);
        __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sp + 16 * j))));
        __m512 mn = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sp + 128 + 16 * j))));
        dw = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sp + 256))), sc);
        mw = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sp + 288))), mn);
        mw = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(mw), _mm512_set1_epi32((int)0x80000000u)));
    } else if (kind == K_IQ4_XS) {
        const uint8_t *sb = pan + (size_t)(b >> 3) * IXSB;
        dw = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sb)),
                           _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(sb + 32 + 16 * (b & 7))))));
        mw = _mm512_setzero_ps();
    } else {
        dw = wide ? _mm512_loadu_ps(blk + codes) : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + codes)));
        mw = signed_kind(kind) ? _mm512_setzero_ps() /* no offset (and nothing stored for one) */
             : kind == K_Q4_0 ? _mm512_mul_ps(dw, _mm512_set1_ps(-8.0f))
             : kind == K_Q5_0 ? _mm512_mul_ps(dw, _mm512_set1_ps(-16.0f))
             : wide           ? _mm512_loadu_ps(blk + codes + 64)
                            : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + codes + 32)));
    }
    *dwp = dw, *mwp = mw;
}
/* acc + the block's folded dots D = 256 dot1 + dot2 (16 rows, one token x) scaled: the float
 * steps every form of the kernel shares, d_w (d_x dot1 + d2_x dot2) = (d_w d2_x) D, d2_x = d_x /
 * 256 (one conversion, exact below 2^24, so for the 4- and 5-bit kinds; a multiply and an FMA;
 * + the offset's FMA): what a decode batch waits on */
VNNI __attribute__((always_inline)) static inline __m512 scale_block(int kind, __m512i D, __m512 dw, __m512 mw,
                                                                    const mxl_block_q8a2 *x, __m512 acc) {
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(D), _mm512_mul_ps(dw, _mm512_set1_ps(x->d2)), acc);
    if (!signed_kind(kind)) acc = _mm512_fmadd_ps(mw, _mm512_set1_ps(x->s), acc);
    return acc;
}
/* acc[t] += the block's dots against the two activation terms (cb1, cb2: [NT][16] int32, the
 * tile products) scaled: see the file comment */
VNNI __attribute__((always_inline)) static inline void post_block(int kind, int wide, int NT, const int32_t *cb1,
                                                                  const int32_t *cb2, const uint8_t *pan, size_t bb,
                                                                  const uint8_t *act, size_t as, int64_t b, __m512 *acc) {
    __m512 dw, mw;
    block_scales(kind, wide, pan, bb, b, &dw, &mw);
    /* within each dword, bytes 0..2 to 1..3 and 0 into byte 0: x << 8 for |x| < 2^23 on the
     * shuffle unit (the shifts share the FMA unit's port) */
    const __m512i shl8 = _mm512_set4_epi32(0x0E0D0C80, 0x0A090880, 0x06050480, 0x02010080);
#pragma GCC unroll 16
    for (int t = 0; t < NT; t++) {
        const mxl_block_q8a2 *x = (const mxl_block_q8a2 *)(act + (size_t)t * as) + b;
        /* the two dots folded in int32 (|dot1| < 2^21 for every kind) */
        __m512i i1 = _mm512_load_si512((const void *)(cb1 + 16 * t)), i2 = _mm512_load_si512((const void *)(cb2 + 16 * t));
        acc[t] = scale_block(kind, _mm512_add_epi32(_mm512_shuffle_epi8(i1, shl8), i2), dw, mw, x, acc[t]);
    }
}

/* One panel (pan, nb blocks of bb bytes) x NT tokens -> y[t * ys + n], n < nrows. pre: the
 * panel's Q4 codes split beforehand (nb x 512 bytes) or NULL. */
AMX __attribute__((always_inline)) static inline void panel_kernel(int kind, int wide, int NT, const uint8_t *pan, int64_t nb,
                                                                   size_t bb, const uint8_t *pre, const uint8_t *act,
                                                                   size_t as, float *y, int64_t ys, int nrows) {
    _Alignas(64) uint8_t split[2][512];
    _Alignas(64) int32_t cbuf[2][2][16 * 16]; /* [block parity][activation term] */
    const int nib = split_kind(kind);
    const int own_split = nib && !pre; /* split here, one block ahead of its tile load */
    __m512 acc[16];
#pragma GCC unroll 16
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    if (own_split) split_nibbles(kind, codes_at(kind, pan, 0, bb), split[0]);
    /* block b into accumulator tiles T1, T2 (the two activation terms; 0 / 1 for even b, 4 / 5
     * for odd: the next block's tile products do not wait for this one's stores), then
     * cbuf[P] */
#define STEP(b, P, T1, T2)                                                                                   \
    do {                                                                                                     \
        const uint8_t *blk_ = codes_at(kind, pan, b, bb);                                                   \
        const uint8_t *bsrc_ = !nib ? blk_ : pre ? pre + (size_t)(b) * 512 : split[P];                      \
        if (own_split && (b) + 1 < nb) split_nibbles(kind, codes_at(kind, pan, (b) + 1, bb), split[1 - (P)]); \
        prefetch_ahead(pan + (size_t)(b) * bb, bb);                                                          \
        _tile_loadd(3, bsrc_, 64);                                                                           \
        _tile_zero(T1);                                                                                      \
        _tile_zero(T2);                                                                                      \
        _tile_loadd(2, act + (size_t)(b) * XB + XQ1, as);                                                    \
        if (signed_kind(kind)) _tile_dpbssd(T1, 2, 3);                                                       \
        else _tile_dpbsud(T1, 2, 3);                                                                         \
        _tile_loadd(2, act + (size_t)(b) * XB + XQ2, as);                                                    \
        if (signed_kind(kind)) _tile_dpbssd(T2, 2, 3);                                                       \
        else _tile_dpbsud(T2, 2, 3);                                                                         \
        _tile_stored(T1, cbuf[P][0], 64);                                                                    \
        _tile_stored(T2, cbuf[P][1], 64);                                                                    \
    } while (0)
    for (int64_t b = 0; b < nb; b += 2) {
        STEP(b, 0, 0, 1);
        if (b > 0) post_block(kind, wide, NT, cbuf[1][0], cbuf[1][1], pan, bb, act, as, b - 1, acc);
        if (b + 1 < nb) STEP(b + 1, 1, 4, 5);
        post_block(kind, wide, NT, cbuf[0][0], cbuf[0][1], pan, bb, act, as, b, acc);
    }
#undef STEP
    if (nb % 2 == 0) post_block(kind, wide, NT, cbuf[1][0], cbuf[1][1], pan, bb, act, as, nb - 1, acc);
    const __mmask16 mk = (__mmask16)((1u << nrows) - 1);
#pragma GCC unroll 16
    for (int t = 0; t < NT; t++) _mm512_mask_storeu_ps(y + t * ys, mk, acc[t]);
}

/* panel_kernel for NT <= 8 tokens, both activation terms in one A tile: abuf holds per block
 * the 2 NT rows [term 1 of tokens 0..NT-1, term 2 of tokens 0..NT-1] x 32 bytes
 * (mxl_qamx_pair_token, made with the activations),
 * so a block is one tile product of 2 NT rows instead of two of NT. The tile unit's cost per
 * block is per instruction rather than per row, so this halves it for decode batches; the int32
 * dots and the float steps after them are the same, so are the bits. */
#ifndef PAIR_DEPTH
#define PAIR_DEPTH 3 /* blocks between a block's tile product and its float steps (2..3) */
#endif
AMX __attribute__((always_inline)) static inline void panel_kernel_pair(int kind, int wide, int NT, const uint8_t *pan, int64_t nb,
                                                                        size_t bb, const uint8_t *abuf, const uint8_t *act,
                                                                        size_t as, float *y, int64_t ys, int nrows) {
    _Alignas(64) uint8_t split[2][512];
    _Alignas(64) int32_t cbuf[4][16 * 16]; /* [block % 4]: rows t (term 1), NT + t (term 2) */
    const int nib = split_kind(kind);
    __m512 acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    if (nib) split_nibbles(kind, codes_at(kind, pan, 0, bb), split[0]);
    /* block b into accumulator tile T (0, 1, 4, 5 in turn: b % 4); the store of block b's tile
     * into cbuf[b % 4] waits two blocks (block b + 2's step stores TS, block b's tile), so it
     * does not stall on the product's latency, and its float steps PAIR_DEPTH blocks, so the
     * tile unit works ahead of them */
#define PSTEP(b, T, TS)                                                                                   \
    do {                                                                                                  \
        if ((b) < nb) {                                                                                   \
            const uint8_t *blk_ = codes_at(kind, pan, b, bb);                                            \
            if (nib && (b) + 1 < nb) split_nibbles(kind, codes_at(kind, pan, (b) + 1, bb), split[((b) + 1) & 1]); \
            prefetch_ahead(pan + (size_t)(b) * bb, bb);                                                   \
            _tile_loadd(3, nib ? split[(b) & 1] : blk_, 64);                                              \
            _tile_zero(T);                                                                                \
            _tile_loadd(2, abuf + (size_t)(b) * 64 * NT, 32);                                             \
            if (signed_kind(kind)) _tile_dpbssd(T, 2, 3);                                                 \
            else _tile_dpbsud(T, 2, 3);                                                                   \
        }                                                                                                 \
        if ((b) - 2 >= 0 && (b) - 2 < nb) _tile_stored(TS, cbuf[((b) - 2) & 3], 64);                     \
    } while (0)
#define PPOST(b)                                                                                          \
    do {                                                                                                  \
        if ((b) >= 0 && (b) < nb) post_block(kind, wide, NT, cbuf[(b) & 3], cbuf[(b) & 3] + 16 * NT, pan, bb, act, as, b, acc); \
    } while (0)
    for (int64_t b = 0; b < nb + PAIR_DEPTH; b += 4) {
        PSTEP(b, 0, 4); /* stores block b - 2's tile (4), and so on */
        PPOST(b - PAIR_DEPTH);
        PSTEP(b + 1, 1, 5);
        PPOST(b + 1 - PAIR_DEPTH);
        PSTEP(b + 2, 4, 0);
        PPOST(b + 2 - PAIR_DEPTH);
        PSTEP(b + 3, 5, 1);
        PPOST(b + 3 - PAIR_DEPTH);
    }
#undef PSTEP
#undef PPOST
    const __mmask16 mk = (__mmask16)((1u << nrows) - 1);
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) _mm512_mask_storeu_ps(y + t * ys, mk, acc[t]);
}
/* Outputs above this size (a core's L2) are written with non-temporal stores: a decode batch's
 * LM head (8 x 49152 logits) spent a third of its time on the stores' read-for-ownership misses
 * (2-core Zen 4: 8 tokens 170 TSC cycles per panel-block against 116 with the output in cache;
 * non-temporal 122). */
#ifndef NT_STORE_BYTES
#define NT_STORE_BYTES (1u << 20)
#endif
static inline int nt_stores(const mxl_weight *W, int64_t n_tok) {
    return (uint64_t)n_tok * (uint64_t)W->rows * sizeof(float) > NT_STORE_BYTES;
}

/* A panel's 16 row values of one token (mk: the rows that exist); nts: by a non-temporal store
 * where the line is whole and aligned (the output is larger than the caches: NT_STORE_BYTES) */
VNNI __attribute__((always_inline)) static inline void store_rows(float *y, __mmask16 mk, __m512 v, int nts) {
    if (nts && mk == 0xFFFF && !((uintptr_t)y & 63)) _mm512_stream_ps(y, v);
    else if (mk == 0xFFFF) _mm512_storeu_ps(y, v);
    else _mm512_mask_storeu_ps(y, mk, v);
}

/* The same int32 dots with AVX-512 VNNI instead of the tile unit: on CPUs without AMX-INT8 for
 * every token count, on those with it for a few tokens (the tile path's store / reload round
 * trips cost more than they save there). B-tile row kk of the block (the 16 rows' elements
 * 4kk..4kk+3) against token t's four bytes 4kk..4kk+3 broadcast, one vpdpbusd per row kk, gives
 * lane n = row n's dot, exactly as the tile product. The two terms fold in the register:
 * D = (dot1 << 8) + dot2 without a store, and post_block's float steps follow (scale_block).
 * vpdpbusd takes the unsigned operand first: the Q4 and U8 codes are unsigned; the Q8_0 codes
 * are made so (w + 128, one XOR) and 128 sum(v) is subtracted from D (exact; the activation
 * block's sum). NT <= 8 tokens, tokens inner so that 2 NT independent chains of products (a
 * token's two terms) interleave, with a code row, the dots and the accumulators in registers;
 * NP = 2 panels side by side for a few tokens (NP2_MAX). */
VNNI __attribute__((always_inline)) static inline void panel_vnni(int kind, int wide, int NT, int NP, const uint8_t *const *pans,
                                                                  int64_t nb, size_t bb, const uint8_t *act, size_t as,
                                                                  float *const *ys_out, int64_t ys, const int *nrows, int nts) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512 acc[2][8];
#pragma GCC unroll 2
    for (int q = 0; q < NP; q++)
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) acc[q][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *xb = act + (size_t)b * XB;
#pragma GCC unroll 2
        for (int q = 0; q < NP; q++) {
            const uint8_t *blk = codes_at(kind, pans[q], b, bb);
            prefetch_ahead(pans[q] + (size_t)b * bb, bb);
            /* code row kk outer, tokens inner, one chain per token and term: 2 NT independent
             * chains (8 were too few to cover the vpdpbusd latency at two a cycle) and one row
             * of codes live at a time */
            __m512i D1[8], D2[8];
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) D1[t] = _mm512_setzero_si512(), D2[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int kk = 0; kk < 8; kk++) {
                __m512i w;
                if (kind == K_Q8_0 || kind == K_U8) {
                    w = _mm512_loadu_si512((const void *)(blk + 64 * kk));
                    if (kind == K_Q8_0) w = _mm512_xor_si512(w, flip);
                } else {
                    w = nib_row(kind, blk, kk);
                    if (lut_kind(kind)) w = _mm512_xor_si512(w, flip); /* signed, made unsigned as Q8_0's */
                }
#pragma GCC unroll 8
                for (int t = 0; t < NT; t++) {
                    int32_t x1, x2;
                    memcpy(&x1, xb + (size_t)t * as + XQ1 + 4 * kk, 4);
                    memcpy(&x2, xb + (size_t)t * as + XQ2 + 4 * kk, 4);
                    D1[t] = _mm512_dpbusd_epi32(D1[t], w, _mm512_set1_epi32(x1));
                    D2[t] = _mm512_dpbusd_epi32(D2[t], w, _mm512_set1_epi32(x2));
                }
            }
            __m512i D[8];
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) D[t] = _mm512_add_epi32(_mm512_slli_epi32(D1[t], 8), D2[t]);
            __m512 dw, mw;
            block_scales(kind, wide, pans[q], bb, b, &dw, &mw);
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) {
                const mxl_block_q8a2 *x = (const mxl_block_q8a2 *)(xb + (size_t)t * as);
                if (signed_kind(kind)) D[t] = _mm512_sub_epi32(D[t], _mm512_set1_epi32(x->sum * 128)); /* |sum| < 2^20 */
                acc[q][t] = scale_block(kind, D[t], dw, mw, x, acc[q][t]);
            }
        }
    }
#pragma GCC unroll 2
    for (int q = 0; q < NP; q++) {
        const __mmask16 mk = (__mmask16)((1u << nrows[q]) - 1);
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) store_rows(ys_out[q] + t * ys, mk, acc[q][t], nts);
    }
}

/* ---- Q6_K ---- */

/* B-tile row j (64 code bytes) of a Q6_K / Q3_K / Q2_K block, unsigned: Q6_K nibbles | plane bits
 * << 4 (0..63), Q3_K plane bits | mask bit << 2 (0..7), Q2_K plane bits (0..3) */
VNNI __attribute__((always_inline)) static inline __m512i half_row(int kind, const uint8_t *blk, int j) {
    const uint8_t *codes = blk + 32;
    __m512i h = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(codes + half_plane(kind) + 16 * j)));
    h = _mm512_srlv_epi16(h, _mm512_setr_epi64(0, 0, 0x0002000200020002LL, 0x0002000200020002LL, 0x0004000400040004LL,
                                               0x0004000400040004LL, 0x0006000600060006LL, 0x0006000600060006LL));
    h = _mm512_and_si512(h, _mm512_set1_epi8(3));
    if (kind == K_Q2_K) return h;
    if (kind == K_Q3_K) {
        uint64_t hb;
        memcpy(&hb, codes + 128 + 8 * j, 8);
        return _mm512_or_si512(h, _mm512_maskz_mov_epi8(_cvtu64_mask64(hb), _mm512_set1_epi8(4)));
    }
    return _mm512_or_si512(nib_row(K_Q4_0, codes, j), _mm512_slli_epi16(h, 4));
}
/* a Q6_K / Q3_K / Q2_K block's 512 signed code bytes (u - half_off) */
VNNI static inline void half_split(int kind, const uint8_t *blk, uint8_t *codes) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        _mm512_store_si512((void *)(codes + 64 * j), _mm512_sub_epi8(half_row(kind, blk, j), _mm512_set1_epi8((char)half_off(kind))));
}
/* acc[t] += the two halves' dots (c[term][half], [NT][16] int32), the terms folded (256 dot1 +
 * dot2, exact in f32), x d * sc_h * d2_x; Q2_K then its mins, -(dmin * m_h) * d2_x x the half's
 * folded activation sum (the reference's order) */
/* block b's per-half row scales d * sc_h (d0, d1) and Q2_K's negated mins -(dmin * m_h) (m0, m1) */
VNNI __attribute__((always_inline)) static inline void half_scales(int kind, const uint8_t *pan, int64_t b, __m512 *d0_, __m512 *d1_,
                                                                  __m512 *m0_, __m512 *m1_) {
    const uint8_t *blk = half_block(kind, pan, b), *sbp = pan + (size_t)(b >> 3) * half_sb(kind);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sbp));
    const __m128i sb0 = _mm_loadu_si128((const __m128i *)blk), sb1 = _mm_loadu_si128((const __m128i *)(blk + 16));
    __m512 d0, d1, m0 = _mm512_setzero_ps(), m1 = _mm512_setzero_ps();
    if (kind == K_Q2_K) {
        const __m128i lo = _mm_set1_epi8(0x0F);
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sbp + 32)));
        const __m512i neg = _mm512_set1_epi32((int)0x80000000u);
        d0 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(sb0, lo))));
        d1 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(sb1, lo))));
        m0 = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(sb0, 4), lo))));
        m1 = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(sb1, 4), lo))));
        m0 = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(m0), neg));
        m1 = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(m1), neg));
    } else {
        d0 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sb0)));
        d1 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sb1)));
    }
    *d0_ = d0, *d1_ = d1, *m0_ = m0, *m1_ = m1;
}
VNNI __attribute__((always_inline)) static inline void post_q6(int kind, int NT, int32_t (*c)[2][4 * 16 * 4], const uint8_t *pan,
                                                              const uint8_t *act, size_t as, int64_t b, __m512 *acc) {
    __m512 d0, d1, m0, m1;
    half_scales(kind, pan, b, &d0, &d1, &m0, &m1);
#pragma GCC unroll 16
    for (int t = 0; t < NT; t++) {
        const mxl_block_q8a2 *x = (const mxl_block_q8a2 *)(act + (size_t)t * as) + b;
        const __m512 d2 = _mm512_set1_ps(x->d2);
        const __m512i D0 = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512((const void *)(c[0][0] + 16 * t)), 8),
                                            _mm512_load_si512((const void *)(c[1][0] + 16 * t)));
        const __m512i D1 = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512((const void *)(c[0][1] + 16 * t)), 8),
                                            _mm512_load_si512((const void *)(c[1][1] + 16 * t)));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(D0), _mm512_mul_ps(d0, d2), acc[t]);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(D1), _mm512_mul_ps(d1, d2), acc[t]);
        if (kind == K_Q2_K) {
            int32_t sx[2][2];
            half_sums(x->qs, sx[0]);
            half_sums(x->qs2, sx[1]);
            acc[t] = _mm512_fmadd_ps(_mm512_set1_ps((float)(256 * sx[0][0] + sx[1][0])), _mm512_mul_ps(m0, d2), acc[t]);
            acc[t] = _mm512_fmadd_ps(_mm512_set1_ps((float)(256 * sx[0][1] + sx[1][1])), _mm512_mul_ps(m1, d2), acc[t]);
        }
    }
}
AMX __attribute__((always_inline)) static inline void panel_kernel_q6(int kind, int NT, const uint8_t *pan, int64_t nb, const uint8_t *pre,
                                                                      const uint8_t *act, size_t as, float *y, int64_t ys, int nrows) {
    _Alignas(64) uint8_t split[2][512];
    _Alignas(64) int32_t cbuf[2][2][2][4 * 16 * 4]; /* [block parity][term][half] */
    __m512 acc[16];
#pragma GCC unroll 16
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *codes = pre ? pre + (size_t)b * 512 : split[b & 1];
        if (!pre) half_split(kind, half_block(kind, pan, b), split[b & 1]);
        prefetch_ahead(pan + (size_t)b * (half_sb(kind) / 8), half_sb(kind) / 8);
        const uint8_t *xa = act + (size_t)b * XB;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(4);
        _tile_zero(5);
        _tile_loadd(7, codes, 64); /* half 0 */
        _tile_loadd(6, xa + XQ1, as);
        _tile_dpbssd(0, 6, 7);
        _tile_loadd(6, xa + XQ2, as);
        _tile_dpbssd(4, 6, 7);
        _tile_loadd(7, codes + CODES_Q4, 64); /* half 1 */
        _tile_loadd(6, xa + XQ1 + 16, as);
        _tile_dpbssd(1, 6, 7);
        _tile_loadd(6, xa + XQ2 + 16, as);
        _tile_dpbssd(5, 6, 7);
        _tile_stored(0, cbuf[b & 1][0][0], 64);
        _tile_stored(1, cbuf[b & 1][0][1], 64);
        _tile_stored(4, cbuf[b & 1][1][0], 64);
        _tile_stored(5, cbuf[b & 1][1][1], 64);
        if (b > 0) post_q6(kind, NT, cbuf[(b - 1) & 1], pan, act, as, b - 1, acc);
    }
    post_q6(kind, NT, cbuf[(nb - 1) & 1], pan, act, as, nb - 1, acc);
    const __mmask16 mk = (__mmask16)((1u << nrows) - 1);
#pragma GCC unroll 16
    for (int t = 0; t < NT; t++) _mm512_mask_storeu_ps(y + t * ys, mk, acc[t]);
}
/* the VNNI form: unsigned codes, minus half_off * sum(x) per half (exact, as the signed tile dots) */
VNNI __attribute__((always_inline)) static inline void panel_vnni_q6(int kind, int NT, int NP, const uint8_t *const *pans, int64_t nb,
                                                                    const uint8_t *act, size_t as, float *const *ys_out,
                                                                    int64_t ys, const int *nrows, int nts) {
    const __m512i ones = _mm512_set1_epi8(1);
    __m512 acc[2][4];
    _Alignas(64) int32_t cb[2][2][2][4 * 16 * 4]; /* [panel][term][half] */
#pragma GCC unroll 2
    for (int q = 0; q < NP; q++)
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) acc[q][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
#pragma GCC unroll 2
        for (int q = 0; q < NP; q++) {
            const uint8_t *blk = half_block(kind, pans[q], b);
            prefetch_ahead(pans[q] + (size_t)b * (half_sb(kind) / 8), half_sb(kind) / 8);
            __m512i w[8];
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) w[j] = half_row(kind, blk, j);
#pragma GCC unroll 4
            for (int t = 0; t < NT; t++)
#pragma GCC unroll 2
                for (int term = 0; term < 2; term++) {
                    const int32_t *xq = (const int32_t *)(act + (size_t)t * as + (size_t)b * XB + (term ? XQ2 : XQ1));
#pragma GCC unroll 2
                    for (int h = 0; h < 2; h++) {
                        __m512i d = _mm512_setzero_si512(), sx = _mm512_setzero_si512();
#pragma GCC unroll 4
                        for (int j = 4 * h; j < 4 * h + 4; j++) {
                            __m512i x = _mm512_set1_epi32(xq[j]);
                            d = _mm512_dpbusd_epi32(d, w[j], x);
                            sx = _mm512_dpbusd_epi32(sx, ones, x);
                        }
                        _mm512_store_si512((void *)(cb[q][term][h] + 16 * t),
                                           half_off(kind) ? _mm512_sub_epi32(d, _mm512_slli_epi32(sx, __builtin_ctz((unsigned)half_off(kind)))) : d);
                    }
                }
            post_q6(kind, NT, cb[q], pans[q], act, as, b, acc[q]);
        }
    }
#pragma GCC unroll 2
    for (int q = 0; q < NP; q++) {
        const __mmask16 mk = (__mmask16)((1u << nrows[q]) - 1);
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) store_rows(ys_out[q] + t * ys, mk, acc[q][t], nts);
    }
}

/* The VNNI form for many tokens (prefill on CPUs without AMX; Q2_K on all): each token's
 * activations once as int16 v = 256 qs + qs2 (the q8a2 block's exact rounded value, |v| <=
 * 127 x 256; act16 [token][block][32]) and each panel's codes once as signed int8 pairs (pre:
 * per block, pair p of elements 2p, 2p + 1 of the 16 rows, 32 bytes); then vpdpwssd (int16 pairs,
 * int32 sums, |q v| x 16 < 2^31) gives per half D = sum q v = (dot1 << 8) + dot2 - half_off x
 * sums, the tile form's integers, in one product for both terms and with no offset term; then
 * post_q6's float steps in its order (half 0, half 1, then Q2_K's min terms on the half sums hs
 * [token][block][2] = 256 S1_h + S2_h): the same bits. */
VNNI static inline void half_split_pairs(int kind, const uint8_t *blk, uint8_t *out) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) { /* row j: lane n holds elements 4j..4j+3 of row n */
        const __m512i v = _mm512_sub_epi8(half_row(kind, blk, j), _mm512_set1_epi8((char)half_off(kind)));
        _mm256_store_si256((__m256i *)(void *)(out + 64 * j), _mm512_cvtepi32_epi16(v));                          /* pair 2j */
        _mm256_store_si256((__m256i *)(void *)(out + 64 * j + 32), _mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16))); /* 2j + 1 */
    }
}
/* act16 and (with_sums) hs of nt tokens */
VNNI static void half_acts(const uint8_t *act, size_t as, int64_t nt, int64_t nb, int16_t *a16, int32_t *hs) {
    for (int64_t t = 0; t < nt; t++)
        for (int64_t b = 0; b < nb; b++) {
            const mxl_block_q8a2 *x = (const mxl_block_q8a2 *)(act + (size_t)t * as) + b;
            const __m512i hi = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)x->qs));
            const __m512i lo = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)x->qs2));
            const __m512i v = _mm512_add_epi16(_mm512_slli_epi16(hi, 8), lo);
            _mm512_store_si512((void *)(a16 + (t * nb + b) * 32), v);
            if (hs) {
                const __m512i w = _mm512_madd_epi16(v, _mm512_set1_epi16(1)); /* 16 pair sums */
                hs[(t * nb + b) * 2] = _mm512_mask_reduce_add_epi32(0x00FF, w);
                hs[(t * nb + b) * 2 + 1] = _mm512_mask_reduce_add_epi32(0xFF00, w);
            }
        }
}
VNNI __attribute__((always_inline)) static inline void panel_vnni_half(int kind, int NT, const uint8_t *pan, const uint8_t *pre,
                                                                      const int16_t *a16, const int32_t *hs, int64_t nb, const uint8_t *act,
                                                                      size_t as, float *y, int64_t ys, int nrows, int nts) {
    __m512 acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *codes = pre + (size_t)b * 512, *xb = act + (size_t)b * XB;
        __m512 dh[2], mh[2];
        half_scales(kind, pan, b, &dh[0], &dh[1], &mh[0], &mh[1]);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512i D[8];
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) D[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int p = 8 * h; p < 8 * h + 8; p++) {
                const __m512i w = _mm512_cvtepi8_epi16(_mm256_load_si256((const __m256i *)(const void *)(codes + 32 * p)));
#pragma GCC unroll 8
                for (int t = 0; t < NT; t++) {
                    int32_t v;
                    memcpy(&v, a16 + (t * nb + b) * 32 + 2 * p, 4);
                    D[t] = _mm512_dpwssd_epi32(D[t], w, _mm512_set1_epi32(v));
                }
            }
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) {
                const mxl_block_q8a2 *x = (const mxl_block_q8a2 *)(xb + (size_t)t * as);
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(D[t]), _mm512_mul_ps(dh[h], _mm512_set1_ps(x->d2)), acc[t]);
            }
        }
        if (kind == K_Q2_K)
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) {
                const __m512 d2 = _mm512_set1_ps(((const mxl_block_q8a2 *)(xb + (size_t)t * as))->d2);
                acc[t] = _mm512_fmadd_ps(_mm512_set1_ps((float)hs[(t * nb + b) * 2]), _mm512_mul_ps(mh[0], d2), acc[t]);
                acc[t] = _mm512_fmadd_ps(_mm512_set1_ps((float)hs[(t * nb + b) * 2 + 1]), _mm512_mul_ps(mh[1], d2), acc[t]);
            }
    }
    const __mmask16 mk = (__mmask16)((1u << nrows) - 1);
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) store_rows(y + t * ys, mk, acc[t], nts);
}
#define VH_CASE(N) \
    case N: panel_vnni_half(KIND, N, pan, pre, a16, hs, nb, act, as, y, ys, nrows, nts); break;
#define VHKERNEL(name, KIND_)                                                                                      \
    VNNI static void name(int nt, const uint8_t *pan, const uint8_t *pre, const int16_t *a16, const int32_t *hs,  \
                          int64_t nb, const uint8_t *act, size_t as, float *y, int64_t ys, int nrows, int nts) {   \
        const int KIND = KIND_;                                                                                    \
        switch (nt) { VH_CASE(1) VH_CASE(2) VH_CASE(3) VH_CASE(4) VH_CASE(5) VH_CASE(6) VH_CASE(7) VH_CASE(8) }  \
    }
VHKERNEL(vhalf_q6_k, K_Q6_K)
VHKERNEL(vhalf_q3_k, K_Q3_K)
VHKERNEL(vhalf_q2_k, K_Q2_K)
typedef void (*vhalf_fn)(int, const uint8_t *, const uint8_t *, const int16_t *, const int32_t *, int64_t, const uint8_t *, size_t, float *,
                         int64_t, int, int);
/* each thread's act16 and hs: grown as needed, kept for the next call, freed when the thread
 * ends (a pthread key's destructor); NULL: no memory, and the caller takes the per-group form */
typedef struct half_buf {
    void *p;
    size_t n;
} half_buf;
static pthread_key_t g_half_key;
static bool g_half_key_ok;
static pthread_once_t g_half_once = PTHREAD_ONCE_INIT;
static void half_buf_free(void *v) {
    half_buf *b = v;
    mxl_aligned_free(b->p);
    mxl_free(b);
}
static void half_key_init(void) {
    g_half_key_ok = pthread_key_create(&g_half_key, half_buf_free) == 0;
}
static void *half_scratch(size_t n) {
    pthread_once(&g_half_once, half_key_init);
    if (!g_half_key_ok) return NULL;
    half_buf *b = pthread_getspecific(g_half_key);
    if (!b) {
        if (!(b = mxl_malloc(sizeof *b))) return NULL;
        *b = (half_buf){0};
        if (pthread_setspecific(g_half_key, b) != 0) {
            mxl_free(b);
            return NULL;
        }
    }
    if (n > b->n) {
        const size_t want = (n + 65535) & ~(size_t)65535;
        void *q = mxl_aligned_alloc(64, want);
        if (!q) return NULL;
        mxl_aligned_free(b->p);
        b->p = q, b->n = want;
    }
    return b->p;
}

#define NT_CASE(N) \
    case N: panel_kernel(KIND, WIDE, N, pan, nb, bb, pre, act, as, y, ys, nrows); break;
#define KERNEL(name, KIND_, WIDE_)                                                                                   \
    AMX static void name(int nt, const uint8_t *pan, int64_t nb, size_t bb, const uint8_t *pre, const uint8_t *act, \
                         size_t as, float *y, int64_t ys, int nrows) {                                               \
        const int KIND = KIND_, WIDE = WIDE_;                                                                        \
        switch (nt) {                                                                                                \
            NT_CASE(1) NT_CASE(2) NT_CASE(3) NT_CASE(4) NT_CASE(5) NT_CASE(6) NT_CASE(7) NT_CASE(8)                  \
            NT_CASE(9) NT_CASE(10) NT_CASE(11) NT_CASE(12) NT_CASE(13) NT_CASE(14) NT_CASE(15) default:              \
                panel_kernel(KIND, WIDE, 16, pan, nb, bb, pre, act, as, y, ys, nrows);                               \
        }                                                                                                            \
    }
#define PAIR_CASE(N) \
    case N: panel_kernel_pair(KIND, WIDE, N, pan, nb, bb, abuf, act, as, y, ys, nrows); break;
#define PKERNEL(name, KIND_, WIDE_)                                                                                \
    AMX static void name(int nt, const uint8_t *pan, int64_t nb, size_t bb, const uint8_t *abuf, const uint8_t *act, \
                         size_t as, float *y, int64_t ys, int nrows) {                                              \
        const int KIND = KIND_, WIDE = WIDE_;                                                                       \
        switch (nt) { PAIR_CASE(1) PAIR_CASE(2) PAIR_CASE(3) PAIR_CASE(4) PAIR_CASE(5) PAIR_CASE(6) PAIR_CASE(7) PAIR_CASE(8) } \
    }
PKERNEL(pkernel_q8_0, K_Q8_0, 0)
PKERNEL(pkernel_q4_0, K_Q4_0, 0)
PKERNEL(pkernel_q4_1, K_Q4_1, 0)
PKERNEL(pkernel_q4_1w, K_Q4_1, 1)
PKERNEL(pkernel_u8, K_U8, 0)
PKERNEL(pkernel_u8w, K_U8, 1)
PKERNEL(pkernel_q4_k, K_Q4_K, 0)
PKERNEL(pkernel_q5_0, K_Q5_0, 0)
PKERNEL(pkernel_q5_1, K_Q5_1, 0)
PKERNEL(pkernel_q5_k, K_Q5_K, 0)
PKERNEL(pkernel_iq4_nl, K_IQ4_NL, 0)
PKERNEL(pkernel_iq4_xs, K_IQ4_XS, 0)
PKERNEL(pkernel_mxfp4, K_MXFP4, 1)
KERNEL(kernel_q8_0, K_Q8_0, 0)
KERNEL(kernel_q4_0, K_Q4_0, 0)
KERNEL(kernel_q4_1, K_Q4_1, 0)
KERNEL(kernel_q4_1w, K_Q4_1, 1)
KERNEL(kernel_u8, K_U8, 0)
KERNEL(kernel_u8w, K_U8, 1)
KERNEL(kernel_q4_k, K_Q4_K, 0)
KERNEL(kernel_q5_0, K_Q5_0, 0)
KERNEL(kernel_q5_1, K_Q5_1, 0)
KERNEL(kernel_q5_k, K_Q5_K, 0)
KERNEL(kernel_iq4_nl, K_IQ4_NL, 0)
KERNEL(kernel_iq4_xs, K_IQ4_XS, 0)
KERNEL(kernel_mxfp4, K_MXFP4, 1)
#define NT6_CASE(N) \
    case N: panel_kernel_q6(KIND, N, pan, nb, pre, act, as, y, ys, nrows); break;
#define KERNEL6(name, KIND_)                                                                                           \
    AMX static void name(int nt, const uint8_t *pan, int64_t nb, size_t bb, const uint8_t *pre, const uint8_t *act,    \
                         size_t as, float *y, int64_t ys, int nrows) {                                                 \
        const int KIND = KIND_;                                                                                        \
        (void)bb;                                                                                                      \
        switch (nt) {                                                                                                  \
            NT6_CASE(1) NT6_CASE(2) NT6_CASE(3) NT6_CASE(4) NT6_CASE(5) NT6_CASE(6) NT6_CASE(7) NT6_CASE(8)            \
            NT6_CASE(9) NT6_CASE(10) NT6_CASE(11) NT6_CASE(12) NT6_CASE(13) NT6_CASE(14) NT6_CASE(15) default:         \
                panel_kernel_q6(KIND, 16, pan, nb, pre, act, as, y, ys, nrows);                                        \
        }                                                                                                              \
    }
KERNEL6(kernel_q6_k, K_Q6_K)
KERNEL6(kernel_q3_k, K_Q3_K)
KERNEL6(kernel_q2_k, K_Q2_K)
typedef void (*tile_fn)(int, const uint8_t *, int64_t, size_t, const uint8_t *, const uint8_t *, size_t, float *, int64_t, int);

/* np = 2 panels side by side (up to NP2_MAX tokens) or one */
#define VNNI_CASE(N)                                                                           \
    case N:                                                                                    \
        if (np == 2) panel_vnni(KIND, WIDE, N, 2, pans, nb, bb, act, as, yo, ys, nrows, nts);  \
        else panel_vnni(KIND, WIDE, N, 1, pans, nb, bb, act, as, yo, ys, nrows, nts);          \
        break;
#define VNNI_CASE1(N)                                                                          \
    case N: panel_vnni(KIND, WIDE, N, 1, pans, nb, bb, act, as, yo, ys, nrows, nts); break;
#define VKERNEL(name, KIND_, WIDE_)                                                                     \
    VNNI static void name(int nt, int np, const uint8_t *const *pans, int64_t nb, size_t bb, const uint8_t *act, \
                          size_t as, float *const *yo, int64_t ys, const int *nrows, int nts) {         \
        const int KIND = KIND_, WIDE = WIDE_;                                                           \
        switch (nt) { VNNI_CASE(1) VNNI_CASE(2) VNNI_CASE1(3) VNNI_CASE1(4) VNNI_CASE1(5) VNNI_CASE1(6) VNNI_CASE1(7) VNNI_CASE1(8) } \
    }
VKERNEL(vnni_q8_0, K_Q8_0, 0)
VKERNEL(vnni_q4_0, K_Q4_0, 0)
VKERNEL(vnni_q4_1, K_Q4_1, 0)
VKERNEL(vnni_q4_1w, K_Q4_1, 1)
VKERNEL(vnni_u8, K_U8, 0)
VKERNEL(vnni_u8w, K_U8, 1)
VKERNEL(vnni_q4_k, K_Q4_K, 0)
VKERNEL(vnni_q5_0, K_Q5_0, 0)
VKERNEL(vnni_q5_1, K_Q5_1, 0)
VKERNEL(vnni_q5_k, K_Q5_K, 0)
VKERNEL(vnni_iq4_nl, K_IQ4_NL, 0)
VKERNEL(vnni_iq4_xs, K_IQ4_XS, 0)
VKERNEL(vnni_mxfp4, K_MXFP4, 1)
typedef void (*vnni_fn)(int, int, const uint8_t *const *, int64_t, size_t, const uint8_t *, size_t, float *const *, int64_t,
                        const int *, int);
#define VNNI6_CASE(N)                                                                    \
    case N:                                                                              \
        if (np == 2) panel_vnni_q6(KIND, N, 2, pans, nb, act, as, yo, ys, nrows, nts);   \
        else panel_vnni_q6(KIND, N, 1, pans, nb, act, as, yo, ys, nrows, nts);           \
        break;
#define VKERNEL6(name, KIND_)                                                                                        \
    VNNI static void name(int nt, int np, const uint8_t *const *pans, int64_t nb, size_t bb, const uint8_t *act,    \
                          size_t as, float *const *yo, int64_t ys, const int *nrows, int nts) {                      \
        const int KIND = KIND_;                                                                                      \
        (void)bb;                                                                                                    \
        switch (nt) { VNNI6_CASE(1) VNNI6_CASE(2) VNNI6_CASE(3) VNNI6_CASE(4) }                                      \
    }
VKERNEL6(vnni_q6_k, K_Q6_K)
VKERNEL6(vnni_q3_k, K_Q3_K)
VKERNEL6(vnni_q2_k, K_Q2_K)

static const tile_fn k_tile[N_KINDS][2] = {{kernel_q8_0, 0}, {kernel_q4_0, 0}, {kernel_q4_1, kernel_q4_1w}, {kernel_u8, kernel_u8w},
                                           {kernel_q4_k, 0}, {kernel_q5_0, 0}, {kernel_q5_1, 0}, {kernel_q6_k, 0},
                                           {kernel_q5_k, 0}, {kernel_q3_k, 0}, {kernel_q2_k, 0},
                                           {kernel_iq4_nl, 0}, {kernel_iq4_xs, 0}, {0, kernel_mxfp4}};
/* (Q6_K, Q3_K and Q2_K have no pair form yet: their halves are K = 16 products of their own) */
static const tile_fn k_pair[N_KINDS][2] = {{pkernel_q8_0, 0}, {pkernel_q4_0, 0}, {pkernel_q4_1, pkernel_q4_1w}, {pkernel_u8, pkernel_u8w},
                                           {pkernel_q4_k, 0}, {pkernel_q5_0, 0}, {pkernel_q5_1, 0}, {0, 0},
                                           {pkernel_q5_k, 0}, {0, 0}, {0, 0},
                                           {pkernel_iq4_nl, 0}, {pkernel_iq4_xs, 0}, {0, pkernel_mxfp4}};
static const vnni_fn k_vnni[N_KINDS][2] = {{vnni_q8_0, 0}, {vnni_q4_0, 0}, {vnni_q4_1, vnni_q4_1w}, {vnni_u8, vnni_u8w},
                                           {vnni_q4_k, 0}, {vnni_q5_0, 0}, {vnni_q5_1, 0}, {vnni_q6_k, 0},
                                           {vnni_q5_k, 0}, {vnni_q3_k, 0}, {vnni_q2_k, 0},
                                           {vnni_iq4_nl, 0}, {vnni_iq4_xs, 0}, {0, vnni_mxfp4}};

/* beyond this many blocks a panel's split codes do not go on the stack (256 KB); token groups
 * then split them again */
#define PRE_MAX_BLOCKS 512
/* up to this many tokens the VNNI form runs where the tiles could (the same bits) */
#ifndef VNNI_MAX_TOKENS
#define VNNI_MAX_TOKENS 4
#endif
/* above this many tokens the half kinds' VNNI form splits a panel's codes once (panel_vnni_half) */
#define VHALF_MIN_TOKENS 4
/* up to this many tokens the VNNI form runs two panels side by side (two read streams in
 * flight); with more, the second panel's codes, dots and sums no longer fit the registers */
#define NP2_MAX 2
/* up to this many tokens the tile path takes the pair form (both terms in one A tile) */
#define PAIR_MAX_TOKENS MXL_QAMX_PAIR_MAX_TOKENS

size_t mxl_qamx_pair_bytes(const mxl_weight *W, int64_t n_tok) {
    layout L;
    if (n_tok <= VNNI_MAX_TOKENS || n_tok > PAIR_MAX_TOKENS || !mxl_qamx_tiles_available() || !layout_of(W, &L) || !k_pair[L.kind][L.wide])
        return 0;
    return (size_t)(W->cols / 32) * 2 * (size_t)n_tok * 32;
}

/* mxl_qamx_panels with tiles or (tiles false) the VNNI forms alone */
VNNI static void panels_at(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act, size_t act_stride, int64_t n_tok,
                           const uint8_t *abuf, float *y, int64_t ys, bool tiles) {
    layout L;
    MXL_ASSERT(layout_of(W, &L));
    const int64_t nb = W->cols / 32;
    const size_t bb = L.bb;
    /* (Q2_K takes it on AMX CPUs too: its tile form, four K = 16 products and the mins per block,
     * ran at 0.8x of this one in bench_quant_formats) */
    int16_t *a16 = NULL;
    if (n_tok > VHALF_MIN_TOKENS && half_kind(L.kind) && nb <= PRE_MAX_BLOCKS && (!tiles || L.kind == K_Q2_K))
        a16 = half_scratch((size_t)(n_tok * nb) * (64 + (L.kind == K_Q2_K ? 8 : 0)));
    if (a16) {
        /* the half kinds' many-token VNNI form: the activations widened once per call, the
         * codes split once per panel (on the stack) */
        const vhalf_fn vk = L.kind == K_Q6_K ? vhalf_q6_k : L.kind == K_Q3_K ? vhalf_q3_k : vhalf_q2_k;
        const int nts = nt_stores(W, n_tok);
        int32_t *hs = L.kind == K_Q2_K ? (int32_t *)(a16 + n_tok * nb * 32) : NULL;
        half_acts(act, act_stride, n_tok, nb, a16, hs);
        _Alignas(64) uint8_t pre_mem[nb * 512];
        for (int64_t p = p0; p < p1; p++) {
            const uint8_t *pan = panel_at(W, &L, p);
            for (int64_t b = 0; b < nb; b++) half_split_pairs(L.kind, half_block(L.kind, pan, b), pre_mem + (size_t)b * 512);
            for (int64_t t0 = 0; t0 < n_tok; t0 += 8) {
                const int nt = n_tok - t0 < 8 ? (int)(n_tok - t0) : 8;
                vk(nt, pan, pre_mem, a16 + t0 * nb * 32, hs ? hs + t0 * nb * 2 : NULL, nb, act + (size_t)t0 * act_stride, act_stride,
                   y + t0 * ys + p * PANEL, ys, panel_rows(W, p), nts);
            }
        }
        if (nts) _mm_sfence();
        return;
    }
    if (n_tok <= VNNI_MAX_TOKENS || !tiles) {
        vnni_fn vk = k_vnni[L.kind][L.wide];
        const int nts = nt_stores(W, n_tok);
        /* groups of up to 8 tokens (Q6_K: 4); for up to NP2_MAX tokens in all, panels p and
         * p + half side by side */
        const int group = half_kind(L.kind) ? 4 : 8;
        const int64_t half = n_tok <= NP2_MAX ? (p1 - p0 + 1) / 2 : p1 - p0;
        for (int64_t i = 0; i < half; i++) {
            const int np = n_tok <= NP2_MAX && p0 + half + i < p1 ? 2 : 1;
            const uint8_t *pans[2];
            int nrows[2];
            int64_t pp[2] = {p0 + i, p0 + half + i};
            for (int q = 0; q < np; q++) {
                pans[q] = panel_at(W, &L, pp[q]);
                nrows[q] = panel_rows(W, pp[q]);
            }
            for (int64_t t0 = 0; t0 < n_tok; t0 += group) {
                int nt = n_tok - t0 < group ? (int)(n_tok - t0) : group;
                float *yo[2] = {y + t0 * ys + pp[0] * PANEL, y + t0 * ys + pp[1] * PANEL};
                vk(nt, np, pans, nb, bb, act + (size_t)t0 * act_stride, act_stride, yo, ys, nrows, nts);
            }
        }
        if (nts) _mm_sfence(); /* the non-temporal stores before the caller's completion */
        return;
    }
    tile_fn kern = k_tile[L.kind][L.wide];
    /* nibble codes are split once per panel when more than one token group reads them (on the
     * stack: worker threads have room for PRE_MAX_BLOCKS x 512 bytes) */
    const int use_pre = (split_kind(L.kind) || half_kind(L.kind)) && n_tok > PANEL && nb <= PRE_MAX_BLOCKS;
    uint8_t pre_mem[use_pre ? nb * 512 + 64 : 1];
    uint8_t *pre = use_pre ? (uint8_t *)(((uintptr_t)pre_mem + 63) & ~(uintptr_t)63) : NULL;
    if (abuf) {
        MXL_ASSERT(mxl_qamx_pair_bytes(W, n_tok) > 0);
        configure(2 * (int)n_tok);
        for (int64_t p = p0; p < p1; p++) {
            const uint8_t *pan = panel_at(W, &L, p);
            int nrows = panel_rows(W, p);
            k_pair[L.kind][L.wide]((int)n_tok, pan, nb, bb, abuf, act, act_stride, y + p * PANEL, ys, nrows);
        }
        return;
    }
    int cfg_nt = 0;
    for (int64_t p = p0; p < p1; p++) {
        const uint8_t *pan = panel_at(W, &L, p);
        int nrows = panel_rows(W, p);
        if (use_pre)
            for (int64_t b = 0; b < nb; b++) {
                if (half_kind(L.kind)) half_split(L.kind, half_block(L.kind, pan, b), pre + (size_t)b * 512);
                else split_nibbles(L.kind, codes_at(L.kind, pan, b, bb), pre + (size_t)b * 512);
            }
        for (int64_t t0 = 0; t0 < n_tok; t0 += PANEL) {
            int nt = n_tok - t0 < PANEL ? (int)(n_tok - t0) : PANEL;
            if (nt != cfg_nt) configure(cfg_nt = nt);
            kern(nt, pan, nb, bb, pre, act + (size_t)t0 * act_stride, act_stride, y + t0 * ys + p * PANEL, ys, nrows);
        }
    }
}

void mxl_qamx_panels(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act, size_t act_stride,
                     int64_t n_tok, const uint8_t *abuf, float *y, int64_t ys) {
    panels_at(W, p0, p1, act, act_stride, n_tok, abuf, y, ys, mxl_qamx_tiles_available());
}

void mxl_qamx_panels_vnni(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act, size_t act_stride,
                          int64_t n_tok, const uint8_t *abuf, float *y, int64_t ys) {
    panels_at(W, p0, p1, act, act_stride, n_tok, NULL, y, ys, false);
    (void)abuf;
}
#else
bool mxl_qamx_tiles_cpu(void) { return false; }
size_t mxl_qamx_pair_bytes(const mxl_weight *W, int64_t n_tok) {
    (void)W; (void)n_tok;
    return 0;
}
void mxl_qamx_panels(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act, size_t act_stride,
                     int64_t n_tok, const uint8_t *abuf, float *y, int64_t ys) {
    (void)W; (void)p0; (void)p1; (void)act; (void)act_stride; (void)n_tok; (void)abuf; (void)y; (void)ys;
    MXL_ASSERT(0 && "no AMX on this build");
}
void mxl_qamx_panels_vnni(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act, size_t act_stride,
                          int64_t n_tok, const uint8_t *abuf, float *y, int64_t ys) {
    mxl_qamx_panels(W, p0, p1, act, act_stride, n_tok, abuf, y, ys);
}
#endif
