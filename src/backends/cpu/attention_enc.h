/* attention_enc.h - bidirectional multi-head attention for encoders over packed sequences (no
 * padding, no mask beyond the sequence bounds, no KV cache): for each sequence s (tokens
 * [seq_start[s], seq_start[s+1])) and head h, out_i = softmax_j(scale * q_i . k_j) v_j over the
 * sequence's own tokens. q, k, v, out are [n_tokens, stride] with head h at h*head_dim.
 * The AVX-512 path (attention_enc_avx512.c) runs one (sequence, head) pair per task: K^T packed
 * to [head_dim][L], 4 queries at a time against 16 keys per vector, vector exp (Cephes, ~1 ulp),
 * the weighted V sum with broadcast probabilities; a head_dim that is not a multiple of 16 runs
 * on zero-padded copies of its rows (SigLIP-so400m's 72). The reference (attention_enc.c) is the plain loops in double-free f32 with
 * libm expf; tests compare the two. */
#ifndef MXL_BACKENDS_CPU_ATTENTION_ENC_H
#define MXL_BACKENDS_CPU_ATTENTION_ENC_H

#include <stddef.h>
#include <stdint.h>

#include "backends/cpu/cpu_features.h"
#include "backends/op_types.h"
#include "core/threadpool.h"


/* True when mxl_enc_attention has its AVX-512 path for head_dim at this level (the kernel table
 * has enc_attn_head; else it runs the slow reference, and callers with a faster general
 * attention should use that). */
int mxl_enc_attention_fast(int head_dim, mxl_cpu_isa isa);
/* Scratch floats per pool thread for sequences of at most `longest` tokens. */
size_t mxl_enc_attention_scratch_floats(int64_t longest, int head_dim);
/* scratch: n_threads * mxl_enc_attention_scratch_floats() floats. */
void mxl_enc_attention(const mxl_enc_attn *a, float *scratch, mxl_threadpool *pool, mxl_cpu_isa isa);
void mxl_enc_attention_ref(const mxl_enc_attn *a);

/* internal: one (sequence, head) on AVX-512; L tokens, q/k/v/out at the head's first element.
 * From MXL_ENC_ATTN_GEMM_MIN_L tokens on it runs as blocked GEMMs, whose scratch
 * mxl_enc_attention_gemm_floats gives. */
#define MXL_ENC_ATTN_GEMM_MIN_L 256
size_t mxl_enc_attention_gemm_floats(int64_t L, int d);
void mxl_enc_attention_head_avx512(const float *q, const float *k, const float *v, float *out, int64_t stride,
                                   int64_t L, int d, float scale, float *scratch);

#endif
