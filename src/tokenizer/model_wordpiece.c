/* model_wordpiece.c - WordPiece (HF models/wordpiece), WordLevel (HF models/wordlevel) and
 * llama.cpp's GGUF "bert" WordPiece (llm_tokenizer_wpm_session), plus the model dispatch.
 *
 * HF WordPiece: a word longer than max_input_chars_per_word characters is [UNK]; otherwise the
 * longest vocabulary prefix is taken repeatedly, later pieces carrying the "##" prefix; if some
 * position has no match the whole word is [UNK].
 * GGUF bert: tokens that start a word carry a U+2581 prefix and continuation pieces none;
 * llama.cpp lowercases, strips accents (NFD + drop Mn) and splits on whitespace, punctuation,
 * ASCII symbols and CJK characters itself before the same greedy longest match. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/alloc.h"
#include "tokenizer/tok_internal.h"

mxl_status tok_bpe_tokenize(const mxl_tokenizer *t, const char *s, size_t n, mxl_token_ids *out);
mxl_status tok_spm_tokenize(const mxl_tokenizer *t, const char *s, size_t n, mxl_token_ids *out);
mxl_status tok_unigram_tokenize(const mxl_tokenizer *t, const char *s, size_t n, mxl_token_ids *out);

static mxl_status wordpiece(const mxl_tokenizer *t, const char *s, size_t n, mxl_token_ids *out) {
    const tok_model *m = &t->model;
    size_t chars = 0;
    for (size_t i = 0; i < n; i += tok_utf8_len((uint8_t)s[i])) chars++;
    if (chars > m->max_input_chars) {
        if (m->unk_id < 0) return MXL_ERR_FORMAT;
        return tok_ids_push(out, m->unk_id) ? MXL_OK : MXL_ERR_NOMEM;
    }
    size_t base = out->n, start = 0;
    mxl_strbuf tmp = {0};
    mxl_status st = MXL_OK;
    while (start < n) {
        size_t end = n;
        int32_t found = -1;
        while (start < end) {
            tmp.n = 0;
            if (start > 0 && !mxl_strbuf_append(&tmp, m->cont_prefix, m->cont_prefix_len)) goto oom;
            if (!mxl_strbuf_append(&tmp, s + start, end - start)) goto oom;
            int32_t id = tok_map_get(&t->vocab, tmp.p, tmp.n);
            if (id >= 0) {
                found = id;
                break;
            }
            /* step back one character */
            size_t p = end - 1;
            while (p > start && ((uint8_t)s[p] & 0xC0) == 0x80) p--;
            end = p;
        }
        if (found < 0) {
            out->n = base;
            if (m->unk_id < 0) {
                st = MXL_ERR_FORMAT;
                break;
            }
            if (!tok_ids_push(out, m->unk_id)) goto oom;
            break;
        }
        if (!tok_ids_push(out, found)) goto oom;
        start = end;
    }
    mxl_strbuf_free(&tmp);
    return st;
oom:
    mxl_strbuf_free(&tmp);
    return MXL_ERR_NOMEM;
}

static mxl_status wordlevel(const mxl_tokenizer *t, const char *s, size_t n, mxl_token_ids *out) {
    int32_t id = tok_map_get(&t->vocab, s, n);
    if (id < 0) id = t->model.unk_id;
    if (id < 0) return MXL_ERR_FORMAT;
    return tok_ids_push(out, id) ? MXL_OK : MXL_ERR_NOMEM;
}

