/* family_mla.c - the multi-head latent attention conventions shared by the MLA families
 * (decoder_family.h: mxl_family_mla, mxl_family_gguf_mla): the ranks and head widths from
 * config.json (transformers' DeepseekV2/V3 names) or from llama.cpp's deepseek2 metadata, the
 * cache geometry they imply (one latent row of qk_rope_head_dim + kv_lora_rank per position), the
 * RoPE on the rotary part and the softmax scale with YaRN's mscale. */
#include <jansson.h>
#include <math.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

/* transformers' yarn_get_mscale */
static double yarn_mscale(double factor, double m) { return factor <= 1.0 ? 1.0 : 0.1 * m * log(factor) + 1.0; }

/* The cache geometry and the RoPE over the first mla_rope_dim of each latent row (hp->rope holds
 * the model's RoPE for rotary_dim = mla_rope_dim). */
static void latent_geometry(mxl_decoder_hparams *hp, mxl_rope_style style) {
    hp->n_kv_heads = 1;
    hp->head_dim = hp->mla_rope_dim + hp->mla_kv_rank;
    hp->rope.head_dim = (int)hp->head_dim;
    hp->rope.rotary_dim = (int)hp->mla_rope_dim;
    hp->rope.style = style;
    hp->rope_local = hp->rope;
}

mxl_status mxl_family_mla(mxl_family_ctx *c, bool interleave_default) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    bool interleave;
    nm->q_a = "self_attn.q_a_proj";
    nm->q_a_norm = "self_attn.q_a_layernorm";
    nm->q_b = "self_attn.q_b_proj";
    nm->kv_a = "self_attn.kv_a_proj_with_mqa";
    nm->kv_a_norm = "self_attn.kv_a_layernorm";
    nm->kv_b = "self_attn.kv_b_proj";
    nm->k_b = "self_attn.embed_q"; /* mlx-lm's conversions: kv_b split into the absorbed maps */
    nm->v_b = "self_attn.unembed_out";
    if ((st = mxl_family_int(c, "q_lora_rank", 0, &hp->mla_q_rank)) || (st = mxl_family_int(c, "kv_lora_rank", 0, &hp->mla_kv_rank)) ||
        (st = mxl_family_int(c, "qk_nope_head_dim", 0, &hp->mla_nope_dim)) ||
        (st = mxl_family_int(c, "qk_rope_head_dim", 0, &hp->mla_rope_dim)) || (st = mxl_family_int(c, "v_head_dim", hp->mla_v_dim, &hp->mla_v_dim)) ||
        (st = mxl_family_bool(c, "rope_interleave", interleave_default, &interleave)))
        return st;
    const char *bad = hp->mla_kv_rank <= 0 ? "kv_lora_rank" : hp->mla_nope_dim <= 0 ? "qk_nope_head_dim"
                    : hp->mla_rope_dim < 2 || hp->mla_rope_dim % 2 ? "qk_rope_head_dim" : hp->mla_v_dim <= 0 ? "v_head_dim" : NULL;
    if (bad) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s' is missing or out of range", c->ck->path, bad);
    /* the RoPE's frequencies over the rotary part only: transformers' head_dim is qk_rope_head_dim
     * (DeepSeek), or qk_nope + qk_rope with a partial_rotary_factor giving the rotary part back
     * (Mistral 4): a head_dim whose share the factor leaves is the rotary part */
    json_t *rp = json_object_get(c->raw, "rope_parameters");
    json_t *prf = json_is_object(rp) ? json_object_get(rp, "partial_rotary_factor") : NULL;
    if (!json_is_number(prf)) prf = json_object_get(c->raw, "partial_rotary_factor");
    const double f = json_is_number(prf) ? json_number_value(prf) : 1.0;
    hp->head_dim = f > 0 && f < 1 ? (int64_t)llround((double)hp->mla_rope_dim / f) : hp->mla_rope_dim;
    if ((st = mxl_family_rope(c))) return st;
    if (hp->rope.rotary_dim != hp->mla_rope_dim)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json partial_rotary_factor %g does not rotate qk_rope_head_dim (%lld) dims", c->ck->path,
                             f, (long long)hp->mla_rope_dim);
    hp->mla_norm_eps = 1e-6f; /* DeepseekV2RMSNorm(q_lora_rank / kv_lora_rank): the class default */
    hp->attn_scale = (float)(1.0 / sqrt((double)(hp->mla_nope_dim + hp->mla_rope_dim)));
    if (hp->rope.scaling == MXL_ROPE_SCALING_YARN && hp->rope.mscale_all_dim > 0) {
        const double m = yarn_mscale(hp->rope.factor, hp->rope.mscale_all_dim);
        hp->attn_scale = (float)(hp->attn_scale * m * m);
    }
    latent_geometry(hp, interleave ? MXL_ROPE_GPTJ : MXL_ROPE_NEOX);
    return MXL_OK;
}

mxl_status mxl_family_gguf_mla(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double q_rank, kv_rank, k_len, v_len, k_mla, v_mla, rope_dim;
    char key[192];
    if ((st = mxl_family_gguf_number(c, "attention.q_lora_rank", 0, &q_rank)) ||
        (st = mxl_family_gguf_number(c, "attention.kv_lora_rank", 0, &kv_rank)) ||
        (st = mxl_family_gguf_number(c, "attention.key_length", 0, &k_len)) ||
        (st = mxl_family_gguf_number(c, "attention.value_length", (double)hp->mla_v_dim, &v_len)) ||
        (st = mxl_family_gguf_number(c, "attention.key_length_mla", 0, &k_mla)) ||
        (st = mxl_family_gguf_number(c, "attention.value_length_mla", 0, &v_mla)) ||
        (st = mxl_family_gguf_number(c, "rope.dimension_count", 0, &rope_dim)))
        return st;
    /* the converter writes key/value_length as the latent row (kv_rank + rope, kv_rank) and the
     * heads' widths as *_mla; older files only the heads' widths, in key/value_length */
    const double k_head = k_mla > 0 ? k_mla : k_len, v_head = v_mla > 0 ? v_mla : v_len, lim = 65536;
    if (!(kv_rank > 0 && kv_rank <= lim && q_rank >= 0 && q_rank <= lim && rope_dim >= 2 && rope_dim < k_head && k_head <= lim &&
          v_head > 0 && v_head <= lim && fmod(rope_dim, 2) == 0))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' or the head widths are missing or out of range", c->ck->path,
                             mxl_family_gguf_key(c, "attention.kv_lora_rank", key, sizeof key));
    hp->mla_q_rank = (int64_t)q_rank;
    hp->mla_kv_rank = (int64_t)kv_rank;
    hp->mla_rope_dim = (int64_t)rope_dim;
    hp->mla_nope_dim = (int64_t)k_head - hp->mla_rope_dim;
    hp->mla_v_dim = (int64_t)v_head;
    hp->mla_norm_eps = hp->norm_eps; /* llama.cpp: the model's RMSNorm epsilon */
    /* (head_dim is key_length here, whose share rope.dimension_count is: rotary_dim comes back whole) */
    if ((st = mxl_family_gguf_rope_norm(c))) return st;
    hp->attn_scale = (float)(1.0 / sqrt((double)(hp->mla_nope_dim + hp->mla_rope_dim)));
    latent_geometry(hp, MXL_ROPE_GPTJ);
    return MXL_OK;
}
