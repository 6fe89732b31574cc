/* grammar.c - the GBNF matcher (grammar.h), after llama.cpp's src/llama-grammar.cpp: a parse
 * state is a set of stacks of element indices (the top is the next terminal to match), expanded
 * so every top is a character set or the stack is empty (the sentence may end there). A code point
 * moves every stack whose top accepts it past that set and re-expands it; stacks that cannot take
 * it die. Tokens are matched as byte strings decoded to code points with the partial UTF-8
 * sequence carried between tokens, and whole-vocabulary masks use llama.cpp's candidate
 * rejection: per stack, candidates are filtered on their first code point and the survivors
 * recurse on the stack advanced by it, so shared prefixes are matched once per stack.
 *
 * Stacks are deduplicated as they are made (identical stacks would only multiply the work). A
 * state whose stacks grow past GR_MAX_STACK_ELEMS in total refuses the input instead of using
 * unbounded memory. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/grammar_internal.h"

#define GR_MAX_STACK_ELEMS (1u << 20)

/* ---- stack sets ------------------------------------------------------------------------------ */

/* Stacks back to back in data; stack i is data[off[i] .. off[i] + len[i]). */
typedef struct gstacks {
    uint32_t *data;
    size_t n_data, cap_data;
    size_t *off;
    uint32_t *len;
    uint64_t *hash;
    size_t n, cap;
    bool oom; /* an append failed or the cap was hit: the set is incomplete */
    uint32_t *tmp; /* scratch stack (advance) */
    size_t cap_tmp;
    uint32_t *slots; /* open-addressing index for dedup: stack index + 1, 0 = free */
    size_t n_slots;  /* power of two, or 0 before the first dedup push */
} gstacks;

static void gs_free(gstacks *s) {
    mxl_free(s->data);
    mxl_free(s->off);
    mxl_free(s->len);
    mxl_free(s->hash);
    mxl_free(s->tmp);
    mxl_free(s->slots);
    memset(s, 0, sizeof *s);
}

static void gs_clear(gstacks *s) {
    if (s->n_slots && s->n) memset(s->slots, 0, s->n_slots * sizeof *s->slots);
    s->n = 0;
    s->n_data = 0;
    s->oom = false;
}

static uint64_t hash_stack(const uint32_t *v, size_t n) {
    uint64_t h = 1469598103934665603ull ^ n;
    for (size_t i = 0; i < n; i++) h = (h ^ v[i]) * 1099511628211ull;
    return h;
}

/* Index of an equal stack through the hash slots, or SIZE_MAX; *slot = where it would go. */
static size_t gs_find(const gstacks *s, const uint32_t *v, size_t n, uint64_t h, size_t *slot) {
    size_t mask = s->n_slots - 1, i = (size_t)h & mask;
    for (;;) {
        uint32_t e = s->slots[i];
        if (e == 0) {
            *slot = i;
            return SIZE_MAX;
        }
        size_t k = e - 1;
        if (s->hash[k] == h && s->len[k] == n && (n == 0 || !memcmp(s->data + s->off[k], v, n * sizeof *v))) return k;
        i = (i + 1) & mask;
    }
}

/* Keeps the slot table at most half full; rebuilds it from the stacks when grown. */
static bool gs_index_reserve(gstacks *s) {
    if (s->n_slots && (s->n + 1) * 2 <= s->n_slots) return true;
    size_t ns = s->n_slots ? s->n_slots * 2 : 64;
    while ((s->n + 1) * 2 > ns) ns *= 2;
    uint32_t *t = mxl_calloc(ns, sizeof *t);
    if (!t) return false;
    mxl_free(s->slots);
    s->slots = t;
    s->n_slots = ns;
    for (size_t k = 0; k < s->n; k++) {
        size_t i = (size_t)s->hash[k] & (ns - 1);
        while (t[i]) i = (i + 1) & (ns - 1);
        t[i] = (uint32_t)(k + 1);
    }
    return true;
}

