/* generate.c - single-sequence generation request (generate.h): the prompt, the decode loop and
 * the split of chat output into answer and reasoning. The model object is model.c's. */
#include "engine/generate.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "engine/chat.h"
#include "engine/chat_parse.h"
#include "engine/model_internal.h"
#include "engine/sequence.h"
#include "engine/speculate.h"
#include "image/image.h"

/* The user message: the text alone, or (with images) a content list of one image part per image
 * then the text, as chat clients send it. */
static json_t *user_message(const mxl_gen_request *req) {
    if (req->n_images <= 0) return json_pack("[{s:s, s:s}]", "role", "user", "content", req->prompt);
    json_t *parts = json_array();
    for (int i = 0; i < req->n_images; i++) json_array_append_new(parts, json_pack("{s:s}", "type", "image"));
    json_array_append_new(parts, json_pack("{s:s, s:s}", "type", "text", "text", req->prompt));
    return json_pack("[{s:s, s:o}]", "role", "user", "content", parts);
}

/* Raw text with images: the model's image marker where the text writes none. */
static mxl_status raw_with_markers(const mxl_gen_model *m, const mxl_gen_request *req, char **out, size_t *len, mxl_error *err) {
    const char *mk = m->vlm->marker;
    bool has = strstr(req->prompt, mk) != NULL;
    size_t n = strlen(req->prompt) + (has ? 0 : (size_t)req->n_images * strlen(mk)) + 1;
    char *t = mxl_malloc(n);
    if (!t) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    t[0] = 0;
    for (int i = 0; !has && i < req->n_images; i++) strcat(t, mk);
    strcat(t, req->prompt);
    *out = t;
    *len = strlen(t);
    return MXL_OK;
}

mxl_status mxl_gen_image_load(const mxl_gen_model *m, const char *path, mxl_vlm_input *out, mxl_error *err) {
    memset(out, 0, sizeof *out);
    if (!m->vlm) return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s", m->no_vision);
    mxl_image im = {0, 0, NULL};
    mxl_status st = mxl_image_load(path, NULL, &im, err);
    if (!st && (st = mxl_vlm_prepare(m->vlm, &im, out, err))) mxl_error_prefix(err, "%s: ", path);
    mxl_image_free(&im);
    return st;
}

/* The request's image files through the model's processor (inputs [n_images]). */
static mxl_status prepare_images(const mxl_gen_model *m, const mxl_gen_request *req, mxl_vlm_input *inputs, mxl_error *err) {
    if (req->n_images > 0 && !m->vlm) return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s", m->no_vision);
    if (req->n_images > MXL_GEN_MAX_IMAGES)
        return mxl_error_set(err, MXL_ERR_ARG, "%d images in one request (at most %d)", req->n_images, MXL_GEN_MAX_IMAGES);
    for (int i = 0; i < req->n_images; i++) {
        mxl_status st = mxl_gen_image_load(m, req->images[i], &inputs[i], err);
        if (st) return st;
    }
    return MXL_OK;
}

/* The prompt as the model sees it: the chat template's render of one user message, or the raw
 * text; with images (inputs: prepare_images'), each marker expanded into the image's placeholder
 * tokens. */
static mxl_status build_prompt(mxl_gen_model *m, const mxl_gen_request *req, const mxl_vlm_input *inputs, mxl_token_ids *ids,
                               char **rendered, mxl_error *err) {
    if (rendered) *rendered = NULL;
    char *text = NULL;
    size_t text_len = 0;
    mxl_status st;
    if (!req->chat && req->n_images <= 0) return mxl_chat_tokenize_raw(m, req->prompt, strlen(req->prompt), ids, err);
    /* a processor that writes the prompt itself (PaliGemma's): no chat template, no added tokens */
    const bool own = req->n_images > 0 && m->vlm->prompt;
    if (own) {
        size_t bl = 0;
        int32_t bos_id = mxl_tokenizer_bos_id(m->tok);
        const char *bos = bos_id >= 0 ? mxl_tokenizer_token(m->tok, bos_id, &bl) : NULL;
        st = m->vlm->prompt(m->vlm, req->prompt, strlen(req->prompt), req->n_images, bos ? bos : "", bos ? bl : 0, &text, &text_len, err);
    } else if (!req->chat) {
        st = raw_with_markers(m, req, &text, &text_len, err);
    } else {
        json_t *msgs = user_message(req);
        if (!msgs) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        mxl_chat_opts o = {.add_generation_prompt = true};
        st = mxl_chat_render(m, msgs, &o, &text, &text_len, err);
        json_decref(msgs);
    }
    if (st) return st;
    if (req->n_images > 0) {
        char *x = NULL;
        size_t xl = 0;
        st = mxl_vlm_expand_prompt(m->vlm, text, text_len, inputs, req->n_images, &x, &xl, err);
        mxl_free(text);
        if (st) return st;
        text = x, text_len = xl;
    }
    st = req->chat || own ? mxl_chat_tokenize_rendered(m, text, text_len, ids, err) : mxl_chat_tokenize_raw(m, text, text_len, ids, err);
    if (rendered && st == MXL_OK) *rendered = text;
    else mxl_free(text);
    return st;
}

