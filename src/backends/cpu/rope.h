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
 * Per-layer theta: use one config (and frequency table) per distinct theta. */
#ifndef MXL_BACKENDS_CPU_ROPE_H
#define MXL_BACKENDS_CPU_ROPE_H

#include <stdint.h>

typedef enum mxl_rope_style { MXL_ROPE_NEOX = 0, MXL_ROPE_GPTJ } mxl_rope_style;
typedef enum mxl_rope_scaling {
    MXL_ROPE_SCALING_NONE = 0,
    MXL_ROPE_SCALING_LINEAR,
    MXL_ROPE_SCALING_DYNAMIC,
    MXL_ROPE_SCALING_LLAMA3,
    MXL_ROPE_SCALING_YARN,
} mxl_rope_scaling;

typedef struct mxl_rope_cfg {
    int head_dim;
    int rotary_dim; /* even, <= head_dim (head_dim * partial_rotary_factor) */
    double theta;
    mxl_rope_style style;
    mxl_rope_scaling scaling;
    double factor;
    double original_max_pos;   /* LLAMA3 / YARN original context; DYNAMIC max_position_embeddings */
    double low_freq_factor;    /* LLAMA3 */
    double high_freq_factor;   /* LLAMA3 */
    double beta_fast, beta_slow; /* YARN (0 = defaults 32 and 1) */
    double mscale, mscale_all_dim; /* YARN (0 = unset) */
    double attention_factor;   /* YARN (0 = derived) */
    int yarn_no_truncate;      /* YARN: 1 = do not floor/ceil the correction range */
    /* Per-dimension frequency divisors [rotary_dim/2] or NULL: inv_freq[i] is divided by
     * freq_factors[i] before the scaling above (llama.cpp's rope_freqs.weight, ggml_rope_ext's
     * freq_factors: how Llama 3.1-style GGUFs carry the llama3 rescaling). Not owned. */
    const float *freq_factors;
    double attn_mul;           /* extra cos/sin scale on top of *attn_factor (GGUF
                                * rope.scaling.attn_factor); 0 = 1 */
} mxl_rope_cfg;

/* Fills inv_freq[rotary_dim/2] and *attn_factor (1 except YARN, times attn_mul when set) for
 * sequences of seq_len tokens (only DYNAMIC depends on it). */
void mxl_rope_freqs(const mxl_rope_cfg *c, int64_t seq_len, float *inv_freq, float *attn_factor);
/* Rotates n_heads heads stored contiguously ([n_heads, head_dim]) in place at position pos. */
void mxl_rope_apply(const mxl_rope_cfg *c, const float *inv_freq, float attn_factor, float *x,
                    int n_heads, int64_t pos);
/* The same in two steps, for callers that rotate several vectors at one position (a decoder's
 * queries and keys in every layer): cs[rotary_dim] = the position's cosines then sines (times
 * attn_factor), then the rotation with them; the same bits as mxl_rope_apply. */
void mxl_rope_table(const mxl_rope_cfg *c, const float *inv_freq, float attn_factor, int64_t pos, float *cs);
void mxl_rope_apply_table(const mxl_rope_cfg *c, const float *cs, float *x, int n_heads);

#endif