/* Appends stack v[0..n) with e1 then e2 on top (each only when != UINT32_MAX), unless dedup finds
 * the same stack already in s. v must not point into s. */
static void gs_push(gstacks *s, const uint32_t *v, size_t n, uint32_t e1, uint32_t e2, bool dedup) {
    if (s->oom) return;
    size_t total = n + (e1 != UINT32_MAX) + (e2 != UINT32_MAX);
    if (s->n_data + total > GR_MAX_STACK_ELEMS) {
        s->oom = true;
        return;
    }
    if (s->n_data + total > s->cap_data || !s->data) { /* (an empty stack too: dst below must not be NULL + 0) */
        size_t cap = s->cap_data ? s->cap_data : 64;
        while (cap < s->n_data + total) cap *= 2;
        uint32_t *d = mxl_realloc(s->data, cap * sizeof *d);
        if (!d) {
            s->oom = true;
            return;
        }
        s->data = d;
        s->cap_data = cap;
    }
    uint32_t *dst = s->data + s->n_data;
    if (n) memcpy(dst, v, n * sizeof *v);
    size_t k = n;
    if (e1 != UINT32_MAX) dst[k++] = e1;
    if (e2 != UINT32_MAX) dst[k++] = e2;
    uint64_t h = hash_stack(dst, total);
    size_t slot = 0;
    if (dedup) {
        if (!gs_index_reserve(s)) {
            s->oom = true;
            return;
        }
        if (gs_find(s, dst, total, h, &slot) != SIZE_MAX) return;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        size_t *o = mxl_realloc(s->off, cap * sizeof *o);
        if (o) s->off = o;
        uint32_t *l = mxl_realloc(s->len, cap * sizeof *l);
        if (l) s->len = l;
        uint64_t *hh = mxl_realloc(s->hash, cap * sizeof *hh);
        if (hh) s->hash = hh;
        if (!o || !l || !hh) {
            s->oom = true;
            return;
        }
        s->cap = cap;
    }
    s->off[s->n] = s->n_data;
    s->len[s->n] = (uint32_t)total;
    s->hash[s->n] = h;
    s->n++;
    s->n_data += total;
    if (dedup) s->slots[slot] = (uint32_t)s->n;
}

/* ---- matching one character ---------------------------------------------------------------- */

/* Does the set starting at el[pos] accept cp? *after = the element past the set. */
static bool match_char(const gr_elem *el, uint32_t pos, uint32_t cp, uint32_t *after) {
    bool positive = el[pos].type == GR_CHAR || el[pos].type == GR_CHAR_ANY, found = false;
    do {
        if (el[pos + 1].type == GR_CHAR_RNG_UPPER) {
            found = found || (el[pos].value <= cp && cp <= el[pos + 1].value);
            pos += 2;
        } else if (el[pos].type == GR_CHAR_ANY) {
            found = true;
            pos += 1;
        } else {
            found = found || el[pos].value == cp;
            pos += 1;
        }
    } while (el[pos].type == GR_CHAR_ALT);
    *after = pos;
    return found == positive;
}

typedef struct partial {
    uint32_t value;
    int n_remain; /* bytes still expected; -1: invalid sequence */
} partial;

/* Could some completion of the open UTF-8 sequence be accepted by the set at el[pos]? */
static bool match_partial(const gr_elem *el, uint32_t pos, partial pu) {
    bool positive = el[pos].type == GR_CHAR || el[pos].type == GR_CHAR_ANY;
    if (pu.n_remain < 0 || (pu.n_remain == 1 && pu.value < 2)) return false; /* invalid or overlong */
    uint32_t low = pu.value << (pu.n_remain * 6), high = low | ((1u << (pu.n_remain * 6)) - 1);
    if (low == 0) {
        if (pu.n_remain == 2) low = 1u << 11;
        else if (pu.n_remain == 3) low = 1u << 16;
    }
    do {
        if (el[pos + 1].type == GR_CHAR_RNG_UPPER) {
            if (el[pos].value <= high && low <= el[pos + 1].value) return positive;
            pos += 2;
        } else if (el[pos].type == GR_CHAR_ANY) {
            return true;
        } else {
            if (low <= el[pos].value && el[pos].value <= high) return positive;
            pos += 1;
        }
    } while (el[pos].type == GR_CHAR_ALT);
    return !positive;
}

