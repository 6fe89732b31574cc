/* encoder.c - the encoder family records and model_type -> encoder dispatch (see encoder.h). */
#include "models/encoder.h"

#include <string.h>

static const mxl_encoder_family k_encoders[] = {
    {"bert", MXL_ENCODER_BERT, {"bert_embedding", "bert_cross_encoder"}},
    {"xlm-roberta", MXL_ENCODER_XLM_ROBERTA, {"xlm_roberta_embedding", "xlm_roberta_cross_encoder"}},
    {"modernbert", MXL_ENCODER_MODERNBERT, {"modernbert_embedding", "modernbert_cross_encoder"}},
    {"siglip", MXL_ENCODER_SIGLIP_TEXT, {"siglip_text", NULL}},
};

size_t mxl_encoder_family_count(void) { return sizeof k_encoders / sizeof k_encoders[0]; }

const mxl_encoder_family *mxl_encoder_family_at(size_t i) { return i < mxl_encoder_family_count() ? &k_encoders[i] : NULL; }

static const mxl_encoder_family *find(const char *model_type) {
    for (size_t i = 0; i < mxl_encoder_family_count(); i++)
        if (strcmp(k_encoders[i].model_type, model_type) == 0) return &k_encoders[i];
    return NULL;
}

bool mxl_encoder_supports(const char *model_type) { return find(model_type) != NULL; }

const char *mxl_encoder_arch_name(mxl_encoder_arch a) {
    switch (a) {
    case MXL_ENCODER_BERT: return "bert";
    case MXL_ENCODER_XLM_ROBERTA: return "xlm-roberta";
    case MXL_ENCODER_MODERNBERT: return "modernbert";
    case MXL_ENCODER_SIGLIP_TEXT: return "siglip";
    }
    return "?";
}

mxl_status mxl_encoder_load(const mxl_checkpoint *ck, mxl_encoder *e, mxl_error *err) {
    memset(e, 0, sizeof *e);
    const char *mt = ck->config.model_type;
    const mxl_encoder_family *fam = find(mt);
    mxl_status st;
    if (!fam)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: model_type '%s' is not an encoder we run (bert, xlm-roberta, modernbert, siglip)", ck->path, mt);
    if (fam->arch == MXL_ENCODER_SIGLIP_TEXT) {
        e->arch = MXL_ENCODER_SIGLIP_TEXT;
        st = mxl_siglip_text_load(ck, &e->siglip, err);
        if (st) {
            mxl_siglip_text_free(&e->siglip);
            return st;
        }
        e->hidden = e->siglip.hidden;
        e->max_tokens = e->siglip.max_pos;
        e->pad_to_max = true;
        e->pooled_dim = e->siglip.proj;
        return MXL_OK;
    }
    if (fam->arch == MXL_ENCODER_MODERNBERT) {
        e->arch = MXL_ENCODER_MODERNBERT;
        st = mxl_modernbert_load(ck, &e->modernbert, err);
        if (st) {
            mxl_modernbert_free(&e->modernbert);
            return st;
        }
        e->hidden = e->modernbert.hidden;
        e->max_tokens = e->modernbert.max_pos;
        e->pooled_dim = e->hidden;
        return MXL_OK;
    }
    st = mxl_bert_load(ck, &e->bert, err);
    if (st) {
        mxl_bert_free(&e->bert);
        return st;
    }
    e->arch = e->bert.kind == MXL_BERT_KIND_XLM_ROBERTA ? MXL_ENCODER_XLM_ROBERTA : MXL_ENCODER_BERT;
    e->hidden = e->bert.hidden;
    e->max_tokens = e->bert.max_tokens;
    e->uses_type_ids = e->arch == MXL_ENCODER_BERT && e->bert.n_types > 1;
    e->pair_double_sep = e->arch == MXL_ENCODER_XLM_ROBERTA;
    e->pooled_dim = e->hidden;
    return MXL_OK;
}

void mxl_encoder_free(mxl_encoder *e) {
    if (e->arch == MXL_ENCODER_MODERNBERT) mxl_modernbert_free(&e->modernbert);
    else if (e->arch == MXL_ENCODER_SIGLIP_TEXT) mxl_siglip_text_free(&e->siglip);
    else mxl_bert_free(&e->bert);
}

mxl_status mxl_encoder_forward(const mxl_encoder *e, const mxl_encoder_batch *b, mxl_threadpool *pool,
                               float *hidden, mxl_error *err) {
    if (e->arch == MXL_ENCODER_MODERNBERT) return mxl_modernbert_forward_batch(&e->modernbert, b, pool, hidden, err);
    if (e->arch == MXL_ENCODER_SIGLIP_TEXT) return mxl_siglip_text_forward_batch(&e->siglip, b, pool, hidden, err);
    return mxl_bert_forward_batch(&e->bert, b, pool, hidden, err);
}

void mxl_encoder_pooled_head(const mxl_encoder *e, const float *x, float *y) {
    if (e->arch == MXL_ENCODER_SIGLIP_TEXT) mxl_siglip_text_head(&e->siglip, x, y);
    else if (y != x) memmove(y, x, (size_t)e->hidden * sizeof *y);
}
