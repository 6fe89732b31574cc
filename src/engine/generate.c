/* generate.c - single-sequence generation request (generate.h). */
#include "engine/generate.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/chat.h"
#include "engine/chat_parse.h"
#include "engine/model_internal.h"
#include "engine/sequence.h"

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
    size_t n, len;
    const char *t;
    int32_t bos = mxl_tokenizer_bos_id(m->tok), eos = mxl_tokenizer_eos_id(m->tok);
    if (bos >= 0 && (t = mxl_tokenizer_token(m->tok, bos, &len)) && len < sizeof m->bos_text) memcpy(m->bos_text, t, len);
    if (eos >= 0 && (t = mxl_tokenizer_token(m->tok, eos, &len)) && len < sizeof m->eos_text) memcpy(m->eos_text, t, len);
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

/* The prompt as the model sees it: the chat template's render of one user message, or the raw
 * text. */
static mxl_status build_prompt(mxl_gen_model *m, const mxl_gen_request *req, mxl_token_ids *ids, char **rendered,
                               mxl_error *err) {
    if (rendered) *rendered = NULL;
    if (!req->chat) return mxl_chat_tokenize_raw(m, req->prompt, strlen(req->prompt), ids, err);
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", req->prompt);
    if (!msgs) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_chat_opts o = {.add_generation_prompt = true};
    char *text = NULL;
    size_t text_len = 0;
    mxl_status st = mxl_chat_render(m, msgs, &o, &text, &text_len, err);
    json_decref(msgs);
    if (st) return st;
    st = mxl_chat_tokenize_rendered(m, text, text_len, ids, err);
    if (rendered && st == MXL_OK) *rendered = text;
    else free(text);
    return st;
}

mxl_status mxl_gen_prompt_tokens(mxl_gen_model *m, const mxl_gen_request *req, int64_t *n, mxl_error *err) {
    mxl_token_ids ids = {0};
    mxl_status st = build_prompt(m, req, &ids, NULL, err);
    *n = (int64_t)ids.n;
    mxl_token_ids_free(&ids);
    return st;
}

const mxl_checkpoint *mxl_gen_model_checkpoint(const mxl_gen_model *m) { return m->ck; }

static mxl_status kv_type_of(const char *name, const char *flag, mxl_decoder_kv_type *out, mxl_error *err) {
    if (!name) return MXL_OK;
    if (!strcmp(name, "fp16") || !strcmp(name, "f16")) *out = MXL_DECODER_KV_F16;
    else if (!strcmp(name, "int8") || !strcmp(name, "q8_0")) *out = MXL_DECODER_KV_I8;
    else if (!strcmp(name, "fp32") || !strcmp(name, "f32")) *out = MXL_DECODER_KV_F32;
    else return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s %s is not supported (this build has fp16 and int8)", flag, name);
    return MXL_OK;
}

mxl_status mxl_gen_model_set_kv_types(mxl_gen_model *m, const char *k, const char *v, mxl_error *err) {
    mxl_decoder_kv_opts o = m->kv;
    mxl_status st = kv_type_of(k, "--cache-type-k", &o.k, err);
    if (!st) st = kv_type_of(v, "--cache-type-v", &o.v, err);
    if (!st) m->kv = o;
    return st;
}