/* Expands stack v[0..n) (+extra on top) until every top is a terminal or the stack is empty,
 * adding the results to out (deduplicated). todo is scratch (its tmp holds the stack being
 * expanded). */
static void advance(const mxl_grammar *g, const uint32_t *v, size_t n, uint32_t extra, gstacks *out, gstacks *todo,
                    gstacks *seen) {
    gs_clear(todo);
    gs_clear(seen);
    gs_push(todo, v, n, extra, UINT32_MAX, false);
    while (todo->n && !todo->oom && !out->oom) {
        size_t k = --todo->n, len = todo->len[k];
        if (len > todo->cap_tmp) {
            uint32_t *t = mxl_realloc(todo->tmp, len * 2 * sizeof *t);
            if (!t) {
                todo->oom = true;
                break;
            }
            todo->tmp = t;
            todo->cap_tmp = len * 2;
        }
        uint32_t *cur = todo->tmp;
        if (len) memcpy(cur, todo->data + todo->off[k], len * sizeof *cur);
        todo->n_data = todo->off[k]; /* popped */
        if (len == 0 || g->el[cur[len - 1]].type != GR_REF) { /* empty, or a terminal on top */
            gs_push(out, cur, len, UINT32_MAX, UINT32_MAX, true);
            continue;
        }
        /* one child per alternative of the referenced rule: the stack without its top, the rest
         * of the current alternative (if any), the alternative's first element (if not empty) */
        /* a stack expanded before in this call would only repeat itself (cycles through rules
         * that can be empty, e.g. ( [x]* )*) */
        size_t before = seen->n;
        gs_push(seen, cur, len, UINT32_MAX, UINT32_MAX, true);
        if (seen->oom) {
            todo->oom = true;
            break;
        }
        if (seen->n == before) continue;
        uint32_t top = cur[len - 1];
        uint32_t rest = gr_is_end_of_seq(&g->el[top + 1]) ? UINT32_MAX : top + 1;
        uint32_t sub = g->rule_start[g->el[top].value];
        for (;;) {
            gs_push(todo, cur, len - 1, rest, gr_is_end_of_seq(&g->el[sub]) ? UINT32_MAX : sub, false);
            while (!gr_is_end_of_seq(&g->el[sub])) sub++;
            if (g->el[sub].type == GR_ALT) sub++;
            else break;
        }
    }
    if (todo->oom) out->oom = true;
}

/* Every stack of in that accepts cp, moved past it and expanded, into out. */
static void accept_cp(const mxl_grammar *g, const gstacks *in, uint32_t cp, gstacks *out, gstacks *todo, gstacks *seen) {
    gs_clear(out);
    for (size_t i = 0; i < in->n && !out->oom; i++) {
        size_t len = in->len[i];
        if (len == 0) continue;
        const uint32_t *v = in->data + in->off[i];
        uint32_t after;
        if (!match_char(g->el, v[len - 1], cp, &after)) continue;
        advance(g, v, len - 1, gr_is_end_of_seq(&g->el[after]) ? UINT32_MAX : after, out, todo, seen);
    }
}

/* ---- UTF-8 --------------------------------------------------------------------------------- */

/* Decodes bytes after an open sequence pu into cps (capacity len + 2, 0-terminated), like
 * llama.cpp's decode_utf8: an invalid byte ends the decode with cps = {0} and n_remain = -1. */
