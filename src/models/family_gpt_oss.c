/* family_gpt_oss.c - GPT-OSS (transformers modeling_gpt_oss.py): Llama's pre-norm block with q/k/v/o
 * biases, a learned attention sink logit per head on every layer (self_attn.sinks), sliding-window
 * layers from layer_types (by default every other one), YaRN RoPE in NEOX halves; every layer a
 * sparse MoE block: the router (with a bias) keeps its top k logits, softmaxed; the experts have
 * biases and GPT-OSS's clamped SwiGLU (swiglu_alpha, swiglu_limit: (clamp(up) + 1) *
 * g * sigmoid(alpha g), g = min(gate, limit)).
 * Expert layouts: transformers' own [E, hidden, 2 * intermediate] with gate and up interleaved
 * (mlp.experts.gate_up_proj, _bias; down_proj [E, intermediate, hidden]) bound as de-interleaved
 * transposed copies; mlx-lm's conversions (mlp.experts.gate_proj / up_proj / down_proj stacked,
 * with .bias); the released checkpoints' MXFP4 experts (gate_up_proj_blocks / _scales,
 * quantization_config mxfp4) repacked at load into ggml's MXFP4 blocks (decoder.c
 * bind_mxfp4_stacked), which GGUF files hold as they are. */
#include "models/decoder_family.h"
#include "models/family_gguf.h"

/* llama.cpp gpt-oss (src/models/openai-moe.cpp): the same block with its names (attn_sinks,
 * ffn_gate_inp with a bias, ffn_*_exps with biases), NEOX RoPE with the file's YaRN keys, every
 * other layer sliding from the first (attention.sliding_window), and the SwiGLU's alpha 1.702 and
 * limit 7 fixed as llama.cpp has them. */
static mxl_status gpt_oss_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    c->names->sinks = "attn_sinks.weight";
    c->names->ffn_norm = "post_attention_norm"; /* the MLP's pre-norm, under that name */
    mxl_family_gguf_attn_biases(c);
    if ((st = mxl_family_gguf_rope_neox(c)) || (st = mxl_family_gguf_moe(c, true))) return st;
    hp->moe_router_logit_bias = hp->moe_expert_bias = hp->attn_sinks = true;
    hp->moe_oai_alpha = 1.702f;
    hp->moe_oai_limit = 7.0f;
    return c->cfg->sliding_window > 0 ? mxl_family_sliding_pattern(c, 2, c->cfg->sliding_window) : MXL_OK;
}

static mxl_status gpt_oss_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    double alpha, limit;
    if (c->gguf) return gpt_oss_gguf(c);
    nm->sinks = "self_attn.sinks";
    nm->moe_router = "mlp.router";
    nm->experts = "mlp.experts.";
    nm->exps_gate = "mlp.experts.gate_proj", nm->exps_up = "mlp.experts.up_proj", nm->exps_down = "mlp.experts.down_proj";
    nm->exps_native_transposed = nm->exps_native_interleaved = true;
    if ((st = mxl_family_rope(c)) || (st = mxl_family_moe(c, NULL, NULL, true, false)) ||
        (st = mxl_family_double(c, "swiglu_alpha", 1.702, &alpha)) || (st = mxl_family_double(c, "swiglu_limit", 7.0, &limit)))
        return st;
    if (!(limit > 0) || !(alpha > 0))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'swiglu_alpha' and 'swiglu_limit' must be positive", c->ck->path);
    hp->moe_norm_topk = true; /* softmax over the top k logits */
    hp->moe_router_logit_bias = hp->moe_expert_bias = hp->attn_sinks = true;
    hp->moe_oai_alpha = (float)alpha;
    hp->moe_oai_limit = (float)limit;
    const int64_t window = c->cfg->sliding_window > 0 ? c->cfg->sliding_window : 0;
    if (window > 0 && !mxl_family_sliding_from_layer_types(c, window) && (st = mxl_family_sliding_pattern(c, 2, window))) return st;
    return MXL_OK;
}

const mxl_decoder_family mxl_family_gpt_oss = {
    .model_type = "gpt_oss", .registry_id = "gpt_oss", .hf_class = "GptOssForCausalLM", .names = &mxl_names_llama, .setup = gpt_oss_setup,
    .gguf_arch = "gpt-oss", .convert_check = mxl_family_gguf_not_converted, .quant_method = "mxfp4",
};
