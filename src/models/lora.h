/* lora.h - LoRA adapters on a loaded decoder: low-rank updates W' = W + scale * B A of its
 * attention and MLP projections, kept apart from the (possibly quantized) base weights and added
 * to each projection's output row by row (y += scale * B (A x)), so sequences in one batch may
 * run different adapters, or none, over the same base weights.
 *
 * Formats (the path decides):
 *   PEFT       a directory with adapter_config.json (peft_type LORA: r, lora_alpha, use_rslora,
 *              rank_pattern / alpha_pattern) and adapter_model.safetensors (*.lora_A.weight [r, in],
 *              *.lora_B.weight [out, r]); scale lora_alpha / r, or lora_alpha / sqrt(r) with rsLoRA;
 *   mlx-lm     a directory with adapter_config.json (fine_tune_type lora, lora_parameters.scale)
 *              and adapters.safetensors (*.lora_a [in, r], *.lora_b [r, out]); scale as given;
 *   GGUF       llama.cpp's convert_lora_to_gguf.py output (general.type adapter, adapter.type
 *              lora, adapter.lora.alpha; blk.N.<name>.weight.lora_a [r, in] / lora_b [out, r] in
 *              row-major order); scale alpha / r (alpha 0: 1).
 * Targets: each layer's q / k / v / o projections and gate / up / down MLP projections, by the
 * Hugging Face names (model.layers.N.self_attn.q_proj, ..., mlp.down_proj) or llama.cpp's
 * (blk.N.attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down). Anything else - another
 * module, DoRA, modules_to_save, embedding LoRA, a shape that does not fit the base weight, a
 * projection the layer does not have (a MoE layer's gate / up / down) or does not run through the
 * LoRA pass (latent attention's q_proj), a GGUF adapter on a safetensors base or the reverse
 * (GGUF stores Q and K rows permuted) - is refused by name when the adapter loads. A and B keep the adapter's dtype (F32, F16, BF16). */
#ifndef MXL_MODELS_LORA_H
#define MXL_MODELS_LORA_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/status.h"
#include "models/checkpoint.h"
#include "backends/weight.h"
#include "models/decoder.h"

#define MXL_LORA_MAX_RANK 1024

typedef enum mxl_lora_module {
    MXL_LORA_Q = 0,
    MXL_LORA_K,
    MXL_LORA_V,
    MXL_LORA_O,
    MXL_LORA_GATE,
    MXL_LORA_UP,
    MXL_LORA_DOWN,
    MXL_LORA_N_MODULES,
} mxl_lora_module;

/* One projection's update: delta y = scale * B (A x): A x by the backend's matmul (A a dense
 * f32 weight: r dot products as long as the input), then B (A x) by its lowrank_acc (B^T rows: B's
 * own dot products would be only r long). */
typedef struct mxl_lora_pair {
    void *a;      /* [r, in] */
    void *bt;     /* B^T [r, out] */
    mxl_weight wa; /* view of a (DENSE, the adapter's dtype) */
    mxl_dtype bt_dtype; /* F32, F16 or BF16, as the adapter stores B */
    int64_t r, in, out;
    float scale;  /* the adapter's own (alpha / r, ...) */
} mxl_lora_pair;

typedef struct mxl_lora {
    char *path;
    char format[8];       /* "peft", "mlx", "gguf" */
    int64_t n_layers;
    mxl_lora_pair *pairs; /* [n_layers * MXL_LORA_N_MODULES]; a == NULL: that projection has none */
    int n_pairs;          /* pairs with an update */
    int64_t max_r;        /* the widest rank: a pass's scratch */
    mxl_arena arena;      /* every A and B^T once loaded (packed), in the order a step reads them */
    bool packed;
} mxl_lora;

/* Loads the adapter at path for decoder d of checkpoint ck (shapes checked against d's weights). */
mxl_status mxl_lora_load(const char *path, const mxl_checkpoint *ck, const mxl_decoder *d, mxl_lora **out, mxl_error *err);
void mxl_lora_free(mxl_lora *l);
/* The update of layer l's projection m, or NULL. */
static inline const mxl_lora_pair *mxl_lora_at(const mxl_lora *l, int64_t layer, mxl_lora_module m) {
    if (!l || layer < 0 || layer >= l->n_layers) return NULL;
    const mxl_lora_pair *p = &l->pairs[layer * MXL_LORA_N_MODULES + m];
    return p->a ? p : NULL;
}
/* Asks the cache for p's A and B^T at once (a hint; no effect on results): a decode step reads
 * each pair once and cold, and a pair is tens of KB, so its lines issued up front arrive in
 * parallel instead of at the pace of the kernels that read them (about a third of their time). */
void mxl_lora_pair_prefetch(const mxl_lora_pair *p);
/* Fuses the adapter into d's weights at user scale `scale` (W' = W + scale * s B A, rounded to
 * W's dtype): no decode cost, and no scale or per-request choice afterwards. Dense (F32 / F16 /
 * BF16) base weights only: a quantized one is refused by name before anything changes (its
 * adapter stays a separate low-rank product). The new weights live in d's arena. */
mxl_status mxl_lora_fuse(const mxl_lora *l, mxl_decoder *d, float scale, mxl_error *err);

#endif
