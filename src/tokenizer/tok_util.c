/* tok_util.c - the tokenizer's small building blocks: growable id vectors, UTF-8 handling (lossy
 * decoding exactly like Rust's String::from_utf8_lossy), Unicode predicates matching Rust's char
 * methods, the GPT-2 byte<->char table, and open-addressing hash maps for the vocabulary and the
 * BPE merges. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/alloc.h"
#include "tokenizer/tok_internal.h"

/* ---- id vectors (text buffers are core/strbuf.h's) ---- */

bool tok_ids_push(mxl_token_ids *v, int32_t id) { return tok_ids_append(v, &id, 1); }

bool tok_ids_append(mxl_token_ids *v, const int32_t *ids, size_t n) {
    if (v->n + n > v->cap) {
        size_t cap = v->cap ? v->cap : 16;
        while (cap < v->n + n) {
            if (cap > SIZE_MAX / 8) return false;
            cap *= 2;
        }
        int32_t *p = mxl_realloc(v->ids, cap * sizeof(int32_t));
        if (!p) return false;
        v->ids = p;
        v->cap = cap;
    }
    if (n) memcpy(v->ids + v->n, ids, n * sizeof(int32_t));
    v->n += n;
    return true;
}

void mxl_token_ids_free(mxl_token_ids *v) {
    if (!v) return;
    mxl_free(v->ids);
    v->ids = NULL;
    v->n = v->cap = 0;
}

/* ---- UTF-8 ---- */
size_t tok_utf8_decode(const char *s, size_t n, uint32_t *cp) {
    const uint8_t *u = (const uint8_t *)s;
    size_t k = tok_utf8_len(u[0]);
    if (k > n) k = 1;
    switch (k) {
    case 1: *cp = u[0]; break;
    case 2: *cp = ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F); break;
    case 3: *cp = ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F); break;
    default:
        *cp = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
              ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
        break;
    }
    return k;
}

/* Length of the valid prefix of a sequence starting at s[0]: returns the full length when the
 * sequence is valid, else 0 with *consumed = bytes forming the maximal invalid subpart. */
static size_t utf8_valid_seq(const uint8_t *s, size_t n, size_t *consumed) {
    uint8_t c = s[0];
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) { need = 2; lo = 0xA0; }
    else if (c >= 0xE1 && c <= 0xEC) need = 2;
    else if (c == 0xED) { need = 2; hi = 0x9F; }
    else if (c >= 0xEE && c <= 0xEF) need = 2;
    else if (c == 0xF0) { need = 3; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else if (c == 0xF4) { need = 3; hi = 0x8F; }
    else {
        *consumed = 1;
        return 0;
    }
    size_t i = 1;
    for (; i <= need; i++) {
        if (i >= n) break;
        uint8_t b = s[i];
        uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (b < l || b > h) break;
    }
    if (i == need + 1) return need + 1;
    *consumed = i;
    return 0;
}

bool tok_utf8_valid(const char *s, size_t n) {
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        size_t used = 0, k = utf8_valid_seq(u + i, n - i, &used);
        if (!k) return false;
        i += k;
    }
    return true;
}

bool tok_utf8_lossy(const char *s, size_t n, mxl_strbuf *out) {
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0, run = 0;
    if (!mxl_strbuf_reserve(out, n)) return false;
    while (i < n) {
        size_t used = 0, k = u[i] < 0x80 ? 1 : utf8_valid_seq(u + i, n - i, &used);
        if (k) {
            i += k;
            continue;
        }
        if (!mxl_strbuf_append(out, s + run, i - run)) return false;
        if (!mxl_strbuf_append(out, "\xEF\xBF\xBD", 3)) return false;
        i += used;
        run = i;
    }
    return mxl_strbuf_append(out, s + run, n - run);
}

