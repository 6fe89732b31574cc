/* family_deepseek.c - DeepSeek V2 and V3 (transformers modeling_deepseek_v2.py / _v3.py):
 * multi-head latent attention (models/mla.h; q_lora_rank null in V2-Lite, set in V2 / V3) and a
 * sparse MoE block (models/moe.h) on the layers from first_k_dense_replace on, with
 * n_shared_experts shared experts of moe_intermediate_size each run as one MLP.
 *   V2: softmax router, the top k not renormalised, times routed_scaling_factor; with
 *       topk_method "group_limited_greedy" only the topk_group best of n_group groups (a group's
 *       score: its best expert) are eligible. RoPE on complex pairs (GPT-J style).
 *   V3: DeepSeek V3's noaux_tc router (sigmoid, correction bias, groups scored by their two best,
 *       norm_topk_prob, routed_scaling_factor: GLM-4 MoE's); RoPE in GPT-J pairs with
 *       rope_interleave (the default), else NEOX halves.
 * The multi-token-prediction layers of the released V3 checkpoints (num_nextn_predict_layers,
 * stored after the last layer) are not run.
 * GGUF (llama.cpp deepseek2, both versions - and GLM-4.7-Flash's, whose appended MTP blocks
 * are left out; config_gguf.c tells V3 by its sigmoid gating): the
 * absorbed attn_k_b / attn_v_b of recent converters or attn_kv_b of older ones, leading dense
 * blocks, ffn_*_exps experts, ffn_*_shexp shared experts, exp_probs_b the V3 correction bias. */
#include <jansson.h>
#include <string.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

static mxl_status deepseek_gguf(mxl_family_ctx *c, bool v3) {
    mxl_status st;
    if ((st = mxl_family_gguf_drop_nextn(c))) return st; /* (GLM-4.7-Flash's MTP blocks) */
    c->hp->o_bias = false;
    c->hp->qkv_bias = false;
    if ((st = mxl_family_gguf_mla(c)) || (st = mxl_family_gguf_moe(c, false))) return st;
    if (c->hp->n_experts == 0) return MXL_OK;
    if (v3) return mxl_family_gguf_moe_sigmoid(c);
    /* V2: softmax, never renormalised, times expert_weights_scale */
    double scale;
    if ((st = mxl_family_gguf_number(c, "expert_weights_scale", 1.0, &scale))) return st;
    c->hp->moe_routed_scale = (float)(scale != 0 ? scale : 1.0);
    return MXL_OK;
}

static mxl_status deepseek_setup(mxl_family_ctx *c, bool v3) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    if (c->gguf) return deepseek_gguf(c, v3);
    hp->o_bias = hp->qkv_bias; /* attention_bias: q_a, kv_a and o_proj */
    if ((st = mxl_family_mla(c, true))) return st;
    if ((st = mxl_family_moe(c, "moe_intermediate_size", NULL, v3, false)) || (st = mxl_family_moe_first_dense(c, "first_k_dense_replace")) ||
        (st = mxl_family_moe_shared_count(c, "n_shared_experts")))
        return st;
    if (v3) return mxl_family_moe_sigmoid(c);
    hp->moe_norm_topk = false; /* V2's router never renormalises */
    if ((st = mxl_family_moe_scale_groups(c))) return st;
    json_t *m = c->raw ? json_object_get(c->raw, "topk_method") : NULL;
    const char *method = m && json_is_string(m) ? json_string_value(m) : "greedy";
    if (strcmp(method, "group_limited_greedy") == 0) {
        hp->moe_group_top = 1;
    } else if (strcmp(method, "greedy") == 0) {
        hp->moe_n_group = hp->moe_topk_group = 1; /* (the groups only count with group_limited_greedy) */
    } else {
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'topk_method' = '%s' is not supported (greedy, group_limited_greedy)",
                             c->ck->path, method);
    }
    return MXL_OK;
}

static mxl_status deepseek_v2_setup(mxl_family_ctx *c) { return deepseek_setup(c, false); }
static mxl_status deepseek_v3_setup(mxl_family_ctx *c) { return deepseek_setup(c, true); }

const mxl_decoder_family mxl_family_deepseek_v2 = {
    .model_type = "deepseek_v2", .registry_id = "deepseek_v2", .hf_class = "DeepseekV2ForCausalLM", .names = &mxl_names_deepseek_moe,
    .setup = deepseek_v2_setup, .gguf_arch = "deepseek2", .convert_check = mxl_family_gguf_not_converted,
};

const mxl_decoder_family mxl_family_deepseek_v3 = {
    .model_type = "deepseek_v3", .registry_id = "deepseek_v3", .hf_class = "DeepseekV3ForCausalLM", .names = &mxl_names_deepseek_moe,
    .setup = deepseek_v3_setup, .gguf_arch = "deepseek2", .convert_check = mxl_family_gguf_not_converted,
};