static partial decode_utf8(const unsigned char *s, size_t len, partial pu, uint32_t *cps, size_t *n_cps) {
    static const int lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};
    size_t n = 0, i = 0;
    uint32_t value = pu.value;
    int n_remain = pu.n_remain;
    while (i < len && n_remain > 0) {
        if ((s[i] >> 6) != 2) {
            cps[0] = 0;
            *n_cps = 0;
            return (partial){0, -1};
        }
        value = (value << 6) + (s[i] & 0x3F);
        i++;
        n_remain--;
    }
    if (pu.n_remain > 0 && n_remain == 0) cps[n++] = value;
    while (i < len) {
        n_remain = lookup[s[i] >> 4] - 1;
        if (n_remain < 0) {
            cps[0] = 0;
            *n_cps = 0;
            return (partial){0, -1};
        }
        value = s[i] & ((1u << (7 - n_remain)) - 1);
        i++;
        while (i < len && n_remain > 0) {
            value = (value << 6) + (s[i] & 0x3F);
            i++;
            n_remain--;
        }
        if (n_remain == 0) cps[n++] = value;
    }
    cps[n] = 0;
    *n_cps = n;
    return (partial){value, n_remain};
}

/* ---- candidate arrays ---------------------------------------------------------------------- */

typedef struct gcand {
    uint32_t idx;        /* token id */
    const uint32_t *cp;  /* remaining code points, 0-terminated */
    partial pu;          /* open sequence at the token's end */
} gcand;

/* Candidate arrays come from a block arena kept in the state and released by marks, so a mask
 * over the whole vocabulary (arrays of up to n_vocab entries at every depth) does not go back to
 * malloc (and the kernel's fresh pages) on every step. */
typedef struct gblock {
    gcand *v;
    size_t cap, used;
} gblock;

typedef struct garena {
    gblock *b;
    size_t nb, cur;
    bool oom;
} garena;

typedef struct gmark {
    size_t cur, used;
} gmark;

static gmark ga_mark(const garena *a) { return (gmark){a->cur, a->nb ? a->b[a->cur].used : 0}; }

static void ga_restore(garena *a, gmark m) {
    for (size_t i = m.cur + 1; i < a->nb; i++) a->b[i].used = 0;
    if (a->nb) a->b[m.cur].used = m.used;
    a->cur = m.cur;
}

static gcand *ga_alloc(garena *a, size_t n) {
    if (n == 0) n = 1;
    while (a->cur < a->nb) {
        gblock *b = &a->b[a->cur];
        if (b->cap - b->used >= n) {
            gcand *p = b->v + b->used;
            b->used += n;
            return p;
        }
        if (a->cur + 1 >= a->nb) break;
        a->cur++;
        a->b[a->cur].used = 0;
    }
    gblock *nb = mxl_realloc(a->b, (a->nb + 1) * sizeof *nb);
    if (!nb) {
        a->oom = true;
        return NULL;
    }
    a->b = nb;
    size_t cap = n > ((size_t)1 << 16) ? n : ((size_t)1 << 16);
    gblock *b = &a->b[a->nb];
    if (!(b->v = mxl_malloc(cap * sizeof *b->v))) {
        a->oom = true;
        return NULL;
    }
    b->cap = cap;
    b->used = n;
    a->cur = a->nb++;
    return b->v;
}

static void ga_free(garena *a) {
    for (size_t i = 0; i < a->nb; i++) mxl_free(a->b[i].v);
    mxl_free(a->b);
    memset(a, 0, sizeof *a);
}

/* ---- states -------------------------------------------------------------------------------- */

struct mxl_grammar_state {
    const mxl_grammar *g;
    gstacks cur, next, todo, seen, backup;
    partial pu;
    uint32_t *cps; /* scratch for decoding */
    size_t cap_cps;
    garena arena;  /* candidate arrays of masks */
};