ptrdiff_t tok_utf8proc_map(const char *s, size_t n, int opts, char **out) {
    /* utf8proc_map_custom's two passes: count the code points, decompose into an int32 buffer,
     * re-encode it in place (UTF-8 never takes more than the 4 bytes of each code point). */
    *out = NULL;
    utf8proc_option_t o = (utf8proc_option_t)opts;
    utf8proc_ssize_t r = utf8proc_decompose((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, NULL, 0, o);
    if (r < 0) return r;
    if ((size_t)r > (SIZE_MAX - 4) / sizeof(utf8proc_int32_t)) return UTF8PROC_ERROR_OVERFLOW;
    utf8proc_int32_t *buf = mxl_malloc(((size_t)r + 1) * sizeof(utf8proc_int32_t));
    if (!buf) return UTF8PROC_ERROR_NOMEM;
    utf8proc_ssize_t r2 = utf8proc_decompose((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, buf, r, o);
    if (r2 >= 0 && r2 <= r) r2 = utf8proc_reencode(buf, r2, o);
    else if (r2 >= 0) r2 = UTF8PROC_ERROR_OVERFLOW;
    if (r2 < 0) {
        mxl_free(buf);
        return r2;
    }
    *out = (char *)buf;
    return r2;
}

/* ---- Unicode predicates ---- */
bool tok_cp_is_whitespace(uint32_t cp) {
    switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

static utf8proc_category_t cat(uint32_t cp) {
    return utf8proc_category((utf8proc_int32_t)cp);
}

bool tok_cp_is_alnum(uint32_t cp) {
    utf8proc_category_t c = cat(cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
           (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO);
}

bool tok_cp_is_punct(uint32_t cp) {
    utf8proc_category_t c = cat(cp);
    return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

bool tok_cp_is_bert_punct(uint32_t cp) {
    if (cp < 0x80) {
        return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
               (cp >= 123 && cp <= 126);
    }
    return tok_cp_is_punct(cp);
}

bool tok_cp_is_other(uint32_t cp) {
    utf8proc_category_t c = cat(cp);
    return c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CS ||
           c == UTF8PROC_CATEGORY_CO || c == UTF8PROC_CATEGORY_CN;
}

bool tok_cp_is_mn(uint32_t cp) { return cat(cp) == UTF8PROC_CATEGORY_MN; }

bool tok_cp_is_digit(uint32_t cp) {
    utf8proc_category_t c = cat(cp);
    return c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO;
}

bool tok_cp_is_chinese(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* ---- GPT-2 bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
 * U+0100.. in byte order. ---- */
const uint16_t tok_byte_to_cp[256] = {
    256, 257, 258, 259, 260, 261, 262, 263, 264, 265, 266, 267, 268, 269, 270, 271,
    272, 273, 274, 275, 276, 277, 278, 279, 280, 281, 282, 283, 284, 285, 286, 287,
    288, 33,  34,  35,  36,  37,  38,  39,  40,  41,  42,  43,  44,  45,  46,  47,
    48,  49,  50,  51,  52,  53,  54,  55,  56,  57,  58,  59,  60,  61,  62,  63,
    64,  65,  66,  67,  68,  69,  70,  71,  72,  73,  74,  75,  76,  77,  78,  79,
    80,  81,  82,  83,  84,  85,  86,  87,  88,  89,  90,  91,  92,  93,  94,  95,
    96,  97,  98,  99,  100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111,
    112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 289,
    290, 291, 292, 293, 294, 295, 296, 297, 298, 299, 300, 301, 302, 303, 304, 305,
    306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319, 320, 321,
    322, 161, 162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172, 323, 174, 175,
    176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191,
    192, 193, 194, 195, 196, 197, 198, 199, 200, 201, 202, 203, 204, 205, 206, 207,
    208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219, 220, 221, 222, 223,
    224, 225, 226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238, 239,
    240, 241, 242, 243, 244, 245, 246, 247, 248, 249, 250, 251, 252, 253, 254, 255,
};

int tok_cp_to_byte(uint32_t cp) {
    /* the 68 remapped bytes in increasing order: 0..32 -> U+0100..U+0120, 127..160 ->
     * U+0121..U+0142, 173 -> U+0143 */
    if (cp >= 256 && cp <= 323) {
        uint32_t k = cp - 256;
        return (int)(k <= 32 ? k : k <= 66 ? k + 94 : 173);
    }
    if (cp < 256 && tok_byte_to_cp[cp] == cp) return (int)cp;
    return -1;
}

/* ---- string map ---- */
uint32_t tok_hash(const char *s, size_t n) {
    /* FNV-1a, then a finalizer to spread low bits. */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 16777619u;
    }
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    return h;
}

static bool map_rehash(tok_map *m, size_t ns) {
    uint32_t *slots = mxl_calloc(ns, sizeof(uint32_t));
    if (!slots) return false;
    for (size_t i = 0; i < m->n_ents; i++) {
        size_t j = m->ents[i].hash & (ns - 1);
        while (slots[j]) j = (j + 1) & (ns - 1);
        slots[j] = (uint32_t)(i + 1);
    }
    mxl_free(m->slots);
    m->slots = slots;
    m->n_slots = ns;
    return true;
}

static bool map_grow(tok_map *m) { return map_rehash(m, m->n_slots ? m->n_slots * 2 : 1024); }

bool tok_map_reserve(tok_map *m, size_t n) {
    if (n > (SIZE_MAX / 4) / sizeof(tok_map_entry)) return false;
    size_t ns = m->n_slots ? m->n_slots : 1024;
    while (ns < 2 * n) ns *= 2;
    if (ns != m->n_slots && !map_rehash(m, ns)) return false;
    if (n > m->cap_ents) {
        tok_map_entry *e = mxl_realloc(m->ents, n * sizeof(*e));
        if (!e) return false;
        m->ents = e;
        m->cap_ents = n;
    }
    return true;
}

int32_t tok_map_get(const tok_map *m, const char *s, size_t n) {
    if (!m->n_slots) return -1;
    uint32_t h = tok_hash(s, n);
    size_t j = h & (m->n_slots - 1);
    while (m->slots[j]) {
        const tok_map_entry *e = &m->ents[m->slots[j] - 1];
        if (e->hash == h && e->len == n && memcmp(m->pool.p + e->off, s, n) == 0) return e->id;
        j = (j + 1) & (m->n_slots - 1);
    }
    return -1;
}

void tok_map_get_many(const tok_map *m, const char *const *keys, const size_t *lens, size_t n, int32_t *ids) {
    /* Three passes so the cache misses of different keys overlap: hash and prefetch each key's
     * first slot, then prefetch the entry it names, then probe as tok_map_get does. */
    uint32_t h[TOK_MAP_BATCH];
    for (size_t base = 0; base < n; base += TOK_MAP_BATCH) {
        size_t k = n - base < TOK_MAP_BATCH ? n - base : TOK_MAP_BATCH;
        if (!m->n_slots) {
            for (size_t i = 0; i < k; i++) ids[base + i] = -1;
            continue;
        }
        for (size_t i = 0; i < k; i++) {
            h[i] = tok_hash(keys[base + i], lens[base + i]);
            __builtin_prefetch(&m->slots[h[i] & (m->n_slots - 1)]);
        }
        for (size_t i = 0; i < k; i++) {
            uint32_t e = m->slots[h[i] & (m->n_slots - 1)];
            if (e) __builtin_prefetch(&m->ents[e - 1]);
        }
        for (size_t i = 0; i < k; i++) {
            const char *key = keys[base + i];
            size_t len = lens[base + i], j = h[i] & (m->n_slots - 1);
            ids[base + i] = -1;
            while (m->slots[j]) {
                const tok_map_entry *e = &m->ents[m->slots[j] - 1];
                if (e->hash == h[i] && e->len == len && memcmp(m->pool.p + e->off, key, len) == 0) {
                    ids[base + i] = e->id;
                    break;
                }
                j = (j + 1) & (m->n_slots - 1);
            }
        }
    }
}

void tok_map_prefetch(const tok_map *m, const char *s, size_t n) {
    if (m->n_slots) __builtin_prefetch(&m->slots[tok_hash(s, n) & (m->n_slots - 1)]);
}

bool tok_map_put(tok_map *m, const char *s, size_t n, int32_t id, bool *dup) {
    if (dup) *dup = false;
    if (n > UINT32_MAX || m->pool.n > UINT32_MAX - n - 1) return false;
    if ((m->n_ents + 1) * 2 > m->n_slots && !map_grow(m)) return false;
    uint32_t h = tok_hash(s, n);
    size_t j = h & (m->n_slots - 1);
    while (m->slots[j]) {
        const tok_map_entry *e = &m->ents[m->slots[j] - 1];
        if (e->hash == h && e->len == n && memcmp(m->pool.p + e->off, s, n) == 0) {
            if (dup) *dup = true;
            return true;
        }
        j = (j + 1) & (m->n_slots - 1);
    }
    if (m->n_ents == m->cap_ents) {
        size_t cap = m->cap_ents ? m->cap_ents * 2 : 1024;
        tok_map_entry *e = mxl_realloc(m->ents, cap * sizeof(*e));
        if (!e) return false;
        m->ents = e;
        m->cap_ents = cap;
    }
    size_t off = m->pool.n;
    if (!mxl_strbuf_append(&m->pool, s, n) || !mxl_strbuf_putc(&m->pool, 0)) return false;
    m->ents[m->n_ents] = (tok_map_entry){(uint32_t)off, (uint32_t)n, id, h};
    m->slots[j] = (uint32_t)(++m->n_ents);
    return true;
}

uint32_t tok_map_index(const tok_map *m, const char *s, size_t n) {
    if (!m->n_slots) return 0;
    uint32_t h = tok_hash(s, n);
    size_t j = h & (m->n_slots - 1);
    while (m->slots[j]) {
        const tok_map_entry *e = &m->ents[m->slots[j] - 1];
        if (e->hash == h && e->len == n && memcmp(m->pool.p + e->off, s, n) == 0) return m->slots[j];
        j = (j + 1) & (m->n_slots - 1);
    }
    return 0;
}

bool tok_map_update(tok_map *m, const char *s, size_t n, int32_t id) {
    if (!m->n_slots) return false;
    uint32_t h = tok_hash(s, n);
    size_t j = h & (m->n_slots - 1);
    while (m->slots[j]) {
        tok_map_entry *e = &m->ents[m->slots[j] - 1];
        if (e->hash == h && e->len == n && memcmp(m->pool.p + e->off, s, n) == 0) {
            e->id = id;
            return true;
        }
        j = (j + 1) & (m->n_slots - 1);
    }
    return false;
}

void tok_map_free(tok_map *m) {
    mxl_strbuf_free(&m->pool);
    mxl_free(m->ents);
    mxl_free(m->slots);
    memset(m, 0, sizeof(*m));
}

/* ---- pair map ---- */
static inline uint64_t pair_key(int32_t a, int32_t b) {
    return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}
static inline size_t pair_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return (size_t)k;
}

static bool pairmap_rehash(tok_pairmap *m, size_t ns) {
    tok_pair_slot *s = mxl_malloc(ns * sizeof(*s));
    if (!s) return false;
    for (size_t i = 0; i < ns; i++) s[i].rank = UINT32_MAX;
    for (size_t i = 0; i < m->n_slots; i++) {
        if (m->slots[i].rank == UINT32_MAX) continue;
        size_t j = pair_hash(m->slots[i].key) & (ns - 1);
        while (s[j].rank != UINT32_MAX) j = (j + 1) & (ns - 1);
        s[j] = m->slots[i];
    }
    mxl_free(m->slots);
    m->slots = s;
    m->n_slots = ns;
    return true;
}

static bool pairmap_grow(tok_pairmap *m) { return pairmap_rehash(m, m->n_slots ? m->n_slots * 2 : 1024); }

bool tok_pairmap_reserve(tok_pairmap *m, size_t n) {
    if (n > (SIZE_MAX / 4) / sizeof(tok_pair_slot)) return false;
    size_t ns = m->n_slots ? m->n_slots : 1024;
    while (ns * 3 < 4 * n) ns *= 2;
    return ns == m->n_slots || pairmap_rehash(m, ns);
}

bool tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t new_id) {
    /* load factor up to 3/4: the table of a 500k-merge vocabulary stays at 16 MB, which matters
     * more for the cache-missing lookups of the merge loop than the slightly longer probes */
    if ((m->n + 1) * 4 > m->n_slots * 3 && !pairmap_grow(m)) return false;
    uint64_t k = pair_key(a, b);
    size_t j = pair_hash(k) & (m->n_slots - 1);
    while (m->slots[j].rank != UINT32_MAX) {
        if (m->slots[j].key == k) return true; /* first (lowest) rank wins, like HF's map build */
        j = (j + 1) & (m->n_slots - 1);
    }
    m->slots[j] = (tok_pair_slot){k, rank, new_id};
    m->n++;
    return true;
}

void tok_pairmap_prefetch(const tok_pairmap *m, int32_t a, int32_t b) {
    if (m->n_slots) __builtin_prefetch(&m->slots[pair_hash(pair_key(a, b)) & (m->n_slots - 1)], 1);
}

bool tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, uint32_t *rank, int32_t *new_id) {
    if (!m->n_slots) return false;
    uint64_t k = pair_key(a, b);
    size_t j = pair_hash(k) & (m->n_slots - 1);
    while (m->slots[j].rank != UINT32_MAX) {
        if (m->slots[j].key == k) {
            *rank = m->slots[j].rank;
            *new_id = m->slots[j].new_id;
            return true;
        }
        j = (j + 1) & (m->n_slots - 1);
    }
    return false;
}

void tok_pairmap_free(tok_pairmap *m) {
    mxl_free(m->slots);
    memset(m, 0, sizeof(*m));
}

/* ---- pieces ---- */
bool tok_pieces_add(tok_pieces *p, const char *s, size_t n, int32_t token, bool at_start) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        tok_piece *v = mxl_realloc(p->v, cap * sizeof(*v));
        if (!v) return false;
        p->v = v;
        p->cap = cap;
    }
    size_t off = p->text.n;
    if (!mxl_strbuf_append(&p->text, s, n)) return false;
    p->v[p->n++] = (tok_piece){off, n, token, at_start};
    return true;
}

void tok_pieces_reset(tok_pieces *p) {
    p->n = 0;
    p->text.n = 0;
}

void tok_pieces_free(tok_pieces *p) {
    mxl_strbuf_free(&p->text);
    mxl_free(p->v);
    memset(p, 0, sizeof(*p));
}

void tok_spans_free(tok_spans *s) {
    mxl_free(s->v);
    memset(s, 0, sizeof(*s));
}

/* ---- string lists ---- */
bool tok_strs_push(tok_strs *s, const char *p, size_t n) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        mxl_strbuf *v = mxl_realloc(s->v, cap * sizeof(*v));
        if (!v) return false;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n] = (mxl_strbuf){0};
    if (!mxl_strbuf_append(&s->v[s->n], p, n)) {
        mxl_strbuf_free(&s->v[s->n]);
        return false;
    }
    s->n++;
    return true;
}

void tok_strs_free(tok_strs *s) {
    for (size_t i = 0; i < s->n; i++) mxl_strbuf_free(&s->v[i]);
    mxl_free(s->v);
    memset(s, 0, sizeof(*s));
}
