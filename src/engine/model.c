/* model.c - the loaded text-generation model (model.h, model_internal.h): opening the checkpoint,
 * its decoder, tokenizer, chat template and thread pool; the merged EOS ids; the settings the
 * front ends change after loading (chat template, KV storage types) and the accessors. */
#include "engine/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/autotune.h"
#include "engine/memory_estimate.h"
#include "engine/model_internal.h"
#include "models/kv_pool.h"
#include "models/lora.h"

static void add_eos(mxl_gen_model *m, int64_t id) {
    if (id < 0 || id >= m->dec.hp.vocab || m->n_eos >= (int)(sizeof m->eos / sizeof m->eos[0])) return;
    for (int i = 0; i < m->n_eos; i++)
        if (m->eos[i] == id) return;
    m->eos[m->n_eos++] = (int32_t)id;
}

mxl_status mxl_gen_model_load(const char *path, int n_threads, mxl_gen_model **out, mxl_error *err) {
    *out = NULL;
    mxl_gen_model *m = mxl_calloc(1, sizeof *m);
    if (!m) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_status st = mxl_checkpoint_open(path, &m->ck, err);
    if (!st) {
        st = mxl_decoder_load(m->ck, &m->dec, err);
        m->dec_loaded = st == MXL_OK;
    }
    if (!st) st = m->ck->format == MXL_CHECKPOINT_GGUF ? mxl_tokenizer_load_gguf(m->ck->gguf, &m->tok, err)
                                                       : mxl_tokenizer_load(m->ck->dir, &m->tok, err);
    if (!st) st = mxl_chat_template_find(m->ck->path, NULL, &m->tsrc, err);
    if (!st) st = mxl_template_parse(m->tsrc.text, strlen(m->tsrc.text), m->tsrc.origin, &m->tmpl, err);
    if (!st) st = mxl_threadpool_create(n_threads, &m->pool, err);
    if (!st) { /* the vision side; a tower mlxcel does not run leaves the model text-only */
        mxl_error verr;
        mxl_status vs = mxl_vlm_load(m->ck, &m->vlm, &verr);
        if (vs == MXL_ERR_UNSUPPORTED) snprintf(m->no_vision, sizeof m->no_vision, "%s", verr.msg);
        else if (vs) st = mxl_error_set(err, vs, "%s", verr.msg);
        else if (!m->vlm) snprintf(m->no_vision, sizeof m->no_vision, "model %s was loaded without a vision tower (text-only checkpoint)", m->ck->path);
    }
    if (st) {
        mxl_gen_model_destroy(m);
        return st;
    }
    /* MLXCEL_AUTOTUNE=cache|1: the tuned knobs of this machine and shape (autotune.h) */
    const mxl_autotune_shape shape = {(int)m->dec.hp.head_dim, (int)m->dec.hp.n_heads, (int)m->dec.hp.n_kv_heads, MXL_KV_BLOCK};
    m->autotune_applied = mxl_autotune_load(m->dec.be, n_threads, &shape, m->autotune_note, sizeof m->autotune_note);
    size_t n, len;
    const char *t;
    int32_t bos = mxl_tokenizer_bos_id(m->tok), eos = mxl_tokenizer_eos_id(m->tok);
    if (bos >= 0 && (t = mxl_tokenizer_token(m->tok, bos, &len)) && len < sizeof m->bos_text) memcpy(m->bos_text, t, len);
    if (eos >= 0 && (t = mxl_tokenizer_token(m->tok, eos, &len)) && len < sizeof m->eos_text) memcpy(m->eos_text, t, len);
    const int32_t *e = mxl_tokenizer_eos_ids(m->tok, &n);
    for (size_t i = 0; i < n; i++) add_eos(m, e[i]);
    /* a GGUF's end-of-generation set is its tokenizer's, built as llama.cpp builds it (gguf_vocab.c) */
    if (m->ck->format != MXL_CHECKPOINT_GGUF)
        for (int i = 0; i < m->ck->config.n_eos; i++) add_eos(m, m->ck->config.eos_token_ids[i]);
    *out = m;
    return MXL_OK;
}

