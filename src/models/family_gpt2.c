/* family_gpt2.c - GPT-2 (transformers modeling_gpt2.py): learned absolute positions (wpe) added
 * to the token embeddings (wte), LayerNorm ln_1 / ln_2 / ln_f with bias, fused attention
 * projection c_attn [3*hidden] (rows q, k, v after transposition), plain MLP c_fc -> gelu_new ->
 * c_proj, biases everywhere, tied LM head, attention scale 1/sqrt(head_dim) when
 * scale_attn_weights (default) and divided by layer_idx + 1 with
 * scale_attn_by_inverse_layer_idx.
 * Three layouts of the same tensors, told apart by the embedding's name:
 *   transformer.wte.weight  transformers' GPT2LMHeadModel save: Conv1D matrices [in, out]
 *   wte.weight              the original checkpoints (openai-community/gpt2): bare names, [in, out]
 *   model.wte.weight        mlx-lm's conversion (mlx_lm/models/gpt2.py sanitize: every name gets a
 *                           "model." prefix and the four layer matrices are transposed to
 *                           nn.Linear's [out, in]), quantized or not; no lm_head (mlx-lm ties it
 *                           to wte), and wpe quantized along with wte when n_embd allows.
 * [in, out] matrices are transposed once at load into owned copies. A quantized checkpoint of the
 * first two layouts (MLX quantization of [in, out] rows would be meaningless), or one whose c_fc
 * has the [ffn, hidden] shape when ffn != hidden, is taken as [out, in] too.
 * GGUF (llama.cpp gpt2): the converter transposes the Conv1D matrices, so blk.N.attn_qkv (rows q,
 * k, v), attn_output, ffn_up, ffn_down are [out, in] as everywhere in GGUF; position_embd
 * [context_length, hidden]; LayerNorms with bias (attention.layer_norm_epsilon); biases on every
 * projection (all required, as llama.cpp's loader); ffn width feed_forward_length (the converter
 * writes 4 * n_embd); GELU (tanh); attention scale 1/sqrt(head_dim) (llama.cpp has no key for
 * scale_attn_by_inverse_layer_idx and never applies it); output.weight or the tied embedding. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/convert_family.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names = {
    .embed = "transformer.wte", .pos_embed = "transformer.wpe", .final_norm = "transformer.ln_f",
    .lm_head = "lm_head", .layers = "transformer.h.",
    .attn_norm = "ln_1", .qkv = "attn.c_attn", .o = "attn.c_proj", .ffn_norm = "ln_2", .up = "mlp.c_fc",
    .down = "mlp.c_proj", .conv1d = true,
};

static const mxl_decoder_names k_names_bare = {
    .embed = "wte", .pos_embed = "wpe", .final_norm = "ln_f", .lm_head = "lm_head", .layers = "h.",
    .attn_norm = "ln_1", .qkv = "attn.c_attn", .o = "attn.c_proj", .ffn_norm = "ln_2", .up = "mlp.c_fc",
    .down = "mlp.c_proj", .conv1d = true,
};

static const mxl_decoder_names k_names_mlx_lm = {
    .embed = "model.wte", .pos_embed = "model.wpe", .final_norm = "model.ln_f", .lm_head = "lm_head",
    .layers = "model.h.", .attn_norm = "ln_1", .qkv = "attn.c_attn", .o = "attn.c_proj", .ffn_norm = "ln_2",
    .up = "mlp.c_fc", .down = "mlp.c_proj", .conv1d = false,
};

static const mxl_decoder_names k_names_gguf = {
    .embed = "token_embd", .pos_embed = "position_embd", .final_norm = "output_norm", .lm_head = "output",
    .layers = "blk.", .attn_norm = "attn_norm", .qkv = "attn_qkv", .o = "attn_output", .ffn_norm = "ffn_norm",
    .up = "ffn_up", .down = "ffn_down",
};

/* GPT-2's GGUF block (llama.cpp gpt2 and starcoder): LayerNorms with bias, plain GELU (tanh) MLP,
 * biases everywhere, learned positions, GGUF names. */
static void gpt2_gguf_block(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    *c->names = k_names_gguf;
    hp->norm = MXL_NORM_LAYER;
    hp->norm_eps = (float)(!isnan(c->cfg->layer_norm_eps) ? c->cfg->layer_norm_eps : 1e-5);
    hp->mlp = MXL_MLP_PLAIN;
    hp->act = MXL_ACT_GELU_TANH;
    hp->qkv_bias = hp->o_bias = hp->mlp_bias = true;
    hp->learned_pos = true;
}

static mxl_status gpt2_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    gpt2_gguf_block(c);
    if (hp->n_kv_heads != hp->n_heads || hp->head_dim * hp->n_heads != hp->hidden)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: gpt2 needs head_count_kv = head_count (%lld / %lld) and head_count * key_length = embedding_length",
                             c->ck->path, (long long)hp->n_kv_heads, (long long)hp->n_heads);
    return MXL_OK;
}

/* GPT-2's block as GPT2Config / GPTBigCodeConfig say it: LayerNorms with bias
 * (layer_norm_epsilon), plain MLP of n_inner (4 * n_embd when null) with activation_function
 * (gelu_new / gelu_pytorch_tanh by default), biases everywhere, learned positions, attention
 * scale 1/sqrt(head_dim) unless scale_attn_weights is false. */