void mxl_grammar_state_reset(mxl_grammar_state *st) {
    gs_clear(&st->cur);
    st->pu = (partial){0, 0};
    const mxl_grammar *g = st->g;
    /* one stack per alternative of root */
    uint32_t pos = g->rule_start[g->root];
    for (;;) {
        if (gr_is_end_of_seq(&g->el[pos])) gs_push(&st->cur, NULL, 0, UINT32_MAX, UINT32_MAX, true); /* empty alternative */
        else advance(g, NULL, 0, pos, &st->cur, &st->todo, &st->seen);
        while (!gr_is_end_of_seq(&g->el[pos])) pos++;
        if (g->el[pos].type == GR_ALT) pos++;
        else break;
    }
}

mxl_status mxl_grammar_state_create(const mxl_grammar *g, mxl_grammar_state **out, mxl_error *err) {
    *out = NULL;
    mxl_grammar_state *st = mxl_calloc(1, sizeof *st);
    if (!st) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    st->g = g;
    mxl_grammar_state_reset(st);
    if (st->cur.oom) {
        mxl_grammar_state_destroy(st);
        return mxl_error_set(err, MXL_ERR_NOMEM, "grammar: the start state is too large");
    }
    *out = st;
    return MXL_OK;
}

void mxl_grammar_state_destroy(mxl_grammar_state *st) {
    if (!st) return;
    gs_free(&st->cur);
    gs_free(&st->next);
    gs_free(&st->todo);
    gs_free(&st->seen);
    gs_free(&st->backup);
    ga_free(&st->arena);
    mxl_free(st->cps);
    mxl_free(st);
}

bool mxl_grammar_state_can_end(const mxl_grammar_state *st) {
    for (size_t i = 0; i < st->cur.n; i++)
        if (st->cur.len[i] == 0) return true;
    return false;
}

static bool ensure_cps(mxl_grammar_state *st, size_t n) {
    if (n <= st->cap_cps) return true;
    uint32_t *p = mxl_realloc(st->cps, n * sizeof *p);
    if (!p) return false;
    st->cps = p;
    st->cap_cps = n;
    return true;
}

static void gs_copy(gstacks *dst, const gstacks *src) {
    gs_clear(dst);
    for (size_t i = 0; i < src->n; i++) gs_push(dst, src->data + src->off[i], src->len[i], UINT32_MAX, UINT32_MAX, false);
    dst->oom = dst->oom || src->oom;
}

static void gs_swap(gstacks *a, gstacks *b) {
    gstacks t = *a;
    *a = *b;
    *b = t;
}

bool mxl_grammar_state_accept_bytes(mxl_grammar_state *st, const char *bytes, size_t len) {
    if (len > SIZE_MAX / 4 - 2 || !ensure_cps(st, len + 2)) return false;
    size_t n;
    partial pu = decode_utf8((const unsigned char *)bytes, len, st->pu, st->cps, &n);
    if (pu.n_remain < 0) return false;
    gs_copy(&st->backup, &st->cur);
    if (st->backup.oom) return false;
    for (size_t i = 0; i < n; i++) {
        accept_cp(st->g, &st->cur, st->cps[i], &st->next, &st->todo, &st->seen);
        gs_swap(&st->cur, &st->next);
        if (st->cur.n == 0 || st->cur.oom) {
            gs_swap(&st->cur, &st->backup);
            return false;
        }
    }
    /* an open sequence must still be completable by some stack */
    if (pu.n_remain > 0) {
        bool any = false;
        for (size_t i = 0; i < st->cur.n && !any; i++)
            if (st->cur.len[i]) any = match_partial(st->g->el, st->cur.data[st->cur.off[i] + st->cur.len[i] - 1], pu);
        if (!any) {
            gs_swap(&st->cur, &st->backup);
            return false;
        }
    }
    st->pu = pu;
    return true;
}

bool mxl_grammar_accepts(const mxl_grammar *g, const char *text, size_t len) {
    mxl_grammar_state *st;
    if (mxl_grammar_state_create(g, &st, NULL)) return false;
    bool ok = mxl_grammar_state_accept_bytes(st, text, len) && st->pu.n_remain == 0 && mxl_grammar_state_can_end(st);
    mxl_grammar_state_destroy(st);
    return ok;
}

