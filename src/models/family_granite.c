/* family_granite.c - Granite (transformers modeling_granite.py): Llama's block with four
 * multipliers: embeddings * embedding_multiplier, residual branches * residual_multiplier,
 * attention scale = attention_multiplier (instead of 1/sqrt(head_dim)), logits / logits_scaling. */
#include "models/decoder_family.h"

static mxl_status granite_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    double em, rm, am, ls;
    mxl_status st;
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

const mxl_decoder_family mxl_family_granite = {"granite", false, &mxl_names_llama, granite_setup};