void mxl_gen_model_destroy(mxl_gen_model *m) {
    if (!m) return;
    mxl_threadpool_destroy(m->pool);
    mxl_template_destroy(m->tmpl);
    mxl_chat_template_source_free(&m->tsrc);
    mxl_tokenizer_destroy(m->tok);
    mxl_vlm_free(m->vlm);
    if (m->dec_loaded) mxl_decoder_free(&m->dec);
    mxl_checkpoint_close(m->ck);
    mxl_free(m);
}

const char *mxl_gen_model_template_origin(const mxl_gen_model *m, bool *generic) {
    if (generic) *generic = m->tsrc.generic;
    return m->tsrc.origin;
}

const mxl_checkpoint *mxl_gen_model_checkpoint(const mxl_gen_model *m) { return m->ck; }

const mxl_decoder_hparams *mxl_gen_model_hparams(const mxl_gen_model *m) { return &m->dec.hp; }

uint64_t mxl_gen_model_state_bytes(const mxl_gen_model *m) { return (uint64_t)m->dec.rec_state_floats * sizeof(float); }

mxl_status mxl_gen_model_set_kv(mxl_gen_model *m, const mxl_kv_flags *f, mxl_error *err) {
    mxl_kv_type k, v;
    int64_t edge;
    mxl_status st = mxl_kv_flags_resolve(f, &k, &v, &edge, err);
    if (st) return st;
    /* a side no flag names keeps the model's current type (AUTO: f16, f32 on the reference path) */
    const mxl_decoder_kv_opts o = {f->mode || f->k ? mxl_kv_type_decoder(k) : m->kv.k, f->mode || f->v ? mxl_kv_type_decoder(v) : m->kv.v, edge,
                                   f->k_last, mxl_kv_flags_group(f, &m->dec.hp)};
    if ((st = mxl_decoder_kv_check(&m->dec.hp, &o, err))) return st; /* the block formats' head_dim, latent attention */
    m->kv = o;
    return MXL_OK;
}

mxl_status mxl_gen_model_set_template(mxl_gen_model *m, const char *text, const char *origin, mxl_error *err) {
    mxl_template *t = NULL;
    mxl_status st = mxl_template_parse(text, strlen(text), origin, &t, err);
    if (st) return st;
    char *src = mxl_strdup(text), *org = mxl_strdup(origin);
    if (!src || !org) {
        mxl_free(src);
        mxl_free(org);
        mxl_template_destroy(t);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    mxl_template_destroy(m->tmpl);
    mxl_chat_template_source_free(&m->tsrc);
    m->tmpl = t;
    m->tsrc.text = src;
    m->tsrc.origin = org;
    m->tsrc.generic = false;
    return MXL_OK;
}

const char *mxl_gen_model_template_text(const mxl_gen_model *m) { return m->tsrc.text; }

const mxl_tokenizer *mxl_gen_model_tokenizer(const mxl_gen_model *m) { return m->tok; }

int64_t mxl_gen_model_vocab(const mxl_gen_model *m) { return m->dec.hp.vocab; }

int64_t mxl_gen_model_default_ctx(const mxl_gen_model *m) {
    int64_t c = m->dec.hp.max_ctx;
    return c > 0 && c < 8192 ? c : 8192;
}

const struct mxl_vlm *mxl_gen_model_vlm(const mxl_gen_model *m) { return m->vlm; }
const char *mxl_gen_model_no_vision(const mxl_gen_model *m) { return m->no_vision; }
struct mxl_threadpool *mxl_gen_model_pool(const mxl_gen_model *m) { return m->pool; }

mxl_status mxl_gen_model_load_adapter(const mxl_gen_model *m, const char *path, struct mxl_lora **out, mxl_error *err) {
    return mxl_lora_load(path, m->ck, &m->dec, out, err);
}

mxl_status mxl_gen_model_fuse_adapter(mxl_gen_model *m, const struct mxl_lora *lora, float scale, mxl_error *err) {
    return mxl_lora_fuse(lora, &m->dec, scale, err);
}

const char *mxl_gen_model_autotune_note(const mxl_gen_model *m, int *applied) {
    if (applied) *applied = m->autotune_applied;
    return m->autotune_note;
}