/* ---- vocabulary ----------------------------------------------------------------------------- */

struct mxl_grammar_vocab {
    int32_t n;
    char *bytes;       /* all token texts back to back */
    size_t *boff;      /* [n + 1] */
    uint32_t *cps;     /* each token's code points decoded from a clean state, 0-terminated */
    size_t *coff;      /* [n] */
    partial *end;      /* [n] open sequence left by the token from a clean state */
    uint8_t *flags;    /* [n] bit 0: end of generation, bit 1: never allowed (empty / NUL first) */
};

mxl_status mxl_grammar_vocab_create(int32_t n_vocab, mxl_grammar_piece_fn piece, void *ctx, mxl_grammar_vocab **out,
                                    mxl_error *err) {
    *out = NULL;
    if (n_vocab <= 0) return mxl_error_set(err, MXL_ERR_ARG, "grammar: empty vocabulary");
    mxl_grammar_vocab *v = mxl_calloc(1, sizeof *v);
    if (!v) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    size_t nv = (size_t)n_vocab;
    v->n = n_vocab;
    v->boff = mxl_malloc((nv + 1) * sizeof *v->boff);
    v->coff = mxl_malloc(nv * sizeof *v->coff);
    v->end = mxl_malloc(nv * sizeof *v->end);
    v->flags = mxl_calloc(nv, 1);
    size_t cap_b = nv * 4 + 16, cap_c = nv * 4 + 16, nb = 0, nc = 0;
    v->bytes = mxl_malloc(cap_b);
    v->cps = mxl_malloc(cap_c * sizeof *v->cps);
    mxl_status st = MXL_OK;
    if (!v->boff || !v->coff || !v->end || !v->flags || !v->bytes || !v->cps) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    for (int32_t id = 0; id < n_vocab && !st; id++) {
        const char *t = NULL;
        size_t len = 0;
        bool eog = false;
        if ((st = piece(ctx, id, &t, &len, &eog, err))) break;
        if (!t) len = 0;
        if (nb + len > cap_b) {
            while (nb + len > cap_b) cap_b *= 2;
            char *p = mxl_realloc(v->bytes, cap_b);
            if (!p) {
                st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
                break;
            }
            v->bytes = p;
        }
        if (nc + len + 2 > cap_c) {
            while (nc + len + 2 > cap_c) cap_c *= 2;
            uint32_t *p = mxl_realloc(v->cps, cap_c * sizeof *p);
            if (!p) {
                st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
                break;
            }
            v->cps = p;
        }
        v->boff[id] = nb;
        if (len) memcpy(v->bytes + nb, t, len);
        nb += len;
        size_t n;
        v->coff[id] = nc;
        v->end[id] = decode_utf8((const unsigned char *)t, len, (partial){0, 0}, v->cps + nc, &n);
        nc += n + 1;
        v->flags[id] = (uint8_t)((eog ? 1 : 0) | (len == 0 || t[0] == 0 ? 2 : 0));
    }
    if (!st) v->boff[nv] = nb;
    if (st) {
        mxl_grammar_vocab_destroy(v);
        return st;
    }
    *out = v;
    return MXL_OK;
}

void mxl_grammar_vocab_destroy(mxl_grammar_vocab *v) {
    if (!v) return;
    mxl_free(v->bytes);
    mxl_free(v->boff);
    mxl_free(v->cps);
    mxl_free(v->coff);
    mxl_free(v->end);
    mxl_free(v->flags);
    mxl_free(v);
}

int32_t mxl_grammar_vocab_size(const mxl_grammar_vocab *v) { return v->n; }

/* ---- candidate rejection (llama_grammar_reject_candidates) ----------------------------------- */

static size_t reject_all(const mxl_grammar *g, const gstacks *stacks, const gcand *cands, size_t n, gcand *out, garena *a);