mxl_status mxl_gen_prompt_tokens(mxl_gen_model *m, const mxl_gen_request *req, int64_t *n, mxl_error *err) {
    mxl_token_ids ids = {0};
    mxl_vlm_input inputs[MXL_GEN_MAX_IMAGES] = {0};
    mxl_status st = prepare_images(m, req, inputs, err);
    if (!st) st = build_prompt(m, req, inputs, &ids, NULL, err);
    *n = (int64_t)ids.n;
    mxl_token_ids_free(&ids);
    for (int i = 0; i < MXL_GEN_MAX_IMAGES; i++) mxl_vlm_input_free(&inputs[i]);
    return st;
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

/* One request's text out of the decode loop: each pick's event to the splitter or on_text. */
typedef struct gen_emit {
    out_split *split;
    mxl_gen_text_fn on_text;
    void *ctx;
    bool done, failed;
    const char *reason; /* why it ended: the event's finish reason, or "stop" when on_text asked */
    mxl_status st;
    mxl_error *err;
} gen_emit;

static int emit_event(gen_emit *g, const mxl_seq_event *ev) {
    int stop = 0;
    if (g->split->cs) {
        stop = split_emit(g->split, ev->text, ev->text_len, ev->finished, g->err);
        if (stop < 0) {
            g->failed = true;
            g->st = g->err->status ? g->err->status : MXL_ERR_INTERNAL;
            return 1;
        }
    } else if (ev->text_len && g->on_text) {
        stop = g->on_text(g->ctx, ev->text, ev->text_len);
    }
    if (ev->finished) g->done = true, g->reason = ev->finish_reason;
    else if (stop) g->done = true, g->reason = "stop";
    return g->done;
}

static int emit_cb(void *ctx, const mxl_seq_event *ev) { return emit_event(ctx, ev); }

/* A drafter for the request (speculate.h): the model must be able to take back rejected tokens. */
static mxl_status spec_setup(mxl_gen_model *m, const mxl_seq *seq, const mxl_draft_opts *o, int64_t ctx_len, mxl_drafter **out,
                             mxl_error *err) {
    const char *why = mxl_seq_cannot_verify(seq);
    if (why) return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "speculative decoding: %s", why);
    if (o->kind == MXL_DRAFT_FULL_MODEL) {
        mxl_status st = mxl_drafter_check_model(m, o->model, err);
        if (st) return st;
    }
    return mxl_drafter_create(o, ctx_len, m->pool, out, err);
}

mxl_status mxl_gen_image_media(mxl_gen_model *m, const mxl_token_ids *ids, const mxl_vlm_input *inputs, float **rows, int n_images,
                               mxl_decoder_media *media, int *n_media, mxl_error *err) {
    const mxl_vlm *v = m->vlm;
    int img[MXL_DECODER_MAX_MEDIA];
    int64_t off[MXL_DECODER_MAX_MEDIA];
    mxl_status st = mxl_vlm_media_blocks(v, ids->ids, ids->n, inputs, n_images, media, img, off, MXL_DECODER_MAX_MEDIA, n_media, err);
    for (int i = 0; !st && i < n_images; i++) {
        if (rows[i]) continue;
        rows[i] = mxl_malloc(mxl_vlm_rows_floats(v, &inputs[i]) * sizeof(float));
        st = rows[i] ? v->encode(v, &inputs[i], m->pool, rows[i], err) : mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        if (st) {
            mxl_free(rows[i]);
            rows[i] = NULL;
        }
    }
    for (int b = 0; !st && b < *n_media; b++)
        if (img[b] >= 0) mxl_vlm_point_block(v, &inputs[img[b]], rows[img[b]], off[b], &media[b]); /* (else text rows) */
    return st;
}

