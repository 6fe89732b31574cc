/* gguf.c - GGUF v2/v3 reader: header, metadata, tensor infos, validation (see gguf.h).
 *
 * Parsing is a single forward pass over the bytes with a bounds-checked cursor. Every count read
 * from the file is compared with the bytes that remain (count x smallest possible element size)
 * before any table is allocated, so a hostile count (2^60) fails at once instead of allocating.
 * Tables (kv entries, tensor infos, split string arrays, nested arrays, hash indices) live in one
 * arena owned by the mxl_gguf. */
#include "io/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/arena.h"
#include "io/mapped_file.h"

struct mxl_gguf {
    mxl_arena arena;
    mxl_mapped_file file; /* zeroed when opened from a buffer */
    char *name;           /* label for messages (arena) */
    const uint8_t *data;
    uint64_t size;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;
    uint64_t n_kv;
    mxl_gguf_kv *kvs;
    uint64_t n_tensors;
    mxl_gguf_tensor_info *tensors;
    uint64_t tensor_bytes_total;
    /* open-addressing hash tables of indices + 1 (0 = empty); sizes are powers of two */
    uint32_t *kv_hash;
    uint64_t kv_hash_cap;
    uint32_t *tensor_hash;
    uint64_t tensor_hash_cap;
};

/* ---- type tables -------------------------------------------------------------------------- */

static const char *const k_value_type_names[MXL_GGUF_TYPE_COUNT] = {
    "UINT8", "INT8",  "UINT16", "INT16", "UINT32", "INT32",   "FLOAT32",
    "BOOL",  "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64",
};

/* Byte size of fixed-size value types; 0 for STRING/ARRAY. */
static const uint8_t k_value_type_size[MXL_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

typedef struct ggml_type_entry {
    const char *name;
    uint32_t block_elems; /* 0 = retired id (no known layout) */
    uint32_t block_bytes;
    mxl_dtype dtype; /* MXL_DTYPE_INVALID = we do not load it */
} ggml_type_entry;

/* ggml.h numbering; block sizes from ggml-common.h (sizeof(block_*)) / ggml.c type traits. */
static const ggml_type_entry k_ggml_types[] = {
    [0] = {"F32", 1, 4, MXL_DTYPE_F32},
    [1] = {"F16", 1, 2, MXL_DTYPE_F16},
    [2] = {"Q4_0", 32, 18, MXL_DTYPE_Q4_0},
    [3] = {"Q4_1", 32, 20, MXL_DTYPE_Q4_1},
    [4] = {"Q4_2", 0, 0, MXL_DTYPE_INVALID}, /* retired */
    [5] = {"Q4_3", 0, 0, MXL_DTYPE_INVALID}, /* retired */
    [6] = {"Q5_0", 32, 22, MXL_DTYPE_Q5_0},
    [7] = {"Q5_1", 32, 24, MXL_DTYPE_Q5_1},
    [8] = {"Q8_0", 32, 34, MXL_DTYPE_Q8_0},
    [9] = {"Q8_1", 32, 36, MXL_DTYPE_INVALID},
    [10] = {"Q2_K", 256, 84, MXL_DTYPE_Q2_K},
    [11] = {"Q3_K", 256, 110, MXL_DTYPE_Q3_K},
    [12] = {"Q4_K", 256, 144, MXL_DTYPE_Q4_K},
    [13] = {"Q5_K", 256, 176, MXL_DTYPE_Q5_K},
    [14] = {"Q6_K", 256, 210, MXL_DTYPE_Q6_K},
    [15] = {"Q8_K", 256, 292, MXL_DTYPE_INVALID},
    [16] = {"IQ2_XXS", 256, 66, MXL_DTYPE_IQ2_XXS},
    [17] = {"IQ2_XS", 256, 74, MXL_DTYPE_IQ2_XS},
    [18] = {"IQ3_XXS", 256, 98, MXL_DTYPE_IQ3_XXS},
    [19] = {"IQ1_S", 256, 50, MXL_DTYPE_IQ1_S},
    [20] = {"IQ4_NL", 32, 18, MXL_DTYPE_IQ4_NL},
    [21] = {"IQ3_S", 256, 110, MXL_DTYPE_IQ3_S},
    [22] = {"IQ2_S", 256, 82, MXL_DTYPE_IQ2_S},
    [23] = {"IQ4_XS", 256, 136, MXL_DTYPE_IQ4_XS},
    [24] = {"I8", 1, 1, MXL_DTYPE_I8},
    [25] = {"I16", 1, 2, MXL_DTYPE_I16},
    [26] = {"I32", 1, 4, MXL_DTYPE_I32},
    [27] = {"I64", 1, 8, MXL_DTYPE_I64},
    [28] = {"F64", 1, 8, MXL_DTYPE_F64},
    [29] = {"IQ1_M", 256, 56, MXL_DTYPE_IQ1_M},
    [30] = {"BF16", 1, 2, MXL_DTYPE_BF16},
    [31] = {"Q4_0_4_4", 0, 0, MXL_DTYPE_INVALID}, /* retired (repacked at load by ggml now) */
    [32] = {"Q4_0_4_8", 0, 0, MXL_DTYPE_INVALID},
    [33] = {"Q4_0_8_8", 0, 0, MXL_DTYPE_INVALID},
    [34] = {"TQ1_0", 256, 54, MXL_DTYPE_TQ1_0},
    [35] = {"TQ2_0", 256, 66, MXL_DTYPE_TQ2_0},
    [36] = {"IQ4_NL_4_4", 0, 0, MXL_DTYPE_INVALID}, /* retired */
    [37] = {"IQ4_NL_4_8", 0, 0, MXL_DTYPE_INVALID},
    [38] = {"IQ4_NL_8_8", 0, 0, MXL_DTYPE_INVALID},
    [39] = {"MXFP4", 32, 17, MXL_DTYPE_MXFP4},
    [40] = {"NVFP4", 64, 36, MXL_DTYPE_INVALID},
    [41] = {"Q1_0", 128, 18, MXL_DTYPE_INVALID},
};
#define N_GGML_TYPES (sizeof k_ggml_types / sizeof k_ggml_types[0])

const char *mxl_gguf_type_name(uint32_t type) {
    return type < MXL_GGUF_TYPE_COUNT ? k_value_type_names[type] : "?";
}

const char *mxl_ggml_type_name(uint32_t ggml_type) {
    return ggml_type < N_GGML_TYPES ? k_ggml_types[ggml_type].name : NULL;
}

mxl_dtype mxl_ggml_type_to_dtype(uint32_t ggml_type) {
    return ggml_type < N_GGML_TYPES ? k_ggml_types[ggml_type].dtype : MXL_DTYPE_INVALID;
}

bool mxl_ggml_type_block(uint32_t ggml_type, uint32_t *block_elems, uint32_t *block_bytes) {
    if (ggml_type >= N_GGML_TYPES || k_ggml_types[ggml_type].block_elems == 0) return false;
    if (block_elems) *block_elems = k_ggml_types[ggml_type].block_elems;
    if (block_bytes) *block_bytes = k_ggml_types[ggml_type].block_bytes;
    return true;
}

/* ---- messages ----------------------------------------------------------------------------- */

/* Formats an untrusted name for a one-line message: printable ASCII kept, everything else as
 * \xHH, truncated with "..." to fit. */
static const char *safe_name(const char *s, uint64_t len, char *buf, size_t cap) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (uint64_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        size_t need = (c >= 0x20 && c < 0x7f) ? 1 : 4;
        if (o + need + 4 > cap) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (need == 1) {
            buf[o++] = (char)c;
        } else {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 15];
        }
    }
    buf[o] = '\0';
    return buf;
}