static mxl_status gpt2_block(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    bool scale_w;
    hp->norm = MXL_NORM_LAYER;
    hp->norm_eps = (float)(!isnan(c->cfg->layer_norm_eps) ? c->cfg->layer_norm_eps : 1e-5);
    hp->mlp = MXL_MLP_PLAIN;
    if (hp->ffn <= 0) hp->ffn = 4 * hp->hidden; /* n_inner: null */
    hp->act = MXL_ACT_GELU_TANH;
    if (c->cfg->hidden_act[0] && (st = mxl_family_act(c, "activation_function", c->cfg->hidden_act, &hp->act))) return st;
    hp->qkv_bias = hp->o_bias = hp->mlp_bias = true;
    hp->learned_pos = true;
    if ((st = mxl_family_bool(c, "scale_attn_weights", true, &scale_w))) return st;
    if (!scale_w) hp->attn_scale = 1.0f;
    return MXL_OK;
}

static mxl_status gpt2_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    bool cross, by_layer;
    if (c->gguf) return gpt2_gguf(c);
    if ((st = mxl_family_bool(c, "add_cross_attention", false, &cross))) return st;
    if (cross) return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'add_cross_attention' = true is not supported (decoder-only GPT-2)", c->ck->path);
    bool mlx_lm = false;
    if (!mxl_st_model_find(c->ck->st, "transformer.wte.weight")) {
        if (mxl_st_model_find(c->ck->st, "wte.weight")) {
            *c->names = k_names_bare;
        } else if (mxl_st_model_find(c->ck->st, "model.wte.weight")) {
            *c->names = k_names_mlx_lm;
            mlx_lm = true;
        }
    }
    if ((st = gpt2_block(c)) || (st = mxl_family_bool(c, "scale_attn_by_inverse_layer_idx", false, &by_layer))) return st;
    hp->attn_scale_by_layer = by_layer;

    /* orientation of the layer matrices (mlx-lm's names: always [out, in]) */
    if (mlx_lm) return MXL_OK;
    char name[256];
    snprintf(name, sizeof name, "%s0.%s.weight", c->names->layers, c->names->up);
    const mxl_st_entry *fc = mxl_st_model_find(c->ck->st, name);
    if (c->cfg->quant.mode != MXL_QUANT_NONE) c->names->conv1d = false;
    else if (fc && fc->tensor.ndim == 2 && hp->ffn != hp->hidden && fc->tensor.shape[0] == hp->ffn && fc->tensor.shape[1] == hp->hidden)
        c->names->conv1d = false;
    return MXL_OK;
}

static mxl_status gpt2_convert_check(const mxl_checkpoint *ck, mxl_error *err) {
    const mxl_model_config *c = &ck->config;
    if (c->num_key_value_heads != c->num_attention_heads || c->max_position_embeddings <= 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: gpt2 GGUF with grouped KV heads or no context_length is not converted", ck->path);
    return MXL_OK;
}

/* GPT2Config's own names for the sizes. */
static void gpt2_convert_config(const mxl_checkpoint *ck, json_t *j) {
    const mxl_model_config *c = &ck->config;
    json_object_set_new(j, "n_embd", json_integer(c->hidden_size));
    json_object_set_new(j, "n_layer", json_integer(c->num_hidden_layers));
    json_object_set_new(j, "n_head", json_integer(c->num_attention_heads));
    json_object_set_new(j, "n_positions", json_integer(c->max_position_embeddings));
    json_object_set_new(j, "n_inner", json_integer(c->intermediate_size));
    json_object_set_new(j, "layer_norm_epsilon", json_real(isnan(c->layer_norm_eps) ? 1e-5 : c->layer_norm_eps));
    json_object_set_new(j, "activation_function", json_string("gelu_new"));
    json_object_set_new(j, "scale_attn_weights", json_true());
    json_object_set_new(j, "scale_attn_by_inverse_layer_idx", json_false());
    json_object_set_new(j, "reorder_and_upcast_attn", json_false());
    json_object_set_new(j, "add_cross_attention", json_false());
}

const mxl_decoder_family mxl_family_gpt2 = {
    .model_type = "gpt2", .registry_id = "gpt2", .hf_class = "GPT2LMHeadModel", .names = &k_names, .setup = gpt2_setup,
    .gguf_arch = "gpt2", .convert_check = gpt2_convert_check, .convert_config = gpt2_convert_config,
};

/* GPT-BigCode (transformers modeling_gpt_bigcode.py: StarCoder 1, SantaCoder, WizardCoder): GPT-2's
 * block and names with nn.Linear matrices ([out, in]) and multi-query attention: c_attn
 * [hidden + 2 * head_dim, hidden] holds the query rows, then the one key head, then the one value
 * head. multi_query = false (c_attn viewed per head as q, k, v side by side) is refused by name.
 * GGUF (llama.cpp starcoder): GPT-2's GGUF names, head_count_kv 1, feed_forward_length 4 * n_embd
 * as the converter writes it, GELU (tanh), output.weight or the tied embedding; not converted back
 * (mxl_family_gguf_not_converted). */
static mxl_status gpt_bigcode_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    bool mq, cross;
    if (c->gguf) { /* llama.cpp starcoder: GPT-2's GGUF layout with head_count_kv 1 */
        gpt2_gguf_block(c);
        return MXL_OK;
    }
    if ((st = mxl_family_bool(c, "multi_query", true, &mq)) || (st = mxl_family_bool(c, "add_cross_attention", false, &cross)))
        return st;
    if (!mq) return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'multi_query' = false is not supported (per-head c_attn layout)", c->ck->path);
    if (cross) return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'add_cross_attention' = true is not supported (decoder-only)", c->ck->path);
    hp->n_kv_heads = 1;
    c->names->conv1d = false;
    return gpt2_block(c);
}

const mxl_decoder_family mxl_family_gpt_bigcode = {
    .model_type = "gpt_bigcode", .registry_id = "gpt_bigcode", .hf_class = "GPTBigCodeForCausalLM", .names = &k_names,
    .setup = gpt_bigcode_setup, .gguf_arch = "starcoder", .convert_check = mxl_family_gguf_not_converted,
};
