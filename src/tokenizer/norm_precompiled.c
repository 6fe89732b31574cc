/* norm_precompiled.c - the SentencePiece `Precompiled` normalizer of tokenizer.json (the charsmap
 * that SentencePiece models carry: nmt_nfkc and friends, used by T5, XLM-R, ALBERT, mBART ...).
 *
 * Format of precompiled_charsmap (base64 in tokenizer.json):
 *   u32 le trie_size (bytes) | trie: trie_size / 4 u32 le units (a darts-clone double array over
 *   UTF-8 bytes) | normalized: NUL-terminated replacement strings; a trie leaf's value is the
 *   byte offset of its replacement in `normalized`.
 * Unit fields: has_leaf = bit 8; value = low 31 bits; label = unit & (bit 31 | 0xFF);
 * offset = (unit >> 10) << ((unit & bit 9) >> 6).
 *
 * Matching follows Hugging Face tokenizers (normalizers/precompiled.rs, checked against the PyPI
 * package on tests/fixtures/tokenizers/synth_precompiled.*): the text is cut into extended
 * grapheme clusters (UAX #29, utf8proc); a cluster shorter than 6 bytes whose bytes have a prefix
 * in the trie is replaced WHOLE by the FIRST (shortest) prefix match's string - so "a\u0308\u0301"
 * becomes "\u00e4", the acute dropped, as HF does; otherwise each character is looked up alone
 * and replaced by its first prefix match, or kept.
 *
 * The charsmap is untrusted: every trie position and string offset is bounds-checked, a lookup
 * that leaves the array is a miss, a replacement that is not valid UTF-8 fails at load. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/alloc.h"
#include "core/base64.h"
#include "tokenizer/tok_internal.h"

struct tok_precompiled {
    uint32_t *units; /* [n_units] */
    size_t n_units;
    char *norm; /* [norm_len] replacement strings, each NUL-terminated (a final NUL is added) */
    size_t norm_len;
};

void tok_precompiled_free(tok_precompiled *p) {
    if (!p) return;
    mxl_free(p->units);
    mxl_free(p->norm);
    mxl_free(p);
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

mxl_status tok_precompiled_parse(const char *b64, size_t len, tok_precompiled **out, const char **why) {
    *out = NULL;
    uint8_t *raw = mxl_malloc(len / 4 * 3 + 4);
    tok_precompiled *p = mxl_calloc(1, sizeof *p);
    size_t n = 0;
    mxl_status st = MXL_ERR_FORMAT;
    if (!raw || !p) {
        *why = "out of memory";
        st = MXL_ERR_NOMEM;
        goto fail;
    }
    if (!mxl_base64_decode(b64, len, raw, &n)) {
        *why = "precompiled_charsmap is not base64";
        goto fail;
    }
    if (n < 4) {
        *why = "precompiled_charsmap is shorter than its 4-byte header";
        goto fail;
    }
    uint32_t trie_size = le32(raw);
    if (trie_size % 4 != 0 || trie_size == 0 || trie_size > n - 4) {
        *why = "precompiled_charsmap trie size does not fit the data";
        goto fail;
    }
    p->n_units = trie_size / 4;
    p->norm_len = n - 4 - trie_size;
    p->units = mxl_malloc(p->n_units * sizeof *p->units);
    p->norm = mxl_malloc(p->norm_len + 1);
    if (!p->units || !p->norm) {
        *why = "out of memory";
        st = MXL_ERR_NOMEM;
        goto fail;
    }
    for (size_t i = 0; i < p->n_units; i++) p->units[i] = le32(raw + 4 + 4 * i);
    memcpy(p->norm, raw + 4 + trie_size, p->norm_len);
    p->norm[p->norm_len] = 0;
    /* HF requires the strings to be UTF-8 (String::from_utf8 on the whole blob) */
    if (!tok_utf8_valid(p->norm, p->norm_len)) {
        *why = "precompiled_charsmap replacement strings are not valid UTF-8";
        goto fail;
    }
    mxl_free(raw);
    *out = p;
    return MXL_OK;
fail:
    mxl_free(raw);
    tok_precompiled_free(p);
    return st;
}

static size_t unit_offset(uint32_t u) { return (size_t)(u >> 10) << ((u & (1u << 9)) >> 6); }

/* The replacement of the first (shortest) prefix of key[0..len) in the trie (stopping at a NUL
 * byte, as darts does), or NULL. */
static const char *first_match(const tok_precompiled *p, const char *key, size_t len) {
    size_t pos = unit_offset(p->units[0]);
    for (size_t i = 0; i < len; i++) {
        uint8_t c = (uint8_t)key[i];
        if (c == 0) return NULL;
        pos ^= c;
        if (pos >= p->n_units) return NULL;
        uint32_t u = p->units[pos];
        if ((u & (0x80000000u | 0xFFu)) != c) return NULL;
        pos ^= unit_offset(u);
        if (pos >= p->n_units) return NULL;
        if ((u >> 8) & 1) {
            size_t off = p->units[pos] & 0x7FFFFFFFu;
            return off < p->norm_len ? p->norm + off : NULL;
        }
    }
    return NULL;
}

static bool put_match(mxl_strbuf *out, const char *m) { return mxl_strbuf_append(out, m, strlen(m)); }

mxl_status tok_precompiled_normalize(const tok_precompiled *p, const char *s, size_t len, mxl_strbuf *out) {
    size_t g0 = 0; /* start of the current grapheme cluster */
    utf8proc_int32_t state = 0, prev = -1;
    for (size_t i = 0; i <= len;) {
        uint32_t cp = 0;
        size_t k = i < len ? tok_utf8_decode(s + i, len - i, &cp) : 0;
        bool brk = i == len || (prev >= 0 && utf8proc_grapheme_break_stateful(prev, (utf8proc_int32_t)cp, &state));
        if (brk && i > g0) {
            const char *g = s + g0, *m;
            size_t gl = i - g0;
            if (gl < 6 && (m = first_match(p, g, gl))) {
                if (!put_match(out, m)) return MXL_ERR_NOMEM;
            } else {
                for (size_t j = 0; j < gl;) {
                    uint32_t c2;
                    size_t k2 = tok_utf8_decode(g + j, gl - j, &c2);
                    bool ok = (m = first_match(p, g + j, k2)) ? put_match(out, m) : mxl_strbuf_append(out, g + j, k2);
                    if (!ok) return MXL_ERR_NOMEM;
                    j += k2;
                }
            }
            g0 = i;
        }
        if (i == len) break;
        prev = (utf8proc_int32_t)cp;
        i += k;
    }
    return MXL_OK;
}