#define NAME_BUF 96

/* ---- cursor ------------------------------------------------------------------------------- */

typedef struct cursor {
    const uint8_t *p;
    uint64_t size;
    uint64_t pos;
} cursor;

static uint64_t remaining(const cursor *c) { return c->size - c->pos; }

static uint64_t load_le(const uint8_t *p, unsigned n) {
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static bool read_uint(cursor *c, unsigned n, uint64_t *out) {
    if (remaining(c) < n) return false;
    *out = load_le(c->p + c->pos, n);
    c->pos += n;
    return true;
}

static bool read_u32(cursor *c, uint32_t *out) {
    uint64_t v;
    if (!read_uint(c, 4, &v)) return false;
    *out = (uint32_t)v;
    return true;
}

static bool read_u64(cursor *c, uint64_t *out) { return read_uint(c, 8, out); }

/* ---- parsing ------------------------------------------------------------------------------ */

typedef struct parser {
    mxl_gguf *g;
    cursor c;
    mxl_error *err;
    /* the key whose value is being parsed, for messages */
    const char *key;
    uint64_t key_len;
} parser;

static mxl_status fail_key(parser *ps, mxl_status st, const char *what) {
    char nb[NAME_BUF];
    return mxl_error_set(ps->err, st, "%s: metadata key '%s': %s", ps->g->name,
                         safe_name(ps->key, ps->key_len, nb, sizeof nb), what);
}

static mxl_status truncated_key(parser *ps) {
    char nb[NAME_BUF];
    return mxl_error_set(ps->err, MXL_ERR_FORMAT,
                         "%s: truncated in the value of metadata key '%s' (offset %llu)",
                         ps->g->name, safe_name(ps->key, ps->key_len, nb, sizeof nb),
                         (unsigned long long)ps->c.pos);
}

/* Reads a u64 length + bytes; the length must fit in what remains. */
static bool read_str(cursor *c, mxl_gguf_str *out) {
    uint64_t len;
    uint64_t save = c->pos;
    if (!read_u64(c, &len)) return false;
    if (len > remaining(c)) {
        c->pos = save;
        return false;
    }
    out->data = (const char *)(c->p + c->pos);
    out->len = len;
    c->pos += len;
    return true;
}

/* Smallest number of bytes one element of this type can occupy in the file. */
static uint64_t min_elem_bytes(uint32_t type) {
    if (type == MXL_GGUF_TYPE_STRING) return 8;      /* u64 length */
    if (type == MXL_GGUF_TYPE_ARRAY) return 4 + 8;   /* u32 type + u64 count */
    return k_value_type_size[type];
}

static void decode_scalar(uint32_t type, const uint8_t *p, mxl_gguf_value *out) {
    out->type = (mxl_gguf_type)type;
    uint64_t raw = load_le(p, k_value_type_size[type]);
    switch ((mxl_gguf_type)type) {
    case MXL_GGUF_TYPE_UINT8:
    case MXL_GGUF_TYPE_UINT16:
    case MXL_GGUF_TYPE_UINT32:
    case MXL_GGUF_TYPE_UINT64: out->v.u64 = raw; break;
    case MXL_GGUF_TYPE_INT8: out->v.i64 = (int8_t)(uint8_t)raw; break;
    case MXL_GGUF_TYPE_INT16: out->v.i64 = (int16_t)(uint16_t)raw; break;
    case MXL_GGUF_TYPE_INT32: out->v.i64 = (int32_t)(uint32_t)raw; break;
    case MXL_GGUF_TYPE_INT64: out->v.i64 = (int64_t)raw; break;
    case MXL_GGUF_TYPE_FLOAT32: {
        uint32_t u = (uint32_t)raw;
        float f;
        memcpy(&f, &u, sizeof f);
        out->v.f64 = f;
        break;
    }
    case MXL_GGUF_TYPE_FLOAT64: {
        double d;
        memcpy(&d, &raw, sizeof d);
        out->v.f64 = d;
        break;
    }
    case MXL_GGUF_TYPE_BOOL: out->v.b = raw != 0; break;
    default: break;
    }
}

static mxl_status parse_value(parser *ps, uint32_t type, int depth, mxl_gguf_value *out);

/* Array body: u32 element type, u64 count, elements. `depth` is this array's nesting level. */
static mxl_status parse_array(parser *ps, int depth, mxl_gguf_array *arr) {
    char msg[160];
    if (depth > MXL_GGUF_MAX_ARRAY_DEPTH) {
        snprintf(msg, sizeof msg, "arrays nested deeper than %d levels", MXL_GGUF_MAX_ARRAY_DEPTH);
        return fail_key(ps, MXL_ERR_FORMAT, msg);
    }
    uint32_t et;
    uint64_t n;
    if (!read_u32(&ps->c, &et) || !read_u64(&ps->c, &n)) return truncated_key(ps);
    if (et >= MXL_GGUF_TYPE_COUNT) {
        snprintf(msg, sizeof msg, "array of unknown value type %u", et);
        return fail_key(ps, MXL_ERR_FORMAT, msg);
    }
    /* Bound the count by the bytes left before allocating anything for it. */
    uint64_t min = min_elem_bytes(et);
    if (n > remaining(&ps->c) / min) {
        snprintf(msg, sizeof msg, "array of %llu %s elements does not fit in the %llu bytes left",
                 (unsigned long long)n, k_value_type_names[et],
                 (unsigned long long)remaining(&ps->c));
        return fail_key(ps, MXL_ERR_FORMAT, msg);
    }
    arr->elem_type = (mxl_gguf_type)et;
    arr->n = n;
    arr->data = ps->c.p + ps->c.pos;
    uint64_t start = ps->c.pos;
    if (et == MXL_GGUF_TYPE_STRING) {
        mxl_gguf_str *strs = NULL;
        if (n) {
            strs = mxl_arena_alloc(&ps->g->arena, (size_t)n * sizeof *strs, _Alignof(mxl_gguf_str));
            if (!strs) return mxl_error_set(ps->err, MXL_ERR_NOMEM, "%s: out of memory", ps->g->name);
        }
        for (uint64_t i = 0; i < n; i++) {
            if (!read_str(&ps->c, &strs[i])) {
                snprintf(msg, sizeof msg, "string %llu of the array is truncated",
                         (unsigned long long)i);
                return fail_key(ps, MXL_ERR_FORMAT, msg);
            }
        }
        arr->strs = strs;
    } else if (et == MXL_GGUF_TYPE_ARRAY) {
        mxl_gguf_value *items = NULL;
        if (n) {
            items = mxl_arena_alloc(&ps->g->arena, (size_t)n * sizeof *items,
                                    _Alignof(mxl_gguf_value));
            if (!items) return mxl_error_set(ps->err, MXL_ERR_NOMEM, "%s: out of memory", ps->g->name);
        }
        for (uint64_t i = 0; i < n; i++) {
            mxl_status st = parse_value(ps, MXL_GGUF_TYPE_ARRAY, depth + 1, &items[i]);
            if (st != MXL_OK) return st;
        }
        arr->items = items;
    } else {
        /* n * size <= remaining was checked above */
        ps->c.pos += n * min;
    }
    arr->nbytes = ps->c.pos - start;
    return MXL_OK;
}

static mxl_status parse_value(parser *ps, uint32_t type, int depth, mxl_gguf_value *out) {
    memset(out, 0, sizeof *out);
    out->type = (mxl_gguf_type)type;
    if (type == MXL_GGUF_TYPE_STRING) {
        if (!read_str(&ps->c, &out->v.str)) {
            if (remaining(&ps->c) < 8) return truncated_key(ps);
            return fail_key(ps, MXL_ERR_FORMAT, "string length runs past the end of the file");
        }
        return MXL_OK;
    }
    if (type == MXL_GGUF_TYPE_ARRAY) return parse_array(ps, depth, &out->v.arr);
    unsigned sz = k_value_type_size[type];
    if (remaining(&ps->c) < sz) return truncated_key(ps);
    decode_scalar(type, ps->c.p + ps->c.pos, out);
    ps->c.pos += sz;
    return MXL_OK;
}

/* ---- hashing (FNV-1a over the name bytes) ------------------------------------------------- */

static uint64_t hash_bytes(const char *s, uint64_t len) {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t hash_cap_for(uint64_t n) {
    uint64_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    return cap;
}

/* Returns the slot holding `name` (table value != 0) or the empty slot where it would go. */
static uint64_t hash_probe(const uint32_t *table, uint64_t cap, const char *name, uint64_t len,
                           const char *(*name_of)(const void *, uint32_t, uint64_t *),
                           const void *ctx) {
    uint64_t i = hash_bytes(name, len) & (cap - 1);
    for (;;) {
        uint32_t e = table[i];
        if (e == 0) return i;
        uint64_t elen;
        const char *ename = name_of(ctx, e - 1, &elen);
        if (elen == len && memcmp(ename, name, (size_t)len) == 0) return i;
        i = (i + 1) & (cap - 1);
    }
}

static const char *kv_name_of(const void *ctx, uint32_t idx, uint64_t *len) {
    const mxl_gguf *g = ctx;
    *len = g->kvs[idx].key_len;
    return g->kvs[idx].key;
}

static const char *tensor_name_of(const void *ctx, uint32_t idx, uint64_t *len) {
    const mxl_gguf *g = ctx;
    *len = g->tensors[idx].name_len;
    return g->tensors[idx].name;
}

/* ---- header, kvs, tensor infos ------------------------------------------------------------ */

static mxl_status parse_header(parser *ps, uint64_t *n_tensors, uint64_t *n_kv) {
    mxl_gguf *g = ps->g;
    cursor *c = &ps->c;
    if (c->size < 4 || memcmp(c->p, "GGUF", 4) != 0) {
        if (c->size >= 4 && memcmp(c->p, "FUGG", 4) == 0)
            return mxl_error_set(ps->err, MXL_ERR_UNSUPPORTED,
                                 "%s: byte-swapped GGUF magic: big-endian GGUF files are not supported",
                                 g->name);
        return mxl_error_set(ps->err, MXL_ERR_FORMAT, "%s: not a GGUF file (bad magic)", g->name);
    }
    c->pos = 4;
    uint32_t version;
    if (!read_u32(c, &version))
        return mxl_error_set(ps->err, MXL_ERR_FORMAT, "%s: truncated GGUF header (version)", g->name);
    /* The magic is written byte-wise, so a big-endian file shows up only in the version: its
     * low 16 bits read as zero and the byte-swapped value is a small version number. */
    if ((version & 0xffffu) == 0 && version != 0) {
        uint32_t sw = __builtin_bswap32(version);
        if (sw >= 1 && sw <= 3)
            return mxl_error_set(ps->err, MXL_ERR_UNSUPPORTED,
                                 "%s: big-endian GGUF v%u file: only little-endian GGUF is supported",
                                 g->name, sw);
    }
    if (version == 1)
        return mxl_error_set(ps->err, MXL_ERR_UNSUPPORTED,
                             "%s: GGUF version 1 is not supported (only v2 and v3; re-convert the "
                             "model with a current llama.cpp)",
                             g->name);
    if (version != 2 && version != 3)
        return mxl_error_set(ps->err, MXL_ERR_UNSUPPORTED,
                             "%s: unsupported GGUF version %u (only v2 and v3)", g->name, version);
    g->version = version;
    if (!read_u64(c, n_tensors) || !read_u64(c, n_kv))
        return mxl_error_set(ps->err, MXL_ERR_FORMAT, "%s: truncated GGUF header (counts)", g->name);
    /* Smallest kv: key length u64 + type u32 + one-byte value = 13 bytes. Smallest tensor info:
     * name length u64 + n_dims u32 + type u32 + offset u64 = 24 bytes. Both must fit. */
    uint64_t left = remaining(c);
    if (*n_kv > left / 13)
        return mxl_error_set(ps->err, MXL_ERR_FORMAT,
                             "%s: header claims %llu metadata entries, more than the %llu bytes "
                             "that follow can hold",
                             g->name, (unsigned long long)*n_kv, (unsigned long long)left);
    if (*n_tensors > left / 24 || *n_tensors > (left - *n_kv * 13) / 24)
        return mxl_error_set(ps->err, MXL_ERR_FORMAT,
                             "%s: header claims %llu tensors, more than the %llu bytes that follow "
                             "can hold",
                             g->name, (unsigned long long)*n_tensors, (unsigned long long)left);
    if (*n_kv >= UINT32_MAX || *n_tensors >= UINT32_MAX)
        return mxl_error_set(ps->err, MXL_ERR_UNSUPPORTED, "%s: too many metadata entries or tensors",
                             g->name);
    return MXL_OK;
}

static mxl_status parse_kvs(parser *ps, uint64_t n_kv) {
    mxl_gguf *g = ps->g;
    cursor *c = &ps->c;
    char nb[NAME_BUF];
    g->n_kv = n_kv;
    if (n_kv) {
        g->kvs = mxl_arena_alloc(&g->arena, (size_t)n_kv * sizeof *g->kvs, _Alignof(mxl_gguf_kv));
        if (!g->kvs) return mxl_error_set(ps->err, MXL_ERR_NOMEM, "%s: out of memory", g->name);
    }
    g->kv_hash_cap = hash_cap_for(n_kv);
    g->kv_hash = mxl_arena_alloc(&g->arena, (size_t)g->kv_hash_cap * sizeof *g->kv_hash, 4);
    if (!g->kv_hash) return mxl_error_set(ps->err, MXL_ERR_NOMEM, "%s: out of memory", g->name);

    for (uint64_t i = 0; i < n_kv; i++) {
        mxl_gguf_kv *kv = &g->kvs[i];
        mxl_gguf_str key;
        if (!read_str(c, &key))
            return mxl_error_set(ps->err, MXL_ERR_FORMAT,
                                 "%s: metadata entry %llu: key is truncated (offset %llu)", g->name,
                                 (unsigned long long)i, (unsigned long long)c->pos);
        kv->key = mxl_arena_strndup(&g->arena, key.data, (size_t)key.len);
        if (!kv->key) return mxl_error_set(ps->err, MXL_ERR_NOMEM, "%s: out of memory", g->name);
        kv->key_len = key.len;
        ps->key = kv->key;
        ps->key_len = kv->key_len;

        uint64_t slot = hash_probe(g->kv_hash, g->kv_hash_cap, kv->key, kv->key_len, kv_name_of, g);
        if (g->kv_hash[slot] != 0)
            return mxl_error_set(ps->err, MXL_ERR_FORMAT, "%s: duplicate metadata key '%s'",
                                 g->name, safe_name(kv->key, kv->key_len, nb, sizeof nb));

        uint32_t type;
        if (!read_u32(c, &type)) return truncated_key(ps);
        if (type >= MXL_GGUF_TYPE_COUNT) {
            char msg[64];
            snprintf(msg, sizeof msg, "unknown value type %u", type);
            return fail_key(ps, MXL_ERR_FORMAT, msg);
        }
        mxl_status st = parse_value(ps, type, 1, &kv->value);
        if (st != MXL_OK) return st;
        /* insert only after the entry is complete so lookups never see a half-parsed one */
        g->kv_hash[slot] = (uint32_t)(i + 1);
    }
    ps->key = NULL;
    return MXL_OK;
}

static mxl_status read_alignment(parser *ps) {
    mxl_gguf *g = ps->g;
    g->alignment = MXL_GGUF_DEFAULT_ALIGNMENT;
    const mxl_gguf_kv *kv = mxl_gguf_find(g, "general.alignment");
    if (!kv) return MXL_OK;
    uint64_t a;
    /* ggml writes UINT32; any integer type is accepted. */
    if (!mxl_gguf_value_as_u64(&kv->value, &a))
        return mxl_error_set(ps->err, MXL_ERR_FORMAT,
                             "%s: metadata key 'general.alignment' has type %s, expected an integer",
                             g->name, mxl_gguf_type_name(kv->value.type));
    if (a == 0 || (a & (a - 1)) != 0 || a > (1u << 30))
        return mxl_error_set(ps->err, MXL_ERR_FORMAT,
                             "%s: metadata key 'general.alignment' is %llu, not a non-zero power of "
                             "two (<= 2^30)",
                             g->name, (unsigned long long)a);
    g->alignment = a;
    return MXL_OK;
}

static mxl_status parse_tensor_infos(parser *ps, uint64_t n_tensors) {
    mxl_gguf *g = ps->g;
    cursor *c = &ps->c;
    char nb[NAME_BUF];
    /* recheck against what is left now that the kvs are consumed */
    if (n_tensors > remaining(c) / 24)
        return mxl_error_set(ps->err, MXL_ERR_FORMAT,
                             "%s: header claims %llu tensors, more than the %llu bytes left after "
                             "the metadata can hold",
                             g->name, (unsigned long long)n_tensors,
                             (unsigned long long)remaining(c));
    g->n_tensors = n_tensors;
    if (n_tensors) {
        g->tensors = mxl_arena_alloc(&g->arena, (size_t)n_tensors * sizeof *g->tensors,
                                     _Alignof(mxl_gguf_tensor_info));
        if (!g->tensors) return mxl_error_set(ps->err, MXL_ERR_NOMEM, "%s: out of memory", g->name);
    }
    g->tensor_hash_cap = hash_cap_for(n_tensors);
    g->tensor_hash = mxl_arena_alloc(&g->arena, (size_t)g->tensor_hash_cap * sizeof *g->tensor_hash, 4);
    if (!g->tensor_hash) return mxl_error_set(ps->err, MXL_ERR_NOMEM, "%s: out of memory", g->name);

    for (uint64_t i = 0; i < n_tensors; i++) {
        mxl_gguf_tensor_info *ti = &g->tensors[i];
        mxl_gguf_str name;
        if (!read_str(c, &name))
            return mxl_error_set(ps->err, MXL_ERR_FORMAT,
                                 "%s: tensor info %llu: name is truncated (offset %llu)", g->name,
                                 (unsigned long long)i, (unsigned long long)c->pos);
        ti->name = mxl_arena_strndup(&g->arena, name.data, (size_t)name.len);
        if (!ti->name) return mxl_error_set(ps->err, MXL_ERR_NOMEM, "%s: out of memory", g->name);
        ti->name_len = name.len;
        const char *tn = safe_name(ti->name, ti->name_len, nb, sizeof nb);

        uint64_t slot = hash_probe(g->tensor_hash, g->tensor_hash_cap, ti->name, ti->name_len,
                                   tensor_name_of, g);
        if (g->tensor_hash[slot] != 0)
            return mxl_error_set(ps->err, MXL_ERR_FORMAT, "%s: duplicate tensor name '%s'", g->name, tn);

        uint32_t n_dims;
        if (!read_u32(c, &n_dims))
            return mxl_error_set(ps->err, MXL_ERR_FORMAT, "%s: tensor '%s': truncated info", g->name, tn);
        if (n_dims > MXL_MAX_DIMS)
            return mxl_error_set(ps->err, MXL_ERR_FORMAT,
                                 "%s: tensor '%s' has %u dimensions (at most %d supported)", g->name,
                                 tn, n_dims, MXL_MAX_DIMS);
        int64_t ne[MXL_MAX_DIMS];
        for (uint32_t d = 0; d < n_dims; d++) {
            uint64_t v;
            if (!read_u64(c, &v))
                return mxl_error_set(ps->err, MXL_ERR_FORMAT, "%s: tensor '%s': truncated info",
                                     g->name, tn);
            if (v > (uint64_t)INT64_MAX)
                return mxl_error_set(ps->err, MXL_ERR_FORMAT,
                                     "%s: tensor '%s': dimension %u is %llu (negative as int64)",
                                     g->name, tn, d, (unsigned long long)v);
            ne[d] = (int64_t)v;
        }
        uint32_t type;
        if (!read_u32(c, &type) || !read_u64(c, &ti->offset))
            return mxl_error_set(ps->err, MXL_ERR_FORMAT, "%s: tensor '%s': truncated info", g->name, tn);
        ti->ggml_type = type;

        /* shape outermost first: reverse GGUF's ne[] */
        mxl_tensor *t = &ti->tensor;
        t->ndim = (int)n_dims;
        for (uint32_t d = 0; d < n_dims; d++) t->shape[d] = ne[n_dims - 1 - d];

        const char *type_name = mxl_ggml_type_name(type);
        mxl_dtype dt = mxl_ggml_type_to_dtype(type);
        if (dt == MXL_DTYPE_INVALID) {
            if (type_name)
                return mxl_error_set(ps->err, MXL_ERR_UNSUPPORTED,
                                     "%s: tensor '%s' has type %s, which mlxcel does not load yet",
                                     g->name, tn, type_name);
            return mxl_error_set(ps->err, MXL_ERR_UNSUPPORTED,
                                 "%s: tensor '%s' has unknown ggml type id %u", g->name, tn, type);
        }
        t->dtype = dt;

        uint32_t be = k_ggml_types[type].block_elems, bb = k_ggml_types[type].block_bytes;
        /* The product of the non-zero dims must fit even when another dim is 0, so absurd
         * shapes are refused whatever order a consumer multiplies them in. */
        uint64_t nonzero = 1;
        bool has_zero = false;
        for (uint32_t d = 0; d < n_dims; d++) {
            if (ne[d] == 0) {
                has_zero = true;
                continue;
            }
            if (mxl_mul_u64(nonzero, (uint64_t)ne[d], &nonzero))
                return mxl_error_set(ps->err, MXL_ERR_OVERFLOW,
                                     "%s: tensor '%s': element count overflows", g->name, tn);
        }
        uint64_t numel = has_zero ? 0 : nonzero;
        /* ggml blocks run along the innermost dimension (ne[0]); a scalar counts as one element */
        uint64_t inner = n_dims ? (uint64_t)ne[0] : 1;
        if (inner % be != 0)
            return mxl_error_set(ps->err, MXL_ERR_FORMAT,
                                 "%s: tensor '%s': innermost dimension %llu is not a whole number of "
                                 "%s blocks of %u",
                                 g->name, tn, (unsigned long long)inner, type_name, be);
        if (mxl_mul_u64(numel / be, bb, &t->nbytes))
            return mxl_error_set(ps->err, MXL_ERR_OVERFLOW, "%s: tensor '%s': byte size overflows",
                                 g->name, tn);
        g->tensor_hash[slot] = (uint32_t)(i + 1);
    }
    return MXL_OK;
}

typedef struct span {
    uint64_t start, end;
    uint32_t idx;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* Places the data section and every tensor in it: aligned, inside the file, no overlaps. */
static mxl_status place_tensors(parser *ps) {
    mxl_gguf *g = ps->g;
    char nb[NAME_BUF], nb2[NAME_BUF];
    uint64_t header_end = ps->c.pos;
    uint64_t a = g->alignment;
    /* header_end <= size < 2^64 and a <= 2^30, so this cannot overflow */
    g->data_offset = (header_end + a - 1) & ~(a - 1);
    uint64_t total = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        mxl_gguf_tensor_info *ti = &g->tensors[i];
        const char *tn = safe_name(ti->name, ti->name_len, nb, sizeof nb);
        if (ti->offset % a != 0)
            return mxl_error_set(ps->err, MXL_ERR_FORMAT,
                                 "%s: tensor '%s': offset %llu is not a multiple of the alignment %llu",
                                 g->name, tn, (unsigned long long)ti->offset, (unsigned long long)a);
        uint64_t start, end;
        if (mxl_add_u64(g->data_offset, ti->offset, &start) ||
            mxl_add_u64(start, ti->tensor.nbytes, &end) || end > g->size)
            return mxl_error_set(ps->err, MXL_ERR_FORMAT,
                                 "%s: tensor '%s': %llu bytes at data offset %llu run past the end "
                                 "of the file (%llu bytes)",
                                 g->name, tn, (unsigned long long)ti->tensor.nbytes,
                                 (unsigned long long)ti->offset, (unsigned long long)g->size);
        ti->file_offset = start;
        ti->tensor.data = g->data + start;
        if (mxl_add_u64(total, ti->tensor.nbytes, &total))
            return mxl_error_set(ps->err, MXL_ERR_OVERFLOW, "%s: total tensor size overflows", g->name);
    }
    g->tensor_bytes_total = total;
    if (g->n_tensors < 2) return MXL_OK;

    /* overlap check: sort spans by (start, end) and compare each start with the furthest end
     * seen so far; empty tensors overlap nothing */
    span *order = mxl_malloc((size_t)g->n_tensors * sizeof *order);
    if (!order) return mxl_error_set(ps->err, MXL_ERR_NOMEM, "%s: out of memory", g->name);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const mxl_gguf_tensor_info *ti = &g->tensors[i];
        order[i] = (span){ti->offset, ti->offset + ti->tensor.nbytes, (uint32_t)i};
    }
    qsort(order, (size_t)g->n_tensors, sizeof *order, cmp_span);
    uint64_t max_end = 0;
    uint32_t max_idx = 0;
    bool have = false;
    mxl_status st = MXL_OK;
    for (uint64_t k = 0; k < g->n_tensors; k++) {
        if (order[k].end == order[k].start) continue;
        if (have && order[k].start < max_end) {
            const mxl_gguf_tensor_info *ti = &g->tensors[order[k].idx];
            const mxl_gguf_tensor_info *prev = &g->tensors[max_idx];
            st = mxl_error_set(ps->err, MXL_ERR_FORMAT,
                               "%s: tensor '%s' (data offset %llu) overlaps tensor '%s' (data "
                               "offset %llu, %llu bytes)",
                               g->name, safe_name(ti->name, ti->name_len, nb, sizeof nb),
                               (unsigned long long)ti->offset,
                               safe_name(prev->name, prev->name_len, nb2, sizeof nb2),
                               (unsigned long long)prev->offset,
                               (unsigned long long)prev->tensor.nbytes);
            break;
        }
        if (!have || order[k].end > max_end) {
            max_end = order[k].end;
            max_idx = order[k].idx;
            have = true;
        }
    }
    mxl_free(order);
    return st;
}

static mxl_status parse_all(mxl_gguf *g, mxl_error *err) {
    parser ps = {.g = g, .c = {g->data, g->size, 0}, .err = err};
    uint64_t n_tensors = 0, n_kv = 0;
    mxl_status st = parse_header(&ps, &n_tensors, &n_kv);
    if (st == MXL_OK) st = parse_kvs(&ps, n_kv);
    if (st == MXL_OK) st = read_alignment(&ps);
    if (st == MXL_OK) st = parse_tensor_infos(&ps, n_tensors);
    if (st == MXL_OK) st = place_tensors(&ps);
    return st;
}

/* ---- open / close ------------------------------------------------------------------------- */

static mxl_gguf *gguf_new(const char *name) {
    mxl_gguf *g = mxl_calloc(1, sizeof *g);
    if (!g) return NULL;
    mxl_arena_init(&g->arena, 64 * 1024);
    g->name = mxl_arena_strdup(&g->arena, name ? name : "<buffer>");
    if (!g->name) {
        mxl_arena_free(&g->arena);
        mxl_free(g);
        return NULL;
    }
    return g;
}

mxl_status mxl_gguf_open_buffer(const uint8_t *data, uint64_t size, const char *name,
                                mxl_gguf **out, mxl_error *err) {
    *out = NULL;
    mxl_gguf *g = gguf_new(name);
    if (!g) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", name ? name : "<buffer>");
    g->data = data;
    g->size = data ? size : 0;
    mxl_status st = parse_all(g, err);
    if (st != MXL_OK) {
        mxl_gguf_close(g);
        return st;
    }
    *out = g;
    return MXL_OK;
}

mxl_status mxl_gguf_open(const char *path, mxl_gguf **out, mxl_error *err) {
    *out = NULL;
    mxl_gguf *g = gguf_new(path);
    if (!g) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", path);
    mxl_status st = mxl_mapped_file_open(path, &g->file, err);
    if (st != MXL_OK) {
        mxl_gguf_close(g);
        return st;
    }
    g->data = g->file.data;
    g->size = g->file.size;
    st = parse_all(g, err);
    if (st != MXL_OK) {
        mxl_gguf_close(g);
        return st;
    }
    *out = g;
    return MXL_OK;
}

void mxl_gguf_release_pages(const mxl_gguf *g, const void *p, uint64_t n) {
    if (g->file.data) mxl_mapped_file_release(&g->file, p, n);
}

void mxl_gguf_close(mxl_gguf *g) {
    if (!g) return;
    if (g->file.path || g->file.data) mxl_mapped_file_close(&g->file);
    mxl_arena_free(&g->arena);
    mxl_free(g);
}

/* ---- accessors ---------------------------------------------------------------------------- */

const char *mxl_gguf_name(const mxl_gguf *g) { return g->name; }
uint32_t mxl_gguf_version(const mxl_gguf *g) { return g->version; }
uint64_t mxl_gguf_file_size(const mxl_gguf *g) { return g->size; }
uint64_t mxl_gguf_alignment(const mxl_gguf *g) { return g->alignment; }
uint64_t mxl_gguf_data_offset(const mxl_gguf *g) { return g->data_offset; }
uint64_t mxl_gguf_n_kv(const mxl_gguf *g) { return g->n_kv; }
uint64_t mxl_gguf_n_tensors(const mxl_gguf *g) { return g->n_tensors; }
uint64_t mxl_gguf_tensor_bytes_total(const mxl_gguf *g) { return g->tensor_bytes_total; }

const mxl_gguf_kv *mxl_gguf_kv_at(const mxl_gguf *g, uint64_t i) {
    return i < g->n_kv ? &g->kvs[i] : NULL;
}

const mxl_gguf_tensor_info *mxl_gguf_tensor_at(const mxl_gguf *g, uint64_t i) {
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const mxl_gguf_kv *mxl_gguf_find(const mxl_gguf *g, const char *key) {
    if (!g->kv_hash || !key) return NULL;
    uint64_t slot = hash_probe(g->kv_hash, g->kv_hash_cap, key, strlen(key), kv_name_of, g);
    uint32_t e = g->kv_hash[slot];
    return e ? &g->kvs[e - 1] : NULL;
}

const mxl_gguf_tensor_info *mxl_gguf_find_tensor(const mxl_gguf *g, const char *name) {
    if (!g->tensor_hash || !name) return NULL;
    uint64_t slot =
        hash_probe(g->tensor_hash, g->tensor_hash_cap, name, strlen(name), tensor_name_of, g);
    uint32_t e = g->tensor_hash[slot];
    return e ? &g->tensors[e - 1] : NULL;
}

static bool is_unsigned(mxl_gguf_type t) {
    return t == MXL_GGUF_TYPE_UINT8 || t == MXL_GGUF_TYPE_UINT16 || t == MXL_GGUF_TYPE_UINT32 ||
           t == MXL_GGUF_TYPE_UINT64;
}
static bool is_signed(mxl_gguf_type t) {
    return t == MXL_GGUF_TYPE_INT8 || t == MXL_GGUF_TYPE_INT16 || t == MXL_GGUF_TYPE_INT32 ||
           t == MXL_GGUF_TYPE_INT64;
}

bool mxl_gguf_value_as_u64(const mxl_gguf_value *v, uint64_t *out) {
    if (is_unsigned(v->type)) {
        *out = v->v.u64;
        return true;
    }
    if (is_signed(v->type) && v->v.i64 >= 0) {
        *out = (uint64_t)v->v.i64;
        return true;
    }
    return false;
}

bool mxl_gguf_value_as_i64(const mxl_gguf_value *v, int64_t *out) {
    if (is_signed(v->type)) {
        *out = v->v.i64;
        return true;
    }
    if (is_unsigned(v->type) && v->v.u64 <= (uint64_t)INT64_MAX) {
        *out = (int64_t)v->v.u64;
        return true;
    }
    return false;
}

bool mxl_gguf_value_as_f64(const mxl_gguf_value *v, double *out) {
    if (v->type == MXL_GGUF_TYPE_FLOAT32 || v->type == MXL_GGUF_TYPE_FLOAT64) {
        *out = v->v.f64;
        return true;
    }
    if (is_unsigned(v->type)) {
        *out = (double)v->v.u64;
        return true;
    }
    if (is_signed(v->type)) {
        *out = (double)v->v.i64;
        return true;
    }
    return false;
}

bool mxl_gguf_value_copy_str(const mxl_gguf_value *v, char *buf, uint64_t cap) {
    if (v->type != MXL_GGUF_TYPE_STRING || cap == 0) return false;
    if (v->v.str.len >= cap) return false;
    memcpy(buf, v->v.str.data, (size_t)v->v.str.len);
    buf[v->v.str.len] = '\0';
    return true;
}

bool mxl_gguf_array_get(const mxl_gguf_array *a, uint64_t i, mxl_gguf_value *out) {
    if (i >= a->n) return false;
    memset(out, 0, sizeof *out);
    if (a->elem_type == MXL_GGUF_TYPE_STRING) {
        out->type = MXL_GGUF_TYPE_STRING;
        out->v.str = a->strs[i];
        return true;
    }
    if (a->elem_type == MXL_GGUF_TYPE_ARRAY) {
        *out = a->items[i];
        return true;
    }
    decode_scalar(a->elem_type, a->data + i * k_value_type_size[a->elem_type], out);
    return true;
}

/* Shared lookup for the typed getters. */
static mxl_status find_typed(const mxl_gguf *g, const char *key, const mxl_gguf_kv **kv,
                             mxl_error *err) {
    *kv = mxl_gguf_find(g, key);
    if (!*kv) {
        char nb[NAME_BUF];
        return mxl_error_set(err, MXL_ERR_NOT_FOUND, "%s: metadata key '%s' is missing", g->name,
                             safe_name(key, strlen(key), nb, sizeof nb));
    }
    return MXL_OK;
}

static mxl_status wrong_type(const mxl_gguf *g, const mxl_gguf_kv *kv, const char *expected,
                             mxl_error *err) {
    char nb[NAME_BUF];
    return mxl_error_set(err, MXL_ERR_FORMAT, "%s: metadata key '%s' has type %s, expected %s",
                         g->name, safe_name(kv->key, kv->key_len, nb, sizeof nb),
                         mxl_gguf_type_name(kv->value.type), expected);
}

mxl_status mxl_gguf_get_u64(const mxl_gguf *g, const char *key, uint64_t *out, mxl_error *err) {
    char nb[NAME_BUF];
    const mxl_gguf_kv *kv;
    mxl_status st = find_typed(g, key, &kv, err);
    if (st != MXL_OK) return st;
    if (!mxl_gguf_value_as_u64(&kv->value, out)) {
        if (is_signed(kv->value.type))
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: metadata key '%s' is negative (%lld)",
                                 g->name, safe_name(kv->key, kv->key_len, nb, sizeof nb),
                                 (long long)kv->value.v.i64);
        return wrong_type(g, kv, "an integer", err);
    }
    return MXL_OK;
}

mxl_status mxl_gguf_get_i64(const mxl_gguf *g, const char *key, int64_t *out, mxl_error *err) {
    char nb[NAME_BUF];
    const mxl_gguf_kv *kv;
    mxl_status st = find_typed(g, key, &kv, err);
    if (st != MXL_OK) return st;
    if (!mxl_gguf_value_as_i64(&kv->value, out)) {
        if (is_unsigned(kv->value.type))
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: metadata key '%s' is too large (%llu)",
                                 g->name, safe_name(kv->key, kv->key_len, nb, sizeof nb),
                                 (unsigned long long)kv->value.v.u64);
        return wrong_type(g, kv, "an integer", err);
    }
    return MXL_OK;
}

