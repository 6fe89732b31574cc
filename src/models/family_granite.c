/* family_granite.c - Granite (transformers modeling_granite.py): Llama's block with four
 * multipliers: embeddings * embedding_multiplier, residual branches * residual_multiplier,
 * attention scale = attention_multiplier (instead of 1/sqrt(head_dim)), logits / logits_scaling.
 * mlx-lm's conversions keep o_proj, down_proj and lm_head at 8 bits in groups of 64 whatever
 * bits were asked (its quant_predicate), written as per-module "quantization" entries.
 * GGUF (llama.cpp granite; the converter renames the multipliers): granite.embedding_scale,
 * granite.residual_scale, granite.attention.scale (absent or 0: the default 1, 1 and
 * 1/sqrt(head_dim), as llama.cpp), granite.logit_scale (required by llama.cpp's loader: absent
 * or 0 is refused by name; logits are divided by it); granite.rope.scaling.finetuned (default
 * true) = false switches RoPE off on every layer, as llama.cpp's Granite loader does. Q/K rows
 * permuted as llama's (GPT-J style RoPE); biases when the GGUF holds them (attn_q / attn_output /
 * ffn_down .bias). */
#include <jansson.h>
#include <math.h>

#include "models/config_gguf.h"
#include "models/convert_family.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static mxl_status granite_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double em, rm, am, ls;
    bool rope_on;
    char key[192];
    if ((st = mxl_family_gguf_number(c, "embedding_scale", 0.0, &em)) ||
        (st = mxl_family_gguf_number(c, "residual_scale", 0.0, &rm)) ||
        (st = mxl_family_gguf_number(c, "attention.scale", 0.0, &am)) ||
        (st = mxl_family_gguf_number(c, "logit_scale", NAN, &ls)) ||
        (st = mxl_family_gguf_bool(c, "rope.scaling.finetuned", true, &rope_on)))
        return st;
    if (isnan(ls))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' is missing (llama.cpp's granite loader requires it)", c->ck->path,
                             mxl_family_gguf_key(c, "logit_scale", key, sizeof key));
    if (ls == 0)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' must not be 0", c->ck->path,
                             mxl_family_gguf_key(c, "logit_scale", key, sizeof key));
    if (em != 0) hp->embed_scale = (float)em;
    if (rm != 0) hp->residual_scale = (float)rm;
    if (am != 0) hp->attn_scale = (float)am;
    hp->logit_scale = (float)(1.0 / ls);
    hp->qkv_bias = mxl_family_gguf_has_layer0(c, "attn_q", ".bias");
    hp->o_bias = mxl_family_gguf_has_layer0(c, "attn_output", ".bias");
    hp->mlp_bias = mxl_family_gguf_has_layer0(c, "ffn_down", ".bias");
    if ((st = mxl_family_gguf_rope_norm(c))) return st;
    if (!rope_on) {
        uint8_t *f = mxl_family_layer_flags(c);
        if (!f) return MXL_ERR_NOMEM;
        for (int64_t i = 0; i < hp->n_layers; i++) f[i] = 1;
        hp->layer_no_rope = f;
    }
    return MXL_OK;
}

mxl_status mxl_family_granite_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    double em, rm, am, ls;
    mxl_status st;
    if (c->gguf) return granite_gguf(c);
    if ((st = mxl_family_double(c, "embedding_multiplier", 1.0, &em)) ||
        (st = mxl_family_double(c, "residual_multiplier", 1.0, &rm)) ||
        (st = mxl_family_double(c, "attention_multiplier", 1.0, &am)) ||
        (st = mxl_family_double(c, "logits_scaling", 1.0, &ls)))
        return st;
    if (ls == 0) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'logits_scaling' must not be 0", c->ck->path);
    hp->embed_scale = (float)em;
    hp->residual_scale = (float)rm;
    hp->attn_scale = (float)am;
    hp->logit_scale = (float)(1.0 / ls);
    return mxl_family_rope(c);
}

static mxl_status granite_convert_check(const mxl_checkpoint *ck, mxl_error *err) {
    const mxl_gguf_kv *kv = mxl_gguf_find(ck->gguf, "granite.rope.scaling.finetuned");
    if (kv && kv->value.type == MXL_GGUF_TYPE_BOOL && !kv->value.v.b)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: granite without RoPE (metadata key 'granite.rope.scaling.finetuned' = false) is not converted", ck->path);
    double v = 0;
    mxl_status st = mxl_gguf_arch_number(ck->gguf, ck->path, "logit_scale", &v, err);
    if (st) return st;
    if (v == 0) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: metadata key 'granite.logit_scale' is missing or 0", ck->path);
    return MXL_OK;
}

/* The four scales as transformers' multipliers (0 in the GGUF: unset). */
static void granite_convert_config(const mxl_checkpoint *ck, json_t *j) {
    mxl_family_convert_config_llama(ck, j);
    double em = mxl_convert_arch_num(ck, "embedding_scale", 0), rm = mxl_convert_arch_num(ck, "residual_scale", 0),
           am = mxl_convert_arch_num(ck, "attention.scale", 0);
    json_object_set_new(j, "embedding_multiplier", json_real(em != 0 ? em : 1.0));
    json_object_set_new(j, "residual_multiplier", json_real(rm != 0 ? rm : 1.0));
    json_object_set_new(j, "attention_multiplier", json_real(am != 0 ? am : 1.0 / sqrt((double)ck->config.head_dim)));
    json_object_set_new(j, "logits_scaling", json_real(mxl_convert_arch_num(ck, "logit_scale", 1.0)));
    json_object_del(j, "head_dim"); /* transformers' Granite has none: hidden / heads */
}

const mxl_decoder_family mxl_family_granite = {
    .model_type = "granite", .registry_id = "granite", .hf_class = "GraniteForCausalLM", .names = &mxl_names_llama,
    .setup = mxl_family_granite_setup, .gguf_arch = "granite", .gguf_permuted_qk = true, .convert_check = granite_convert_check,
    .convert_config = granite_convert_config,
};