/* The candidates one stack cannot take, written to out (room for n); returns their count. */
static size_t reject_for_stack(const mxl_grammar *g, const uint32_t *stk, size_t len, const gcand *cands, size_t n, gcand *out,
                               garena *a) {
    size_t nr = 0;
    if (len == 0) { /* the sentence is complete here: only tokens with nothing left fit */
        for (size_t i = 0; i < n; i++)
            if (cands[i].cp[0] != 0 || cands[i].pu.n_remain != 0) out[nr++] = cands[i];
        return nr;
    }
    uint32_t top = stk[len - 1], after;
    gmark m = ga_mark(a);
    gcand *next = ga_alloc(a, n);
    if (!next) return 0;
    size_t nn = 0;
    for (size_t i = 0; i < n; i++) {
        const gcand *c = &cands[i];
        if (c->cp[0] == 0) {
            if (c->pu.n_remain != 0 && !match_partial(g->el, top, c->pu)) out[nr++] = *c;
        } else if (match_char(g->el, top, c->cp[0], &after)) {
            next[nn++] = (gcand){c->idx, c->cp + 1, c->pu};
        } else {
            out[nr++] = *c;
        }
    }
    if (nn) {
        match_char(g->el, top, 0, &after);
        gstacks adv = {0}, todo = {0}, seen = {0};
        advance(g, stk, len - 1, gr_is_end_of_seq(&g->el[after]) ? UINT32_MAX : after, &adv, &todo, &seen);
        gs_free(&todo);
        gs_free(&seen);
        gcand *nrej = adv.oom ? NULL : ga_alloc(a, nn);
        if (!nrej) a->oom = true;
        else {
            size_t k = reject_all(g, &adv, next, nn, nrej, a);
            for (size_t i = 0; i < k; i++) out[nr++] = (gcand){nrej[i].idx, nrej[i].cp - 1, nrej[i].pu};
        }
        gs_free(&adv);
    }
    ga_restore(a, m);
    return nr;
}

/* Candidates no stack can take, written to out (room for n); returns their count. */
static size_t reject_all(const mxl_grammar *g, const gstacks *stacks, const gcand *cands, size_t n, gcand *out, garena *a) {
    if (n == 0) return 0;
    if (stacks->n == 0) {
        memcpy(out, cands, n * sizeof *cands);
        return n;
    }
    gmark m = ga_mark(a);
    gcand *cur = ga_alloc(a, n);
    if (!cur) return 0;
    size_t nc = reject_for_stack(g, stacks->data + stacks->off[0], stacks->len[0], cands, n, cur, a);
    for (size_t s = 1; s < stacks->n && nc && !a->oom; s++) {
        gcand *nxt = ga_alloc(a, nc);
        if (!nxt) break;
        nc = reject_for_stack(g, stacks->data + stacks->off[s], stacks->len[s], cur, nc, nxt, a);
        cur = nxt;
    }
    memcpy(out, cur, nc * sizeof *cur);
    ga_restore(a, m);
    return nc;
}

/* Code points of token id continuing the state's open sequence: the vocabulary's cached decode
 * when nothing is open, else a fresh decode into buf (capacity len + 2). */
static const uint32_t *token_cps(const mxl_grammar_state *st, const mxl_grammar_vocab *v, int32_t id, uint32_t *buf,
                                 partial *pu) {
    if (st->pu.n_remain == 0) {
        *pu = v->end[id];
        return v->cps + v->coff[id];
    }
    size_t n;
    *pu = decode_utf8((const unsigned char *)v->bytes + v->boff[id], v->boff[id + 1] - v->boff[id], st->pu, buf, &n);
    return buf;
}

