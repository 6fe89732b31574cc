/* rope.h - rotary position embeddings (RoFormer; scaling variants as Hugging Face transformers'
 * modeling_rope_utils.py computes them).
 *
 * Frequencies: inv_freq[i] = 1 / theta^(2i / rotary_dim), i < rotary_dim/2, then rescaled:
 *   LINEAR:  inv_freq / factor;
 *   DYNAMIC: (NTK) theta' = theta * (factor*seq_len/orig - (factor-1))^(d/(d-2)) when
 *            seq_len > orig;
 *   LLAMA3:  wavelengths beyond orig/low_freq_factor divided by factor, below
 *            orig/high_freq_factor kept, smooth blend between;
 *   YARN:    blend of interpolated and extrapolated frequencies over the correction range from
 *            beta_fast/beta_slow, and cos/sin scaled by the attention factor
 *            (0.1*ln(factor)+1, or the mscale/mscale_all_dim ratio, or given).
 * Rotation of a head x[head_dim] at position p, angle_i = p * inv_freq[i] (f32, as HF):
 *   NEOX style (HF rotate_half; Llama, Qwen, Gemma...): pairs (i, i + rot/2);
 *   GPTJ style (interleaved): pairs (2i, 2i+1).
 * Partial rotary: only the first rotary_dim elements rotate; the rest pass through.
 * inverse: the angle's sign flipped (the table's sines negated). 
 * Per-layer theta: use one config (and frequency table) per distinct theta. */
#ifndef MXL_BACKENDS_CPU_ROPE_H
#define MXL_BACKENDS_CPU_ROPE_H

#include <stdint.h>

#include "backends/op_types.h"

/* Rotates n_heads heads stored contiguously ([n_heads, head_dim]) in place at position pos. */
void mxl_rope_apply(const mxl_rope_cfg *c, const float *inv_freq, float attn_factor, float *x,
                    int n_heads, int64_t pos);
/* The same in two steps, for callers that rotate several vectors at one position (a decoder's
 * queries and keys in every layer): cs[rotary_dim] = the position's cosines then sines (times
 * attn_factor), then the rotation with them; the same bits as mxl_rope_apply. */
void mxl_rope_table(const mxl_rope_cfg *c, const float *inv_freq, float attn_factor, int64_t pos, float *cs);
void mxl_rope_apply_table(const mxl_rope_cfg *c, const float *cs, float *x, int n_heads);

#endif
