/* model_spm.c - llama.cpp's SentencePiece tokenizer for GGUF "llama" vocabularies
 * (llm_tokenizer_spm_session): one symbol per UTF-8 character, then repeatedly merge the adjacent
 * pair whose concatenation is a vocabulary token with the highest score (ties: leftmost), and
 * finally resegment: a symbol that is not a token is split back along the merges that built it,
 * and a character that is no token becomes <0xXX> byte tokens. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/tok_internal.h"

typedef struct spm_sym {
    uint32_t start, len;
    int32_t prev, next;
} spm_sym;

typedef struct spm_bigram {
    float score;
    int32_t left, right;
    uint32_t size;
} spm_bigram;

/* "a before b" in the max-heap: higher score, then smaller left. */
static inline bool big_better(const spm_bigram *a, const spm_bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

typedef struct spm_state {
    const mxl_tokenizer *t;
    const char *s;
    spm_sym *sym;
    size_t n_sym;
    spm_bigram *heap;
    size_t n_heap, cap_heap;
    /* rev_merge: text of the last bigram pushed for a given string -> (left, right); keyed by
     * the string, like llama.cpp's std::map (later pushes overwrite) */
    tok_map rev_map;        /* string -> index into rev */
    int32_t (*rev)[2];
    size_t n_rev, cap_rev;
} spm_state;

static bool heap_push(spm_state *st, spm_bigram b) {
    if (st->n_heap == st->cap_heap) {
        size_t cap = st->cap_heap ? st->cap_heap * 2 : 64;
        spm_bigram *v = mxl_realloc(st->heap, cap * sizeof(*v));
        if (!v) return false;
        st->heap = v;
        st->cap_heap = cap;
    }
    size_t i = st->n_heap++;
    st->heap[i] = b;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!big_better(&st->heap[i], &st->heap[p])) break;
        spm_bigram t = st->heap[i];
        st->heap[i] = st->heap[p];
        st->heap[p] = t;
        i = p;
    }
    return true;
}

static spm_bigram heap_pop(spm_state *st) {
    spm_bigram top = st->heap[0];
    st->heap[0] = st->heap[--st->n_heap];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < st->n_heap && big_better(&st->heap[l], &st->heap[m])) m = l;
        if (r < st->n_heap && big_better(&st->heap[r], &st->heap[m])) m = r;
        if (m == i) break;
        spm_bigram t = st->heap[i];
        st->heap[i] = st->heap[m];
        st->heap[m] = t;
        i = m;
    }
    return top;
}

static bool try_add_bigram(spm_state *st, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return true;
    const char *text = st->s + st->sym[left].start;
    uint32_t len = st->sym[left].len + st->sym[right].len;
    int32_t id = tok_map_get(&st->t->vocab, text, len);
    if (id < 0 || (uint32_t)id >= st->t->n_ids) return true;
    spm_bigram b = {st->t->model.scores[id], left, right, len};
    if (!heap_push(st, b)) return false;
    int32_t idx = tok_map_get(&st->rev_map, text, len);
    if (idx < 0) {
        if (st->n_rev == st->cap_rev) {
            size_t cap = st->cap_rev ? st->cap_rev * 2 : 64;
            int32_t(*v)[2] = mxl_realloc(st->rev, cap * sizeof(*v));
            if (!v) return false;
            st->rev = v;
            st->cap_rev = cap;
        }
        idx = (int32_t)st->n_rev++;
        if (!tok_map_put(&st->rev_map, text, len, idx, NULL)) return false;
    }
    st->rev[idx][0] = left;
    st->rev[idx][1] = right;
    return true;
}

static bool resegment(spm_state *st, int32_t si, mxl_token_ids *out, int depth) {
    const spm_sym *y = &st->sym[si];
    const char *text = st->s + y->start;
    int32_t id = tok_map_get(&st->t->vocab, text, y->len);
    if (id >= 0) return tok_ids_push(out, id);
    int32_t idx = depth < 4096 ? tok_map_get(&st->rev_map, text, y->len) : -1;
    if (idx < 0) {
        for (uint32_t j = 0; j < y->len; j++) {
            int32_t b = st->t->model.byte_ids[(uint8_t)text[j]];
            if (b < 0) {
                /* llama.cpp's byte_to_token falls back to the 1-byte string */
                b = tok_map_get(&st->t->vocab, text + j, 1);
            }
            if (b >= 0 && !tok_ids_push(out, b)) return false;
        }
        return true;
    }
    int32_t l = st->rev[idx][0], r = st->rev[idx][1];
    return resegment(st, l, out, depth + 1) && resegment(st, r, out, depth + 1);
}

mxl_status tok_spm_tokenize(const mxl_tokenizer *t, const char *s, size_t n, mxl_token_ids *out);
mxl_status tok_spm_tokenize(const mxl_tokenizer *t, const char *s, size_t n, mxl_token_ids *out) {
    if (n == 0) return MXL_OK;
    if (n > UINT32_MAX / 2) return MXL_ERR_OVERFLOW;
    spm_state st = {0};
    st.t = t;
    st.s = s;
    mxl_status rc = MXL_ERR_NOMEM;
    st.sym = mxl_malloc(n * sizeof(spm_sym));
    if (!st.sym) goto done;
    for (size_t off = 0; off < n;) {
        size_t k = tok_utf8_len((uint8_t)s[off]);
        if (k > n - off) k = n - off;
        int32_t i = (int32_t)st.n_sym;
        st.sym[st.n_sym++] = (spm_sym){(uint32_t)off, (uint32_t)k, i - 1,
                                       off + k == n ? -1 : i + 1};
        off += k;
    }
    for (size_t i = 1; i < st.n_sym; i++)
        if (!try_add_bigram(&st, (int32_t)i - 1, (int32_t)i)) goto done;
    while (st.n_heap) {
        spm_bigram b = heap_pop(&st);
        spm_sym *l = &st.sym[b.left], *r = &st.sym[b.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != b.size) continue;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) st.sym[r->next].prev = b.left;
        if (!try_add_bigram(&st, l->prev, b.left)) goto done;
        if (!try_add_bigram(&st, b.left, l->next)) goto done;
    }
    for (int32_t i = 0; i != -1; i = st.sym[i].next)
        if (!resegment(&st, i, out, 0)) goto done;
    rc = MXL_OK;
done:
    mxl_free(st.sym);
    mxl_free(st.heap);
    mxl_free(st.rev);
    tok_map_free(&st.rev_map);
    return rc;
}