mxl_status mxl_grammar_state_mask(mxl_grammar_state *st, const mxl_grammar_vocab *v, float *logits, const int32_t *ids,
                                  size_t n, size_t *n_allowed, mxl_error *err) {
    if (!ids && n > (size_t)v->n) n = (size_t)v->n;
    bool can_end = mxl_grammar_state_can_end(st);
    garena *a = &st->arena;
    a->oom = false;
    gmark m = ga_mark(a);
    gcand *cands = ga_alloc(a, n), *rej = ga_alloc(a, n);
    uint32_t *buf = NULL;
    size_t buf_len = 0;
    if (!cands || !rej) {
        ga_restore(a, m);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    if (st->pu.n_remain != 0) { /* fresh decodes need room: one buffer for all candidates */
        for (size_t i = 0; i < n; i++) {
            int32_t id = ids ? ids[i] : (int32_t)i;
            if (id >= 0 && id < v->n) buf_len += v->boff[id + 1] - v->boff[id] + 2;
        }
        if (!(buf = mxl_malloc((buf_len ? buf_len : 1) * sizeof *buf))) {
            ga_restore(a, m);
            return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        }
    }
    size_t nc = 0, used = 0, allowed = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids ? ids[i] : (int32_t)i;
        if (id < 0 || id >= v->n) continue;
        if (logits[id] == -INFINITY) continue;
        if (v->flags[id] & 1) { /* end of generation */
            if (can_end) allowed++;
            else logits[id] = -INFINITY;
            continue;
        }
        if (v->flags[id] & 2) {
            logits[id] = -INFINITY;
            continue;
        }
        partial pu;
        const uint32_t *cp = token_cps(st, v, id, buf ? buf + used : NULL, &pu);
        if (buf) used += v->boff[id + 1] - v->boff[id] + 2;
        cands[nc++] = (gcand){(uint32_t)id, cp, pu};
    }
    size_t nr = reject_all(st->g, &st->cur, cands, nc, rej, a);
    bool ok = !a->oom;
    if (ok) {
        for (size_t i = 0; i < nr; i++) logits[rej[i].idx] = -INFINITY;
        allowed += nc - nr;
    }
    ga_restore(a, m);
    mxl_free(buf);
    if (!ok) return mxl_error_set(err, MXL_ERR_NOMEM, "grammar: out of memory while masking tokens");
    if (n_allowed) *n_allowed = allowed;
    return MXL_OK;
}

bool mxl_grammar_state_allows(mxl_grammar_state *st, const mxl_grammar_vocab *v, int32_t id) {
    if (id < 0 || id >= v->n) return false;
    if (v->flags[id] & 1) return mxl_grammar_state_can_end(st);
    if (v->flags[id] & 2) return false;
    size_t len = v->boff[id + 1] - v->boff[id];
    uint32_t *buf = NULL;
    if (st->pu.n_remain != 0 && !(buf = mxl_malloc((len + 2) * sizeof *buf))) return false;
    partial pu;
    const uint32_t *cp = token_cps(st, v, id, buf, &pu);
    gcand c = {(uint32_t)id, cp, pu}, rej;
    st->arena.oom = false;
    size_t nr = reject_all(st->g, &st->cur, &c, 1, &rej, &st->arena);
    bool allowed = !st->arena.oom && nr == 0;
    mxl_free(buf);
    return allowed;
}

mxl_status mxl_grammar_state_accept_token(mxl_grammar_state *st, const mxl_grammar_vocab *v, int32_t id, mxl_error *err) {
    if (id < 0 || id >= v->n) return mxl_error_set(err, MXL_ERR_ARG, "grammar: token %d is outside the vocabulary", id);
    if (v->flags[id] & 1) {
        if (mxl_grammar_state_can_end(st)) return MXL_OK;
        return mxl_error_set(err, MXL_ERR_ARG, "grammar: end of generation (token %d) before the grammar is complete", id);
    }
    if ((v->flags[id] & 2) || !mxl_grammar_state_accept_bytes(st, v->bytes + v->boff[id], v->boff[id + 1] - v->boff[id]))
        return mxl_error_set(err, MXL_ERR_ARG, "grammar: token %d does not fit the grammar here", id);
    return MXL_OK;
}
