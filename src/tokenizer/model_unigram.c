/* model_unigram.c - the Unigram model (HF tokenizers/src/models/unigram/model.rs,
 * encode_optimized, after SentencePiece's unigram_model.cc): a forward Viterbi pass keeps, for
 * every byte position, the best-scoring segmentation ending there; pieces are the vocabulary
 * prefixes starting at each character (scores are log-probabilities, summed), and a character no
 * piece covers costs unk_score = min_score - 10. Backtracking fuses consecutive unknown
 * characters into one string, which then becomes [unk] (or <0xXX> byte tokens with
 * byte_fallback). */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/tok_internal.h"

typedef struct best_node {
    int32_t id;      /* -1 = none yet */
    size_t starts_at;
    double score;
} best_node;

static mxl_status emit(const mxl_tokenizer *t, const char *s, size_t n, mxl_token_ids *out) {
    int32_t id = tok_map_get(&t->vocab, s, n);
    if (id >= 0) return tok_ids_push(out, id) ? MXL_OK : MXL_ERR_NOMEM;
    if (t->model.byte_fallback) {
        bool all = true;
        for (size_t i = 0; i < n && all; i++) all = t->model.byte_ids[(uint8_t)s[i]] >= 0;
        if (all) {
            for (size_t i = 0; i < n; i++)
                if (!tok_ids_push(out, t->model.byte_ids[(uint8_t)s[i]])) return MXL_ERR_NOMEM;
            return MXL_OK;
        }
    }
    if (t->model.unk_id < 0) return MXL_ERR_FORMAT;
    return tok_ids_push(out, t->model.unk_id) ? MXL_OK : MXL_ERR_NOMEM;
}

mxl_status tok_unigram_tokenize(const mxl_tokenizer *t, const char *s, size_t n, mxl_token_ids *out);
mxl_status tok_unigram_tokenize(const mxl_tokenizer *t, const char *s, size_t n, mxl_token_ids *out) {
    if (n == 0) return MXL_OK;
    const tok_model *m = &t->model;
    best_node *best = mxl_malloc((n + 1) * sizeof(best_node));
    if (!best) return MXL_ERR_NOMEM;
    for (size_t i = 0; i <= n; i++) best[i] = (best_node){-1, 0, 0.0};
    best[0].id = -2; /* the start: reachable with score 0 */
    for (size_t start = 0; start < n;) {
        double here = best[start].score;
        size_t mblen = tok_utf8_len((uint8_t)s[start]);
        if (mblen > n - start) mblen = n - start;
        bool single = false;
        size_t maxl = m->max_piece_len < n - start ? m->max_piece_len : n - start;
        for (size_t l = 1; l <= maxl; l++) {
            size_t end = start + l;
            if (end < n && ((uint8_t)s[end] & 0xC0) == 0x80) continue; /* not a character boundary */
            int32_t id = tok_map_get(&t->vocab, s + start, l);
            if (id < 0) continue;
            double cand = m->uscores[id] + here;
            best_node *tn = &best[end];
            if (tn->id == -1 || cand > tn->score) *tn = (best_node){id, start, cand};
            if (l == mblen) single = true;
        }
        if (!single) {
            if (m->unk_id < 0) {
                mxl_free(best);
                return MXL_ERR_FORMAT;
            }
            double cand = m->unk_score + here;
            best_node *tn = &best[start + mblen];
            if (tn->id == -1 || cand > tn->score) *tn = (best_node){m->unk_id, start, cand};
        }
        start += mblen;
    }
    /* backtrack: collect (start, end) segments, fusing runs of unk */
    size_t cap = 16, cnt = 0;
    size_t (*seg)[2] = mxl_malloc(cap * sizeof(*seg));
    mxl_status st = seg ? MXL_OK : MXL_ERR_NOMEM;
    size_t ends_at = n, unk_end = 0;
    bool in_unk = false;
    while (st == MXL_OK && ends_at > 0) {
        best_node *nd = &best[ends_at];
        size_t starts_at = nd->starts_at;
        bool is_unk = m->unk_id >= 0 && nd->id == m->unk_id;
        if (cnt + 2 > cap) {
            cap *= 2;
            size_t(*q)[2] = mxl_realloc(seg, cap * sizeof(*seg));
            if (!q) {
                st = MXL_ERR_NOMEM;
                break;
            }
            seg = q;
        }
        if (is_unk) {
            if (!in_unk) unk_end = ends_at;
            in_unk = true;
        } else {
            if (in_unk) {
                seg[cnt][0] = ends_at;
                seg[cnt++][1] = unk_end;
                in_unk = false;
            }
            seg[cnt][0] = starts_at;
            seg[cnt++][1] = ends_at;
        }
        ends_at = starts_at;
    }
    if (st == MXL_OK && in_unk) {
        seg[cnt][0] = 0;
        seg[cnt++][1] = unk_end;
    }
    for (size_t k = cnt; st == MXL_OK && k-- > 0;) st = emit(t, s + seg[k][0], seg[k][1] - seg[k][0], out);
    mxl_free(seg);
    mxl_free(best);
    return st;
}
