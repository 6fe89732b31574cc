/* detok_stream.c - streaming detokenizer, HF's DecodeStream (tokenizer/mod.rs step_decode_stream):
 * keep the ids since the last emitted boundary, decode prefix+new and emit the new suffix only
 * when the string grew and does not end with U+FFFD, so an incomplete UTF-8 character (byte
 * fallback / byte-level tokens) is held back until its last byte arrives. Once the window no
 * longer starts at the first id, it is decoded as a continuation (tok_decode), so that rules for
 * the start of the text (a left Strip of the fused text, Metaspace's first token) apply only
 * where the full decode applies them, and the pieces concatenate to the full decode.
 *
 * One exception: a decoder may rewrite text already emitted. HF's ByteFallback turns a whole run
 * of <0xXX> tokens into one U+FFFD per byte once the run proves invalid UTF-8, so "é" streamed
 * from <0xC3><0xA9> becomes "���" in the full decode when <0xE4> follows and the run ends (a
 * non-byte token, or the end of the text: a length cut in the middle of a character). HF's
 * DecodeStream fails there (InvalidPrefix); a generation must not, so the emitted text stands and
 * the ids since the last emission are decoded on their own, as a continuation ("é" then "�"),
 * and streaming goes on from them. */
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

/* The window's decode no longer begins with the emitted prefix (a decoder rewrote it: see the
 * top): the ids since the last emission (ids[prefix_index..]) become the window, decoded on their
 * own as a continuation, and their text is emitted whole. */
static mxl_status rebase(mxl_detok_stream *s, char **out, size_t *out_len, mxl_error *err) {
    const size_t k = s->prefix_index <= s->ids.n ? s->prefix_index : s->ids.n;
    memmove(s->ids.ids, s->ids.ids + k, (s->ids.n - k) * sizeof(int32_t));
    s->ids.n -= k;
    s->cont = true;
    mxl_free(s->prefix);
    s->prefix = NULL;
    s->prefix_len = 0;
    s->prefix_index = 0;
    char *str;
    size_t sl;
    mxl_status st = tok_decode(s->t, s->ids.ids, s->ids.n, s->skip_special, true, &str, &sl, err);
    if (st != MXL_OK) return st;
    if ((st = append_out(out, out_len, str, sl)) != MXL_OK) {
        mxl_free(str);
        return mxl_error_set(err, st, "out of memory");
    }
    s->prefix = str;
    s->prefix_len = sl;
    s->prefix_index = s->ids.n;
    return MXL_OK;
}

static bool has_prefix(const mxl_detok_stream *s, const char *str, size_t sl) {
    return sl >= s->prefix_len && memcmp(str, s->prefix ? s->prefix : "", s->prefix_len) == 0;
}

mxl_status mxl_detok_stream_step(mxl_detok_stream *s, int32_t id, char **out, size_t *out_len,
                                 mxl_error *err) {
    mxl_status st;
    /* an id the tokenizer does not have (a model's embedding padded past its vocabulary: Qwen's
     * 151936 rows for 151669 tokens) adds no text, as HF's id_to_token gives nothing for it */
    if (id < 0 || (uint32_t)id >= s->t->n_ids || !s->t->id_ent[id]) return MXL_OK;
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
        if (!has_prefix(s, str, sl)) {
            mxl_free(str);
            return rebase(s, out, out_len, err);
        }
        st = append_out(out, out_len, str + s->prefix_len, sl - s->prefix_len);
        mxl_free(str);
        if (st != MXL_OK) return mxl_error_set(err, st, "out of memory");
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
    if (!has_prefix(s, str, sl)) {
        mxl_free(str);
        st = rebase(s, out, out_len, err);
    } else {
        if (sl > s->prefix_len) st = append_out(out, out_len, str + s->prefix_len, sl - s->prefix_len);
        mxl_free(str);
        if (st != MXL_OK) st = mxl_error_set(err, st, "out of memory");
    }
    s->ids.n = 0;
    s->cont = true;
    mxl_free(s->prefix);
    s->prefix = NULL;
    s->prefix_len = 0;
    s->prefix_index = 0;
    return st;
}
