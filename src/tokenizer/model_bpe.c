/* model_bpe.c - the BPE model (HF tokenizers/src/models/bpe/{model,word}.rs) and llama.cpp's GGUF
 * BPE session (llm_tokenizer_bpe_session), which share the merge loop.
 *
 * A word is split into one symbol per character; HF looks each character up in the vocabulary
 * (with continuing_subword_prefix / end_of_word_suffix, then <0xXX> byte fallback, then [unk]
 * fused or not), llama.cpp keeps unknown characters as symbols and falls back to byte tokens at
 * the end. Merges are then applied lowest rank first, leftmost first among equal ranks (a binary
 * heap of (rank, position) with stale entries skipped), exactly like Word::merge_all. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/tok_internal.h"

typedef struct bpe_sym {
    int32_t id;
    uint32_t start, len; /* bytes of the word */
    int32_t prev, next;
} bpe_sym;

/* A candidate merge of the symbol at pos with its right neighbour. The pair's ids are kept so a
 * stale entry is recognised without another hash lookup (the merge table is a function of the
 * pair, so equal ids mean HF's new_id check would pass). */
typedef struct bpe_merge {
    uint32_t rank, pos;
    int32_t new_id, left, right;
} bpe_merge;

static inline bool merge_less(const bpe_merge *a, const bpe_merge *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

typedef struct bpe_heap {
    bpe_merge *v;
    size_t n, cap;
} bpe_heap;

static bool heap_push(bpe_heap *h, bpe_merge m) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        bpe_merge *v = mxl_realloc(h->v, cap * sizeof(*v));
        if (!v) return false;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    h->v[i] = m;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!merge_less(&h->v[i], &h->v[p])) break;
        bpe_merge t = h->v[i];
        h->v[i] = h->v[p];
        h->v[p] = t;
        i = p;
    }
    return true;
}

static bpe_merge heap_pop(bpe_heap *h) {
    bpe_merge top = h->v[0];
    h->v[0] = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && merge_less(&h->v[l], &h->v[m])) m = l;
        if (r < h->n && merge_less(&h->v[r], &h->v[m])) m = r;
        if (m == i) break;
        bpe_merge t = h->v[i];
        h->v[i] = h->v[m];
        h->v[m] = t;
        i = m;
    }
    return top;
}

typedef struct bpe_word {
    bpe_sym *v;
    size_t n, cap;
} bpe_word;

static bool word_add(bpe_word *w, int32_t id, uint32_t start, uint32_t len) {
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 32;
        bpe_sym *v = mxl_realloc(w->v, cap * sizeof(*v));
        if (!v) return false;
        w->v = v;
        w->cap = cap;
    }
    int32_t i = (int32_t)w->n;
    w->v[w->n++] = (bpe_sym){id, start, len, i - 1, -1};
    if (i > 0) w->v[i - 1].next = i;
    return true;
}

static mxl_status merge_all(const tok_pairmap *merges, bpe_word *w) {
    bpe_heap h = {0};
    for (size_t i = 0; i + 1 < w->n; i++) {
        uint32_t rank;
        int32_t nid;
        if (w->v[i].id >= 0 && w->v[i + 1].id >= 0 &&
            tok_pairmap_get(merges, w->v[i].id, w->v[i + 1].id, &rank, &nid) &&
            !heap_push(&h, (bpe_merge){rank, (uint32_t)i, nid, w->v[i].id, w->v[i + 1].id})) {
            mxl_free(h.v);
            return MXL_ERR_NOMEM;
        }
    }
    while (h.n) {
        bpe_merge top = heap_pop(&h);
        bpe_sym *cur = &w->v[top.pos];
        if (cur->len == 0 || cur->next < 0) continue;
        bpe_sym *right = &w->v[cur->next];
        uint32_t rank;
        int32_t nid;
        if (cur->id != top.left || right->id != top.right) continue;
        cur->id = top.new_id;
        cur->len += right->len;
        right->len = 0;
        cur->next = right->next;
        if (right->next >= 0) w->v[right->next].prev = (int32_t)top.pos;
        if (cur->prev >= 0) {
            bpe_sym *pv = &w->v[cur->prev];
            if (pv->id >= 0 && cur->id >= 0 && tok_pairmap_get(merges, pv->id, cur->id, &rank, &nid) &&
                !heap_push(&h, (bpe_merge){rank, (uint32_t)cur->prev, nid, pv->id, cur->id}))
                goto oom;
        }
        if (cur->next >= 0) {
            bpe_sym *nx = &w->v[cur->next];
            if (nx->id >= 0 && cur->id >= 0 && tok_pairmap_get(merges, cur->id, nx->id, &rank, &nid) &&
                !heap_push(&h, (bpe_merge){rank, top.pos, nid, cur->id, nx->id}))
                goto oom;
        }
    }
    mxl_free(h.v);
    return MXL_OK;
oom:
    mxl_free(h.v);
    return MXL_ERR_NOMEM;
}

static int32_t vocab_id(const mxl_tokenizer *t, const char *s, size_t n) {
    return tok_map_get(&t->vocab, s, n);
}

