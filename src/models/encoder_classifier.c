/* encoder_classifier.c - sequence-classification heads (see encoder_classifier.h). */
#include "models/encoder_classifier.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "models/encoder_common.h"

mxl_status mxl_seq_classifier_load(const mxl_checkpoint *ck, const mxl_encoder *enc, mxl_seq_classifier *c,
                                   mxl_error *err) {
    memset(c, 0, sizeof *c);
    mxl_arena_init(&c->arena, 4096);
    c->be = mxl_backend_host();
    c->arch = enc->arch;
    c->hidden = enc->hidden;
    c->n_labels = ck->config.num_labels > 0 ? ck->config.num_labels : 1;
    if (c->n_labels > 4096) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: %lld labels is implausible", ck->path, (long long)c->n_labels);
    int64_t H = c->hidden, L = c->n_labels;
    mxl_enc_binder b = {ck, &c->arena, "", err};
    switch (enc->arch) {
    case MXL_ENCODER_BERT:
        b.prefix = enc->bert.prefix;
        if (mxl_enc_matrix(&b, H, H, &c->dense, "pooler.dense.weight") || mxl_enc_vector(&b, H, &c->dense_b, "pooler.dense.bias"))
            return err ? err->status : MXL_ERR_FORMAT;
        b.prefix = "";
        if (mxl_enc_matrix(&b, L, H, &c->out, "classifier.weight") || mxl_enc_vector(&b, L, &c->out_b, "classifier.bias"))
            return err ? err->status : MXL_ERR_FORMAT;
        return MXL_OK;
    case MXL_ENCODER_XLM_ROBERTA:
        if (mxl_enc_matrix(&b, H, H, &c->dense, "classifier.dense.weight") || mxl_enc_vector(&b, H, &c->dense_b, "classifier.dense.bias") ||
            mxl_enc_matrix(&b, L, H, &c->out, "classifier.out_proj.weight") || mxl_enc_vector(&b, L, &c->out_b, "classifier.out_proj.bias"))
            return err ? err->status : MXL_ERR_FORMAT;
        return MXL_OK;
    case MXL_ENCODER_MODERNBERT: {
        const char *pooling, *act;
        bool cls_bias;
        if (mxl_enc_cfg_string(ck, "classifier_pooling", "cls", &pooling, err) ||
            mxl_enc_cfg_string(ck, "classifier_activation", "gelu", &act, err) ||
            mxl_enc_cfg_bool(ck, "classifier_bias", false, &cls_bias, err))
            return err ? err->status : MXL_ERR_FORMAT;
        if (strcmp(pooling, "cls") != 0 && strcmp(pooling, "mean") != 0)
            return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s/config.json: classifier_pooling '%s' (cls or mean)", ck->dir, pooling);
        c->mean_pool = strcmp(pooling, "mean") == 0;
        if (mxl_enc_activation(act, ck->path, &c->act, err)) return err->status;
        c->eps = enc->modernbert.eps;
        if (mxl_enc_matrix(&b, H, H, &c->dense, "head.dense.weight") ||
            (cls_bias && mxl_enc_vector(&b, H, &c->dense_b, "head.dense.bias")) ||
            mxl_enc_vector(&b, H, &c->norm_w, "head.norm.weight") ||
            (enc->modernbert.norm_bias && mxl_enc_vector(&b, H, &c->norm_b, "head.norm.bias")) ||
            mxl_enc_matrix(&b, L, H, &c->out, "classifier.weight") || mxl_enc_vector(&b, L, &c->out_b, "classifier.bias"))
            return err ? err->status : MXL_ERR_FORMAT;
        return MXL_OK;
    }
    case MXL_ENCODER_SIGLIP_TEXT:
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: the SigLIP text tower has no sequence-classification head", ck->path);
    }
    return mxl_error_set(err, MXL_ERR_INTERNAL, "unknown encoder");
}

void mxl_seq_classifier_free(mxl_seq_classifier *c) {
    mxl_arena_free(&c->arena);
    memset(c, 0, sizeof *c);
}

void mxl_seq_classifier_logits(const mxl_seq_classifier *c, const float *hidden, int64_t n, float *logits) {
    int64_t H = c->hidden;
    /* the head runs on one vector: a few H*H flops, not worth a pool */
    size_t s1 = c->be->ops->matmul_scratch_bytes(c->be, &c->dense, 1), s2 = c->be->ops->matmul_scratch_bytes(c->be, &c->out, 1);
    size_t scratch_floats = ((s1 > s2 ? s1 : s2) + sizeof(float) - 1) / sizeof(float);
    float *buf = mxl_malloc(((size_t)H * 2 + scratch_floats + 1) * sizeof(float));
    MXL_ASSERT(buf != NULL);
    float *p = buf, *d = buf + H, *scratch = buf + 2 * H;
    if (c->mean_pool) {
        for (int64_t i = 0; i < H; i++) {
            double s = 0;
            for (int64_t t = 0; t < n; t++) s += hidden[t * H + i];
            p[i] = (float)(s / (double)n);
        }
    } else {
        memcpy(p, hidden, (size_t)H * sizeof(float));
    }
    mxl_enc_linear(c->be, &c->dense, c->dense_b, p, 1, d, scratch, NULL);
    if (c->arch == MXL_ENCODER_MODERNBERT) {
        c->be->ops->act(c->be, c->act, d, H, d);
        c->be->ops->layernorm(c->be, d, c->norm_w, c->norm_b, H, c->eps, d);
    } else {
        for (int64_t i = 0; i < H; i++) d[i] = tanhf(d[i]);
    }
    mxl_enc_linear(c->be, &c->out, c->out_b, d, 1, logits, scratch, NULL);
    mxl_free(buf);
}
