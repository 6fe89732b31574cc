/* added_tokens.c - splitting text around added tokens.
 *
 * HF (tokenizer/added_vocabulary.rs): all added tokens of one kind (normalized or not) are found
 * leftmost-longest without overlap (aho-corasick LeftmostLongest); a special token is skipped
 * when special tokens are not parsed, single_word tokens are skipped unless bounded by non-word
 * characters, lstrip/rstrip widen the match over adjacent whitespace.
 * GGUF (llama.cpp tokenizer_st_partition): for each special-cache token, longest text first,
 * every occurrence in the remaining text fragments is cut out. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/tok_internal.h"

static _Thread_local const tok_added *g_sort_added; /* qsort context (per loading thread) */
static _Thread_local int g_sort_norm;

static const char *pat(const tok_added *a, int norm, size_t *len) {
    if (norm) {
        *len = a->norm_len;
        return a->norm_content;
    }
    *len = a->len;
    return a->content;
}

static int cmp_added(const void *x, const void *y) {
    size_t lx, ly;
    const char *px = pat(&g_sort_added[*(const uint32_t *)x], g_sort_norm, &lx);
    const char *py = pat(&g_sort_added[*(const uint32_t *)y], g_sort_norm, &ly);
    uint8_t bx = (uint8_t)px[0], by = (uint8_t)py[0];
    if (bx != by) return bx < by ? -1 : 1;
    if (lx != ly) return lx > ly ? -1 : 1;
    return *(const uint32_t *)x < *(const uint32_t *)y ? -1 : 1;
}

mxl_status tok_added_build(mxl_tokenizer *t, mxl_error *err) {
    for (int norm = 0; norm < 2; norm++) {
        mxl_free(t->added_order[norm]);
        t->added_order[norm] = NULL;
        mxl_free(t->added_lens[norm]);
        t->added_lens[norm] = NULL;
        memset(t->added_lens_at[norm], 0, sizeof(t->added_lens_at[norm]));
        tok_map_free(&t->added_lookup[norm]);
        memset(t->added_bucket[norm], 0, sizeof(t->added_bucket[norm]));
        size_t cnt = 0;
        for (size_t i = 0; i < t->n_added; i++) {
            size_t l;
            if (t->added[i].normalized == (norm == 1) && pat(&t->added[i], norm, &l) && l) cnt++;
        }
        if (!cnt) continue;
        uint32_t *ord = mxl_malloc(cnt * sizeof(uint32_t));
        if (!ord) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", t->name);
        size_t k = 0;
        for (size_t i = 0; i < t->n_added; i++) {
            size_t l;
            if (t->added[i].normalized == (norm == 1) && pat(&t->added[i], norm, &l) && l)
                ord[k++] = (uint32_t)i;
        }
        g_sort_added = t->added;
        g_sort_norm = norm;
        qsort(ord, cnt, sizeof(uint32_t), cmp_added);
        /* bucket[b] = first index with first byte >= b */
        size_t j = 0;
        for (int b = 0; b <= 256; b++) {
            while (j < cnt) {
                size_t l;
                if ((uint8_t)pat(&t->added[ord[j]], norm, &l)[0] >= b) break;
                j++;
            }
            t->added_bucket[norm][b] = (uint32_t)j;
        }
        t->added_order[norm] = ord;
        /* lookup map (the first token with a given pattern wins, as the sorted order does) and,
         * per first byte, the distinct lengths longest first (ord is grouped by first byte and
         * sorted longest first inside a group, so equal lengths are adjacent) */
        t->added_lens[norm] = mxl_malloc(cnt * sizeof(size_t));
        if (!t->added_lens[norm]) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", t->name);
        size_t nl = 0;
        for (int b = 0; b < 256; b++) {
            t->added_lens_at[norm][b] = (uint32_t)nl;
            for (uint32_t i = t->added_bucket[norm][b]; i < t->added_bucket[norm][b + 1]; i++) {
                size_t l;
                const char *p = pat(&t->added[ord[i]], norm, &l);
                bool dup;
                if (!tok_map_put(&t->added_lookup[norm], p, l, (int32_t)ord[i], &dup))
                    return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", t->name);
                if (nl == t->added_lens_at[norm][b] || t->added_lens[norm][nl - 1] != l) t->added_lens[norm][nl++] = l;
            }
        }
        t->added_lens_at[norm][256] = (uint32_t)nl;
    }
    return MXL_OK;
}

static bool is_word_cp(uint32_t cp) { return cp == '_' || tok_cp_is_alnum(cp) || tok_cp_is_mn(cp); }

static bool ends_with_word(const char *s, size_t n) {
    if (!n) return false;
    size_t p = n - 1;
    while (p > 0 && ((uint8_t)s[p] & 0xC0) == 0x80) p--;
    uint32_t cp;
    tok_utf8_decode(s + p, n - p, &cp);
    return is_word_cp(cp);
}

static bool starts_with_word(const char *s, size_t n) {
    if (!n) return false;
    uint32_t cp;
    tok_utf8_decode(s, n, &cp);
    return is_word_cp(cp);
}