mxl_status mxl_gen_run(mxl_gen_model *m, const mxl_gen_request *req, mxl_gen_text_fn on_text,
                       void *ctx, mxl_gen_stats *stats, mxl_error *err) {
    memset(stats, 0, sizeof *stats);
    stats->finish_reason = "length";
    mxl_token_ids ids = {0};
    mxl_seq *seq = NULL;
    mxl_drafter *drafter = NULL;
    char *rendered = NULL;
    out_split split = {NULL, req->show_reasoning, false, false, on_text, ctx};
    float *rows[MXL_GEN_MAX_IMAGES] = {0};
    mxl_vlm_input inputs[MXL_GEN_MAX_IMAGES] = {0};
    mxl_decoder_media media[MXL_DECODER_MAX_MEDIA];
    int n_media = 0;
    double t_img = mxl_now_ms();
    mxl_status st = prepare_images(m, req, inputs, err);
    stats->image_ms = mxl_now_ms() - t_img;
    if (!st) st = build_prompt(m, req, inputs, &ids, &rendered, err);
    if (st) goto out;
    mxl_seq_params p = {.sampling = req->sampling, .max_tokens = req->max_tokens, .ignore_eos = req->ignore_eos, .lora = req->lora,
                        .n_lora = req->n_lora};
    if (req->n_images > 0) {
        t_img = mxl_now_ms();
        st = mxl_gen_image_media(m, &ids, inputs, rows, req->n_images, media, &n_media, err);
        stats->image_ms += mxl_now_ms() - t_img;
        if (st) goto out;
        p.media = media;
        p.n_media = n_media;
    }
    if (req->chat) {
        mxl_chat_syntax syn = mxl_chat_syntax_detect(m->tsrc.text, rendered ? rendered : "");
        mxl_chat_syntax_without_tools(&syn);
        if (syn.fmt != MXL_CHAT_FMT_PLAIN || syn.think_tags || syn.starts_in_reasoning) {
            if ((st = mxl_chat_stream_create(&syn, &split.cs, err))) goto out;
            p.keep_special = syn.fmt == MXL_CHAT_FMT_GPT_OSS || syn.fmt == MXL_CHAT_FMT_MISTRAL;
        }
    }
    int64_t ctx_len = req->max_context > 0 ? req->max_context : mxl_gen_model_default_ctx(m);
    /* a pass takes at least 256 rows, and a whole media block (PaliGemma's: the image and the prompt) */
    int64_t chunk = mxl_decoder_media_max_unit(media, n_media);
    if ((st = mxl_seq_create(m, ctx_len, chunk > 256 ? chunk : 256, &seq, err))) goto out;
    for (int i = 0; i < req->n_stop && i < MXL_SEQ_MAX_STOP; i++) p.stop[p.n_stop++] = req->stop[i];
    if ((st = mxl_seq_start(seq, ids.ids, ids.n, &p, err))) goto out;
    if (req->draft && (st = spec_setup(m, seq, req->draft, ctx_len, &drafter, err))) goto out;
    stats->prompt_tokens = (int64_t)ids.n;
    double t0 = mxl_now_ms();
    if ((st = mxl_seq_prefill(seq, 0, err))) goto out;
    double t1 = mxl_now_ms();
    stats->prefill_ms = t1 - t0;
    gen_emit ge = {&split, on_text, ctx, false, false, NULL, MXL_OK, err};
    mxl_seq_event ev;
    if ((st = mxl_seq_sample(seq, &ev, err))) goto out;
    emit_event(&ge, &ev);
    /* then rounds: the picked token (with a draft, if any) through the model, picks from its logits */
    while (!ge.done && !ge.failed) {
        int32_t draft[MXL_SEQ_MAX_DRAFT];
        int n_draft = 0, accepted = 0;
        if (drafter) {
            size_t n_ids;
            const int32_t *sids = mxl_seq_tokens(seq, &n_ids);
            if ((st = mxl_drafter_propose(drafter, sids, n_ids, mxl_seq_draft_room(seq, MXL_SEQ_MAX_DRAFT), draft, &n_draft, err))) goto out;
        }
        if ((st = mxl_seq_verify(seq, draft, n_draft, emit_cb, &ge, &accepted, err))) goto out;
        if (drafter) mxl_drafter_observe(drafter, n_draft, accepted);
    }
    if (ge.failed) {
        st = ge.st;
        goto out;
    }
    if (ge.reason) stats->finish_reason = ge.reason;
    stats->generated_tokens = mxl_seq_n_generated(seq);
    stats->decode_ms = mxl_now_ms() - t1;
    if (drafter) mxl_drafter_stats(drafter, &stats->draft);
out:
    for (int i = 0; i < MXL_GEN_MAX_IMAGES; i++) mxl_free(rows[i]), mxl_vlm_input_free(&inputs[i]);
    mxl_chat_stream_destroy(split.cs);
    mxl_drafter_destroy(drafter);
    mxl_seq_destroy(seq);
    mxl_token_ids_free(&ids);
    mxl_free(rendered);
    return st;
}
