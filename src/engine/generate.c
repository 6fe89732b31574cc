/* generate.c - single-sequence generation request (generate.h). */
#include "engine/generate.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/threadpool.h"
#include "models/checkpoint.h"
#include "models/decoder.h"
#include "template/template.h"
#include "tokenizer/tokenizer.h"

struct mxl_gen_model {
    mxl_checkpoint *ck;
    mxl_decoder dec;
    bool dec_loaded;
    mxl_tokenizer *tok;
    mxl_template *tmpl;
    mxl_chat_template_source tsrc;
    mxl_threadpool *pool;
    /* every id that ends generation: the tokenizer's (generation_config / vocab) and the
     * checkpoint config's, merged once at load */
    int32_t eos[64];
    int n_eos;
};

static void add_eos(mxl_gen_model *m, int64_t id) {
    if (id < 0 || id >= m->dec.hp.vocab || m->n_eos >= (int)(sizeof m->eos / sizeof m->eos[0])) return;
    for (int i = 0; i < m->n_eos; i++)
        if (m->eos[i] == id) return;
    m->eos[m->n_eos++] = (int32_t)id;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

mxl_status mxl_gen_model_load(const char *path, int n_threads, mxl_gen_model **out, mxl_error *err) {
    *out = NULL;
    mxl_gen_model *m = calloc(1, sizeof *m);
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
    if (st) {
        mxl_gen_model_destroy(m);
        return st;
    }
    size_t n;
    const int32_t *e = mxl_tokenizer_eos_ids(m->tok, &n);
    for (size_t i = 0; i < n; i++) add_eos(m, e[i]);
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
    if (m->dec_loaded) mxl_decoder_free(&m->dec);
    mxl_checkpoint_close(m->ck);
    free(m);
}

const char *mxl_gen_model_template_origin(const mxl_gen_model *m, bool *generic) {
    if (generic) *generic = m->tsrc.generic;
    return m->tsrc.origin;
}

/* The prompt as the model sees it: the chat template's render, or the raw text. */
static mxl_status build_prompt(mxl_gen_model *m, const mxl_gen_request *req, mxl_token_ids *ids, mxl_error *err) {
    if (!req->chat)
        return mxl_tokenizer_encode(m->tok, req->prompt, strlen(req->prompt), MXL_TOK_ADD_SPECIAL | MXL_TOK_PARSE_SPECIAL, ids, err);
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", req->prompt);
    if (!msgs) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    char bos[256] = "", eos[256] = "";
    size_t len;
    const char *s;
    if (mxl_tokenizer_bos_id(m->tok) >= 0 && (s = mxl_tokenizer_token(m->tok, mxl_tokenizer_bos_id(m->tok), &len)) && len < sizeof bos)
        memcpy(bos, s, len), bos[len] = 0;
    if (mxl_tokenizer_eos_id(m->tok) >= 0 && (s = mxl_tokenizer_token(m->tok, mxl_tokenizer_eos_id(m->tok), &len)) && len < sizeof eos)
        memcpy(eos, s, len), eos[len] = 0;
    mxl_chat_render_params p = {0};
    p.messages = msgs;
    p.add_generation_prompt = true;
    p.bos_token = bos;
    p.eos_token = eos;
    char *text = NULL;
    size_t text_len = 0;
    mxl_template_error_kind kind;
    mxl_status st = mxl_chat_template_render(m->tmpl, &p, &text, &text_len, &kind, err);
    json_decref(msgs);
    if (st) return st;
    /* transformers' apply_chat_template tokenizes the render without adding special tokens */
    st = mxl_tokenizer_encode(m->tok, text, text_len, MXL_TOK_PARSE_SPECIAL, ids, err);
    free(text);
    return st;
}

static bool is_eos(const mxl_gen_model *m, int32_t id) {
    for (int i = 0; i < m->n_eos; i++)
        if (m->eos[i] == id) return true;
    return false;
}

mxl_status mxl_gen_run(mxl_gen_model *m, const mxl_gen_request *req, mxl_gen_text_fn on_text,
                       void *ctx, mxl_gen_stats *stats, mxl_error *err) {
    memset(stats, 0, sizeof *stats);
    stats->finish_reason = "length";
    const mxl_decoder_hparams *hp = &m->dec.hp;
    mxl_token_ids ids = {0};
    mxl_decoder_state *st_dec = NULL;
    mxl_sampler *smp = NULL;
    mxl_detok_stream *ds = NULL;
    float *logits = NULL;
    char *piece = NULL;
    size_t piece_len = 0;
    mxl_status st = build_prompt(m, req, &ids, err);
    if (st) goto out;
    if (ids.n == 0) {
        st = mxl_error_set(err, MXL_ERR_ARG, "the prompt is empty after tokenization");
        goto out;
    }
    int64_t ctx_len = req->max_context > 0 ? req->max_context : (hp->max_ctx > 0 && hp->max_ctx < 8192 ? hp->max_ctx : 8192);
    if ((int64_t)ids.n >= ctx_len) {
        st = mxl_error_set(err, MXL_ERR_ARG, "the prompt has %zu tokens, which does not fit the context of %lld", ids.n, (long long)ctx_len);
        goto out;
    }
    int64_t budget = ctx_len - (int64_t)ids.n;
    if (req->max_tokens >= 0 && req->max_tokens < budget) budget = req->max_tokens;
    if ((st = mxl_decoder_state_create(&m->dec, ctx_len, 256, m->pool, &st_dec, err))) goto out;
    if ((st = mxl_sampler_create(&req->sampling, (int32_t)hp->vocab, &smp, err))) goto out;
    if ((st = mxl_detok_stream_create(m->tok, true, &ds, err))) goto out;
    logits = malloc((size_t)hp->vocab * sizeof(float));
    /* history: prompt then generated ids, for the penalties */
    size_t cap = ids.n + (size_t)budget + 1;
    int32_t *hist = realloc(ids.ids, cap * sizeof(int32_t));
    if (!logits || !hist) {
        st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        goto out;
    }
    ids.ids = hist;
    ids.cap = cap;
    stats->prompt_tokens = (int64_t)ids.n;
    double t0 = now_ms();
    if ((st = mxl_decoder_forward(&m->dec, st_dec, ids.ids, (int64_t)ids.n, logits, err))) goto out;
    double t1 = now_ms();
    stats->prefill_ms = t1 - t0;
    for (int64_t i = 0; i < budget; i++) {
        for (int64_t v = 0; v < hp->vocab; v++)
            if (!isfinite(logits[v]) && logits[v] != -INFINITY) {
                st = mxl_error_set(err, MXL_ERR_INTERNAL, "the model produced a non-finite logit (token %lld) at position %lld", (long long)v, (long long)mxl_decoder_state_pos(st_dec));
                goto out;
            }
        if (req->ignore_eos) /* as llama.cpp: EOS ids can never be sampled */
            for (int k = 0; k < m->n_eos; k++) logits[m->eos[k]] = -INFINITY;
        int32_t id = mxl_sampler_sample(smp, logits, ids.ids, ids.n);
        if (!req->ignore_eos && is_eos(m, id)) {
            stats->finish_reason = "stop";
            break;
        }
        ids.ids[ids.n++] = id;
        stats->generated_tokens++;
        piece_len = 0;
        if ((st = mxl_detok_stream_step(ds, id, &piece, &piece_len, err))) goto out;
        if (piece_len && on_text && on_text(ctx, piece, piece_len)) {
            stats->finish_reason = "stop";
            break;
        }
        if (i + 1 < budget && (st = mxl_decoder_forward(&m->dec, st_dec, &id, 1, logits, err))) goto out;
    }
    piece_len = 0;
    if ((st = mxl_detok_stream_flush(ds, &piece, &piece_len, err))) goto out;
    if (piece_len && on_text) on_text(ctx, piece, piece_len);
    stats->decode_ms = now_ms() - t1;
out:
    free(piece);
    free(logits);
    mxl_detok_stream_destroy(ds);
    mxl_sampler_destroy(smp);
    mxl_decoder_state_destroy(st_dec);
    mxl_token_ids_free(&ids);
    return st;
}