/* Leftmost-longest match at or after pos: returns added index or -1, sets *at. */
static int32_t find_next(const mxl_tokenizer *t, int norm, const char *s, size_t n, size_t pos,
                         size_t *at) {
    const uint32_t *ord = t->added_order[norm];
    if (!ord) return -1;
    for (size_t i = pos; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        uint32_t lo = t->added_bucket[norm][b], hi = t->added_bucket[norm][b + 1];
        if (lo == hi) continue;
        if (hi - lo <= 8) {
            for (uint32_t j = lo; j < hi; j++) {
                size_t l;
                const char *p = pat(&t->added[ord[j]], norm, &l);
                if (l <= n - i && memcmp(s + i, p, l) == 0) {
                    *at = i;
                    return (int32_t)ord[j];
                }
            }
            continue;
        }
        for (uint32_t k = t->added_lens_at[norm][b]; k < t->added_lens_at[norm][b + 1]; k++) {
            size_t l = t->added_lens[norm][k];
            if (l > n - i) continue;
            int32_t a = tok_map_get(&t->added_lookup[norm], s + i, l);
            if (a >= 0) {
                *at = i;
                return a;
            }
        }
    }
    return -1;
}

mxl_status tok_added_split(const mxl_tokenizer *t, bool want_normalized, bool parse_special,
                           tok_pieces *in, tok_pieces *out) {
    int norm = want_normalized ? 1 : 0;
    tok_pieces_reset(out);
    for (size_t pi = 0; pi < in->n; pi++) {
        const tok_piece *pc = &in->v[pi];
        const char *s = in->text.p + pc->off;
        size_t n = pc->len;
        if (pc->token >= 0 || !t->added_order[norm]) {
            if (n && !tok_pieces_add(out, s, n, pc->token, pc->at_start)) return MXL_ERR_NOMEM;
            continue;
        }
        size_t start_offset = 0, pos = 0, at;
        int32_t ai;
        while (pos < n && (ai = find_next(t, norm, s, n, pos, &at)) >= 0) {
            const tok_added *a = &t->added[ai];
            size_t l;
            pat(a, norm, &l);
            size_t start = at, stop = at + l;
            pos = stop; /* matches never overlap, skipped ones included */
            if (!parse_special && a->special) continue;
            if (a->single_word) {
                bool start_space = start == 0 || !ends_with_word(s, start);
                bool stop_space = stop == n || !starts_with_word(s + stop, n - stop);
                if (!start_space || !stop_space) continue;
            }
            if (a->lstrip) {
                size_t ns = start;
                while (ns > 0) {
                    size_t p = ns - 1;
                    while (p > 0 && ((uint8_t)s[p] & 0xC0) == 0x80) p--;
                    uint32_t cp;
                    tok_utf8_decode(s + p, ns - p, &cp);
                    if (!tok_cp_is_whitespace(cp)) break;
                    ns = p;
                }
                start = ns > start_offset ? ns : start_offset;
            }
            if (a->rstrip) {
                while (stop < n) {
                    uint32_t cp;
                    size_t k = tok_utf8_decode(s + stop, n - stop, &cp);
                    if (!tok_cp_is_whitespace(cp)) break;
                    stop += k;
                }
                pos = stop;
            }
            if (start_offset < start &&
                !tok_pieces_add(out, s + start_offset, start - start_offset, -1,
                                pc->at_start && start_offset == 0))
                return MXL_ERR_NOMEM;
            if (!tok_pieces_add(out, s + start, stop - start, a->id, pc->at_start && start == 0))
                return MXL_ERR_NOMEM;
            start_offset = stop;
        }
        if (start_offset < n &&
            !tok_pieces_add(out, s + start_offset, n - start_offset, -1,
                            pc->at_start && start_offset == 0))
            return MXL_ERR_NOMEM;
    }
    return MXL_OK;
}

mxl_status tok_gguf_partition(const mxl_tokenizer *t, bool parse_special, tok_pieces *in,
                              tok_pieces *out) {
    tok_pieces cur = {0}, nxt = {0};
    for (size_t i = 0; i < in->n; i++)
        if (!tok_pieces_add(&cur, in->text.p + in->v[i].off, in->v[i].len, in->v[i].token,
                            in->v[i].at_start))
            goto oom;
    for (size_t k = 0; k < t->n_gguf_special; k++) {
        int32_t id = t->gguf_special[k];
        unsigned attr = t->id_attr[id];
        if (!parse_special && (attr & (MXL_TOKEN_ATTR_SPECIAL | MXL_TOKEN_ATTR_UNKNOWN))) continue;
        size_t tl;
        const char *tx = tok_id_str(t, id, &tl);
        if (!tx || !tl) continue;
        tok_pieces_reset(&nxt);
        bool changed = false;
        for (size_t i = 0; i < cur.n; i++) {
            const tok_piece *pc = &cur.v[i];
            const char *s = cur.text.p + pc->off;
            size_t n = pc->len, base = 0;
            if (pc->token < 0) {
                for (;;) {
                    const char *m = tl <= n - base ? memmem(s + base, n - base, tx, tl) : NULL;
                    if (!m) break;
                    size_t at = (size_t)(m - s);
                    if (at > base && !tok_pieces_add(&nxt, s + base, at - base, -1, false)) goto oom;
                    if (!tok_pieces_add(&nxt, tx, tl, id, false)) goto oom;
                    base = at + tl;
                    changed = true;
                }
            }
            if (base < n && !tok_pieces_add(&nxt, s + base, n - base, pc->token, false)) goto oom;
        }
        if (changed) {
            tok_pieces sw = cur;
            cur = nxt;
            nxt = sw;
        }
    }
    tok_pieces_free(&nxt);
    tok_pieces_reset(out);
    {
        tok_pieces sw = *out;
        *out = cur;
        cur = sw;
    }
    tok_pieces_free(&cur);
    return MXL_OK;
oom:
    tok_pieces_free(&cur);
    tok_pieces_free(&nxt);
    return MXL_ERR_NOMEM;
}