/* One llama.cpp WPM word: "\u2581" + word, greedy longest match; no match anywhere -> unk. */
static mxl_status wpm_word(const mxl_tokenizer *t, const char *w, size_t wn, mxl_token_ids *out) {
    mxl_strbuf word = {0};
    if (!mxl_strbuf_append(&word, "\xE2\x96\x81", 3) || !mxl_strbuf_append(&word, w, wn)) {
        mxl_strbuf_free(&word);
        return MXL_ERR_NOMEM;
    }
    size_t n = word.n, base = out->n;
    for (size_t i = 0; i < n; i++) {
        bool match = false;
        size_t jmax = i + t->model.max_token_len + 1;
        if (jmax > n) jmax = n;
        for (size_t j = jmax; j > i; j--) {
            int32_t id = tok_map_get(&t->vocab, word.p + i, j - i);
            if (id >= 0) {
                if (!tok_ids_push(out, id)) {
                    mxl_strbuf_free(&word);
                    return MXL_ERR_NOMEM;
                }
                match = true;
                i = j - 1;
                break;
            }
        }
        if (!match) {
            out->n = base;
            break;
        }
    }
    mxl_strbuf_free(&word);
    if (out->n == base && t->unk_id >= 0 && !tok_ids_push(out, t->unk_id)) return MXL_ERR_NOMEM;
    return MXL_OK;
}

static mxl_status wpm(const mxl_tokenizer *t, const char *s, size_t n, mxl_token_ids *out) {
    /* NFD (strip_accents), then per code point: whitespace ends a word; NUL, U+FFFD and
     * control characters are dropped; accents dropped; punctuation / ASCII symbols / CJK are
     * single-character words; everything else is lowercased onto the current word. */
    char *nfd = NULL;
    ptrdiff_t r = 0;
    if (n) {
        r = tok_utf8proc_map(s, n, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE, &nfd);
        if (r < 0) return r == UTF8PROC_ERROR_NOMEM ? MXL_ERR_NOMEM : MXL_ERR_FORMAT;
    }
    const char *p = nfd;
    mxl_strbuf word = {0};
    mxl_status st = MXL_OK;
    for (size_t i = 0; i < (size_t)r && st == MXL_OK;) {
        uint32_t cp;
        i += tok_utf8_decode(p + i, (size_t)r - i, &cp);
        if (tok_cp_is_whitespace(cp)) {
            if (word.n) st = wpm_word(t, word.p, word.n, out);
            word.n = 0;
            continue;
        }
        utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
        bool control = c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF ||
                       c == UTF8PROC_CATEGORY_CO || c == UTF8PROC_CATEGORY_CS;
        if (cp == 0 || cp == 0xFFFD || control) continue;
        if (c == UTF8PROC_CATEGORY_MN) continue;
        uint32_t lc = (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
        bool symbol = c >= UTF8PROC_CATEGORY_SM && c <= UTF8PROC_CATEGORY_SO;
        if (tok_cp_is_punct(cp) || (cp < 0x7F && symbol) || tok_cp_is_chinese(cp)) {
            if (word.n) st = wpm_word(t, word.p, word.n, out);
            word.n = 0;
            char tmp[4];
            size_t k = mxl_utf8_encode(lc, tmp);
            if (st == MXL_OK) st = wpm_word(t, tmp, k, out);
            continue;
        }
        if (!mxl_strbuf_put_cp(&word, lc)) st = MXL_ERR_NOMEM;
    }
    if (st == MXL_OK && word.n) st = wpm_word(t, word.p, word.n, out);
    mxl_strbuf_free(&word);
    mxl_free(nfd);
    return st;
}

mxl_status tok_model_tokenize(const mxl_tokenizer *t, const char *s, size_t n, mxl_token_ids *out) {
    switch (t->model.kind) {
    case TOK_MODEL_BPE: return tok_bpe_tokenize(t, s, n, out);
    case TOK_MODEL_WORDPIECE: return n ? wordpiece(t, s, n, out) : MXL_OK;
    case TOK_MODEL_WORDLEVEL: return n ? wordlevel(t, s, n, out) : MXL_OK;
    case TOK_MODEL_SPM: return tok_spm_tokenize(t, s, n, out);
    case TOK_MODEL_WPM: return wpm(t, s, n, out);
    case TOK_MODEL_UNIGRAM: return tok_unigram_tokenize(t, s, n, out);
    }
    return MXL_ERR_INTERNAL;
}
