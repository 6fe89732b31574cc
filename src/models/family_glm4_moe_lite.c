/* family_glm4_moe_lite.c - GLM-4.7-Flash (transformers modeling_glm4_moe_lite.py): DeepSeek V3's
 * multi-head latent attention (models/mla.h) and router (sigmoid, correction bias, groups scored
 * by their two best, norm_topk_prob, routed_scaling_factor) with n_shared_experts shared experts;
 * which layers are sparse comes from mlp_layer_types ("dense" / "sparse"; transformers' default:
 * the first dense, the rest sparse). GGUF files of it are llama.cpp deepseek2 files (they run as
 * deepseek_v3). */
#include <jansson.h>
#include <string.h>

#include "models/decoder_family.h"

static mxl_status glm4_moe_lite_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    hp->o_bias = hp->qkv_bias;
    if ((st = mxl_family_mla(c, true)) || (st = mxl_family_moe(c, "moe_intermediate_size", NULL, true, false)) ||
        (st = mxl_family_moe_sigmoid(c)) || (st = mxl_family_moe_shared_count(c, "n_shared_experts")))
        return st;
    uint8_t *f = mxl_family_layer_flags(c);
    if (!f) return MXL_ERR_NOMEM;
    json_t *types = json_object_get(c->raw, "mlp_layer_types");
    if (!types || json_is_null(types)) {
        for (int64_t i = 1; i < hp->n_layers; i++) f[i] = 1;
    } else {
        if (!json_is_array(types) || (int64_t)json_array_size(types) != hp->n_layers)
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'mlp_layer_types' must list one of \"dense\" / \"sparse\" per layer (%lld)",
                                 c->ck->path, (long long)hp->n_layers);
        for (int64_t i = 0; i < hp->n_layers; i++) {
            const char *t = json_string_value(json_array_get(types, (size_t)i));
            if (!t || (strcmp(t, "dense") != 0 && strcmp(t, "sparse") != 0))
                return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'mlp_layer_types' entry %lld is not \"dense\" or \"sparse\"",
                                     c->ck->path, (long long)i);
            f[i] = strcmp(t, "sparse") == 0;
        }
    }
    hp->layer_is_moe = f;
    return MXL_OK;
}

const mxl_decoder_family mxl_family_glm4_moe_lite = {
    .model_type = "glm4_moe_lite", .registry_id = "glm4_moe_lite", .hf_class = "Glm4MoeLiteForCausalLM",
    .names = &mxl_names_deepseek_moe, .setup = glm4_moe_lite_setup,
};