/* HF merge_word: initial symbols with prefix/suffix, byte fallback and unk handling. */
static mxl_status hf_symbols(const mxl_tokenizer *t, const char *s, size_t n, bpe_word *w) {
    const tok_model *m = &t->model;
    mxl_strbuf tmp = {0};
    int32_t unk_id = -1;
    uint32_t unk_start = 0, unk_len = 0;
    bool have_unk = false;
    mxl_status st = MXL_OK;
    for (size_t i = 0; i < n;) {
        size_t k = tok_utf8_len((uint8_t)s[i]);
        if (k > n - i) k = n - i;
        bool first = i == 0, last = i + k == n;
        if (m->bmp_ids && k <= 3) {
            uint32_t cp;
            tok_utf8_decode(s + i, k, &cp);
            int32_t id = m->bmp_ids[cp];
            if (id >= 0) {
                if (have_unk) {
                    if (!word_add(w, unk_id, unk_start, unk_len)) goto oom;
                    have_unk = false;
                }
                if (!word_add(w, id, (uint32_t)i, (uint32_t)k)) goto oom;
                i += k;
                continue;
            }
        }
        tmp.n = 0;
        if (!first && m->cont_prefix && !mxl_strbuf_append(&tmp, m->cont_prefix, m->cont_prefix_len))
            goto oom;
        if (!mxl_strbuf_append(&tmp, s + i, k)) goto oom;
        if (last && m->eow_suffix && !mxl_strbuf_append(&tmp, m->eow_suffix, m->eow_suffix_len))
            goto oom;
        int32_t id = vocab_id(t, tmp.p, tmp.n);
        if (id >= 0) {
            if (have_unk) {
                if (!word_add(w, unk_id, unk_start, unk_len)) goto oom;
                have_unk = false;
            }
            if (!word_add(w, id, (uint32_t)i, (uint32_t)k)) goto oom;
            i += k;
            continue;
        }
        if (m->byte_fallback) {
            bool all = true;
            for (size_t b = 0; b < tmp.n; b++)
                if (m->byte_ids[(uint8_t)tmp.p[b]] < 0) all = false;
            if (all) {
                /* HF does not flush a pending unk here: it is added after later symbols */
                for (size_t b = 0; b < tmp.n; b++)
                    if (!word_add(w, m->byte_ids[(uint8_t)tmp.p[b]], (uint32_t)i, 1)) goto oom;
                i += k;
                continue;
            }
        }
        if (m->unk_id >= 0) {
            if (have_unk && m->fuse_unk) {
                unk_len += (uint32_t)k;
            } else {
                if (have_unk && !word_add(w, unk_id, unk_start, unk_len)) goto oom;
                unk_id = m->unk_id;
                unk_start = (uint32_t)i;
                unk_len = (uint32_t)k;
                have_unk = true;
            }
        }
        i += k;
    }
    if (have_unk && !word_add(w, unk_id, unk_start, unk_len)) goto oom;
    mxl_strbuf_free(&tmp);
    return st;
oom:
    mxl_strbuf_free(&tmp);
    return MXL_ERR_NOMEM;
}

mxl_status tok_bpe_tokenize(const mxl_tokenizer *t, const char *s, size_t n, mxl_token_ids *out);
mxl_status tok_bpe_tokenize(const mxl_tokenizer *t, const char *s, size_t n, mxl_token_ids *out) {
    const tok_model *m = &t->model;
    if (n == 0) return MXL_OK;
    if (n > UINT32_MAX) return MXL_ERR_OVERFLOW;
    if (m->ignore_merges) {
        int32_t id = vocab_id(t, s, n);
        if (id >= 0) return tok_ids_push(out, id) ? MXL_OK : MXL_ERR_NOMEM;
    }
    if (m->newline_words_whole) {
        size_t j = 0;
        while (j < n && s[j] == '\n') j++;
        if (j == n) {
            int32_t id = vocab_id(t, s, n);
            if (id >= 0) return tok_ids_push(out, id) ? MXL_OK : MXL_ERR_NOMEM;
        }
    }
    bpe_word w = {0};
    mxl_status st = MXL_OK;
    if (m->gguf_byte_tokens) {
        for (size_t i = 0; i < n;) {
            size_t k = tok_utf8_len((uint8_t)s[i]);
            if (k > n - i) k = n - i;
            if (!word_add(&w, vocab_id(t, s + i, k), (uint32_t)i, (uint32_t)k)) {
                st = MXL_ERR_NOMEM;
                break;
            }
            i += k;
        }
    } else {
        st = hf_symbols(t, s, n, &w);
    }
    if (st == MXL_OK) st = merge_all(&m->merges, &w);
    for (size_t i = 0; st == MXL_OK && i < w.n; i++) {
        const bpe_sym *y = &w.v[i];
        if (y->len == 0) continue;
        if (y->id >= 0) {
            if (!tok_ids_push(out, y->id)) st = MXL_ERR_NOMEM;
            continue;
        }
        /* GGUF: a symbol outside the vocabulary becomes byte tokens */
        for (uint32_t b = 0; b < y->len; b++) {
            uint8_t c = (uint8_t)s[y->start + b];
            int32_t id = m->gguf_byte_encode ? vocab_id(t, (const char *)&c, 1) : m->byte_ids[c];
            if (id >= 0 && !tok_ids_push(out, id)) st = MXL_ERR_NOMEM;
        }
    }
    mxl_free(w.v);
    return st;
}