mxl_status mxl_gen_model_set_template(mxl_gen_model *m, const char *text, const char *origin, mxl_error *err) {
    mxl_template *t = NULL;
    mxl_status st = mxl_template_parse(text, strlen(text), origin, &t, err);
    if (st) return st;
    char *src = strdup(text), *org = strdup(origin);
    if (!src || !org) {
        free(src);
        free(org);
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

/* Chat output is split as the server splits it (engine/chat_parse.h): content goes to on_text,
 * reasoning to on_text only with show_reasoning - between "Thinking...\n" and
 * "\n...done thinking.\n\n", as ollama prints it - and think / channel markers never. */
typedef struct out_split {
    mxl_chat_stream *cs;
    bool show, in_reasoning, any_reasoning;
    mxl_gen_text_fn on_text;
    void *ctx;
} out_split;

static int split_emit(out_split *o, const char *text, size_t len, bool final, mxl_error *err) {
    json_t *deltas = json_array();
    int stop = 0;
    if (!deltas || mxl_chat_stream_feed(o->cs, text, len, final, deltas, err)) {
        json_decref(deltas);
        return -1;
    }
    size_t i;
    json_t *d;
    json_array_foreach(deltas, i, d) {
        json_t *c = json_object_get(d, "content"), *r = json_object_get(d, "reasoning_content");
        if (r && o->show) {
            if (!o->in_reasoning && !o->any_reasoning && o->on_text) stop |= o->on_text(o->ctx, "Thinking...\n", 12);
            o->in_reasoning = o->any_reasoning = true;
            if (o->on_text) stop |= o->on_text(o->ctx, json_string_value(r), json_string_length(r));
        }
        if (c && json_string_length(c)) {
            if (o->in_reasoning && o->on_text) stop |= o->on_text(o->ctx, "\n...done thinking.\n\n", 21);
            o->in_reasoning = false;
            if (o->on_text) stop |= o->on_text(o->ctx, json_string_value(c), json_string_length(c));
        }
    }
    if (final && o->in_reasoning && o->on_text) o->on_text(o->ctx, "\n...done thinking.\n", 20);
    json_decref(deltas);
    return stop;
}

mxl_status mxl_gen_run(mxl_gen_model *m, const mxl_gen_request *req, mxl_gen_text_fn on_text,
                       void *ctx, mxl_gen_stats *stats, mxl_error *err) {
    memset(stats, 0, sizeof *stats);
    stats->finish_reason = "length";
    mxl_token_ids ids = {0};
    mxl_seq *seq = NULL;
    char *rendered = NULL;
    out_split split = {NULL, req->show_reasoning, false, false, on_text, ctx};
    mxl_status st = build_prompt(m, req, &ids, &rendered, err);
    if (st) goto out;
    mxl_seq_params p = {.sampling = req->sampling, .max_tokens = req->max_tokens, .ignore_eos = req->ignore_eos};
    if (req->chat) {
        mxl_chat_syntax syn = mxl_chat_syntax_detect(m->tsrc.text, rendered ? rendered : "");
        mxl_chat_syntax_without_tools(&syn);
        if (syn.fmt != MXL_CHAT_FMT_PLAIN || syn.think_tags || syn.starts_in_reasoning) {
            if ((st = mxl_chat_stream_create(&syn, &split.cs, err))) goto out;
            p.keep_special = syn.fmt == MXL_CHAT_FMT_GPT_OSS || syn.fmt == MXL_CHAT_FMT_MISTRAL;
        }
    }
    int64_t ctx_len = req->max_context > 0 ? req->max_context : mxl_gen_model_default_ctx(m);
    if ((st = mxl_seq_create(m, ctx_len, 256, &seq, err))) goto out;
    for (int i = 0; i < req->n_stop && i < MXL_SEQ_MAX_STOP; i++) p.stop[p.n_stop++] = req->stop[i];
    if ((st = mxl_seq_start(seq, ids.ids, ids.n, &p, err))) goto out;
    stats->prompt_tokens = (int64_t)ids.n;
    double t0 = now_ms();
    if ((st = mxl_seq_prefill(seq, 0, err))) goto out;
    double t1 = now_ms();
    stats->prefill_ms = t1 - t0;
    for (;;) {
        mxl_seq_event ev;
        if ((st = mxl_seq_sample(seq, &ev, err))) goto out;
        int stop = 0;
        if (split.cs) {
            stop = split_emit(&split, ev.text, ev.text_len, ev.finished, err);
            if (stop < 0) {
                st = err->status ? err->status : MXL_ERR_INTERNAL;
                goto out;
            }
        } else if (ev.text_len && on_text) {
            stop = on_text(ctx, ev.text, ev.text_len);
        }
        if (stop && !ev.finished) {
            stats->finish_reason = "stop";
            break;
        }
        if (ev.finished) {
            stats->finish_reason = ev.finish_reason;
            break;
        }
        if ((st = mxl_seq_feed(seq, err))) goto out;
    }
    stats->generated_tokens = mxl_seq_n_generated(seq);
    stats->decode_ms = now_ms() - t1;
out:
    mxl_chat_stream_destroy(split.cs);
    mxl_seq_destroy(seq);
    mxl_token_ids_free(&ids);
    free(rendered);
    return st;
}