mxl_status mxl_gguf_get_f64(const mxl_gguf *g, const char *key, double *out, mxl_error *err) {
    const mxl_gguf_kv *kv;
    mxl_status st = find_typed(g, key, &kv, err);
    if (st != MXL_OK) return st;
    if (!mxl_gguf_value_as_f64(&kv->value, out)) return wrong_type(g, kv, "a number", err);
    return MXL_OK;
}

mxl_status mxl_gguf_get_bool(const mxl_gguf *g, const char *key, bool *out, mxl_error *err) {
    const mxl_gguf_kv *kv;
    mxl_status st = find_typed(g, key, &kv, err);
    if (st != MXL_OK) return st;
    if (kv->value.type != MXL_GGUF_TYPE_BOOL) return wrong_type(g, kv, "BOOL", err);
    *out = kv->value.v.b;
    return MXL_OK;
}

mxl_status mxl_gguf_get_str(const mxl_gguf *g, const char *key, mxl_gguf_str *out, mxl_error *err) {
    const mxl_gguf_kv *kv;
    mxl_status st = find_typed(g, key, &kv, err);
    if (st != MXL_OK) return st;
    if (kv->value.type != MXL_GGUF_TYPE_STRING) return wrong_type(g, kv, "STRING", err);
    *out = kv->value.v.str;
    return MXL_OK;
}

mxl_status mxl_gguf_get_array(const mxl_gguf *g, const char *key, const mxl_gguf_array **out,
                              mxl_error *err) {
    const mxl_gguf_kv *kv;
    mxl_status st = find_typed(g, key, &kv, err);
    if (st != MXL_OK) return st;
    if (kv->value.type != MXL_GGUF_TYPE_ARRAY) return wrong_type(g, kv, "ARRAY", err);
    *out = &kv->value.v.arr;
    return MXL_OK;
}
