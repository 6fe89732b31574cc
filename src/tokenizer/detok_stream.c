/* detok_stream.c - streaming detokenizer, HF's DecodeStream (tokenizer/mod.rs step_decode_stream):
 * keep the ids since the last emitted boundary, decode prefix+new and emit the new suffix only
 * when the string grew and does not end with U+FFFD, so an incomplete UTF-8 character (byte
 * fallback / byte-level tokens) is held back until its last byte arrives. Once the window no
 * longer starts at the first id, it is decoded as a continuation (tok_decode), so that rules for
 * the start of the text (a left Strip of the fused text, Metaspace's first token) apply only
 * where the full decode applies them: the pieces always concatenate to the full decode, or a
 * step fails when a decoder rewrites text already emitted. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/tok_internal.h"

struct mxl_detok_stream {
    const mxl_tokenizer *t;
    bool skip_special;
    mxl_token_ids ids;
    char *prefix;
    size_t prefix_len;
    size_t prefix_index;
    bool cont; /* ids[0] is not the first id of the text */
};

mxl_status mxl_detok_stream_create(const mxl_tokenizer *t, bool skip_special,
                                   mxl_detok_stream **out, mxl_error *err) {
    mxl_detok_stream *s = mxl_calloc(1, sizeof(*s));
    if (!s) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", t->name);
    s->t = t;
    s->skip_special = skip_special;
    *out = s;
    return MXL_OK;
}

void mxl_detok_stream_destroy(mxl_detok_stream *s) {
    if (!s) return;
    mxl_token_ids_free(&s->ids);
    mxl_free(s->prefix);
    mxl_free(s);
}

static bool ends_replacement(const char *s, size_t n) {
    return n >= 3 && memcmp(s + n - 3, "\xEF\xBF\xBD", 3) == 0;
}

static mxl_status append_out(char **out, size_t *out_len, const char *s, size_t n) {
    char *p = mxl_realloc(*out, *out_len + n + 1);
    if (!p) return MXL_ERR_NOMEM;
    memcpy(p + *out_len, s, n);
    *out_len += n;
    p[*out_len] = 0;
    *out = p;
    return MXL_OK;
}

/* Appends what str (the window's decode, sl bytes, freed here) adds past the prefix to out; an
 * error when it does not begin with the prefix (the decoder rewrote text already emitted). */
static mxl_status emit_suffix(mxl_detok_stream *s, char *str, size_t sl, char **out, size_t *out_len,
                              mxl_error *err) {
    if (memcmp(str, s->prefix ? s->prefix : "", s->prefix_len) != 0) {
        mxl_free(str);
        return mxl_error_set(err, MXL_ERR_INTERNAL, "%s: stream decode changed earlier text", s->t->name);
    }
    mxl_status st = append_out(out, out_len, str + s->prefix_len, sl - s->prefix_len);
    mxl_free(str);
    return st != MXL_OK ? mxl_error_set(err, st, "out of memory") : MXL_OK;
}

mxl_status mxl_detok_stream_step(mxl_detok_stream *s, int32_t id, char **out, size_t *out_len,
                                 mxl_error *err) {
    mxl_status st;
    if (s->prefix_len == 0 && s->ids.n) {
        char *np;
        size_t nl;
        if ((st = tok_decode(s->t, s->ids.ids, s->ids.n, s->skip_special, s->cont, &np, &nl, err)) != MXL_OK)
            return st;
        if (!ends_replacement(np, nl)) {
            mxl_free(s->prefix);
            s->prefix = np;
            s->prefix_len = nl;
            s->prefix_index = s->ids.n;
        } else {
            mxl_free(np);
        }
    }
    if (!tok_ids_push(&s->ids, id)) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    char *str;
    size_t sl;
    if ((st = tok_decode(s->t, s->ids.ids, s->ids.n, s->skip_special, s->cont, &str, &sl, err)) != MXL_OK) {
        s->ids.n--; /* the bad id is not kept */
        return st;
    }
    if (sl > s->prefix_len && !ends_replacement(str, sl)) {
        if ((st = emit_suffix(s, str, sl, out, out_len, err)) != MXL_OK) return st;
        size_t new_prefix_index = s->ids.n - s->prefix_index;
        if (s->prefix_index) s->cont = true;
        memmove(s->ids.ids, s->ids.ids + s->prefix_index, (s->ids.n - s->prefix_index) * sizeof(int32_t));
        s->ids.n -= s->prefix_index;
        mxl_free(s->prefix);
        s->prefix = NULL;
        s->prefix_len = 0;
        if ((st = tok_decode(s->t, s->ids.ids, s->ids.n, s->skip_special, s->cont, &s->prefix, &s->prefix_len, err)) != MXL_OK)
            return st;
        s->prefix_index = new_prefix_index;
        return MXL_OK;
    }
    mxl_free(str);
    return MXL_OK;
}

mxl_status mxl_detok_stream_flush(mxl_detok_stream *s, char **out, size_t *out_len, mxl_error *err) {
    if (!s->ids.n) return MXL_OK;
    char *str;
    size_t sl;
    mxl_status st = tok_decode(s->t, s->ids.ids, s->ids.n, s->skip_special, s->cont, &str, &sl, err);
    if (st != MXL_OK) return st;
    if (sl > s->prefix_len) st = emit_suffix(s, str, sl, out, out_len, err);
    else mxl_free(str);
    s->ids.n = 0;
    s->cont = true;
    mxl_free(s->prefix);
    s->prefix = NULL;
    s->prefix_len = 0;
    s->prefix_index = 0;
    return st;
}
