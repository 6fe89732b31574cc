/* fuzz_gguf_tokenizer.c - libFuzzer harness for tokenizers built from GGUF metadata
 * (tokenizer.ggml.*: src/tokenizer/gguf_vocab.c) and their encode / decode / streaming.
 *
 * fuzz_gguf.c fuzzes the container and the config mapping but builds no tokenizer; here the
 * fuzzer explores the vocabulary itself. The input describes the metadata, and the harness writes
 * a structurally valid GGUF v3 (or v2) holding it, so mutations land on tokens, types, scores,
 * merges, pre-tokenizer names and special ids rather than on the container:
 *   byte 0: bits 0-2 tokenizer.ggml.model (llama, gpt2, bert, gemma4, gpt2, llama, an unknown
 *           name, or the key missing); bit 3: 256 byte tokens first (<0xXX> of type 6, or the
 *           GPT-2 byte characters for gpt2); bit 4: token_type; bit 5: scores; bit 6: a merge
 *           "first-char rest" for every token of two characters or more; bit 7: one array or key
 *           of the wrong type or length (byte 2 bits 3-5 say which)
 *   byte 1: bits 0-4 tokenizer.ggml.pre from a list (31: no key); bit 5 add_bos_token /
 *           add_eos_token; bit 6 special ids (bos, eos, unknown, seperator, padding, cls, mask,
 *           fim_pre: 8 bytes follow, each an index into the input's tokens (after the byte tokens,
 *           when there are), or 0xF0.. an edge value: n_tokens, 2^30, UINT32_MAX, ...);
 *           bit 7 add_space_prefix and a chat template
 *   byte 2: bits 0-2 the add_bos / add_eos / add_space_prefix values; bits 3-5 which lie;
 *           bit 6 GGUF v2; bit 7 scores as int32
 *   then tokens: [len & 63][type][score as int8] + len bytes, until a len byte 0xFF (at most
 *   1024); then merges: [len] + len bytes, until 0xFF; the rest is the text to encode (at
 *   most 512 bytes). An input that starts with "GGUF" is opened as a GGUF file as it is.
 * The GGUF buffer is freed as soon as the tokenizer is built (it must copy what it keeps).
 *
 * Asserted: loading succeeds or fails with a one-line message; a tokenizer has n_vocab in
 * 1..n_tokens, every special id (bos, eos, unk, pad, eos list, FIM) -1 or a token; for each of
 * the four encode flag sets, encode fails cleanly or gives ids that all have a token, the ids of
 * MXL_TOK_ADD_SPECIAL contain those without it as one run, encoding twice gives the same ids,
 * decode (with and without skip_special) is valid UTF-8, and the streaming detokenizer keeps its
 * contract (detok_check.h) and concatenates to the decode (for the ids without
 * MXL_TOK_ADD_SPECIAL). For a clean byte-level gpt2 vocabulary (all 256 byte characters, no
 * control / user / unknown / byte tokens, every merge making a token: see merges_closed)
 * decode(encode(text)) is the text with invalid UTF-8 replaced by U+FFFD. Seeds: tests/fuzz/corpus/gguf_tokenizer/ (gen_gguf_tokenizer_seeds.py).
 *
 *   make build/fuzz/fuzz_gguf_tokenizer
 *   build/fuzz/fuzz_gguf_tokenizer -max_len=8192 tests/fuzz/corpus/gguf_tokenizer */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

#define FUZZ_ASSERT(c) ((c) ? (void)0 : fuzz_fail(#c, __LINE__))

static void fuzz_fail(const char *expr, int line) {
    fprintf(stderr, "fuzz_gguf_tokenizer.c:%d: invariant failed: %s\n", line, expr);
    abort();
}

static void check_msg(const mxl_error *err) {
    size_t n = strnlen(err->msg, sizeof err->msg);
    FUZZ_ASSERT(n > 0 && n < sizeof err->msg);
    FUZZ_ASSERT(memchr(err->msg, '\n', n) == NULL);
}

#include "detok_check.h"

/* ---- byte writer ---- */
typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void b_put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        b->p = mxl_realloc(b->p, cap);
        if (!b->p) abort();
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void b_le(buf *b, uint64_t v, int n) {
    uint8_t t[8];
    for (int i = 0; i < n; i++) t[i] = (uint8_t)(v >> (8 * i));
    b_put(b, t, (size_t)n);
}
static void b_u32(buf *b, uint32_t v) { b_le(b, v, 4); }
static void b_u64(buf *b, uint64_t v) { b_le(b, v, 8); }
static void b_f32(buf *b, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    b_u32(b, u);
}
static void b_strn(buf *b, const void *s, size_t n) {
    b_u64(b, n);
    b_put(b, s, n);
}
static void b_str(buf *b, const char *s) { b_strn(b, s, strlen(s)); }

typedef struct gw {
    buf kv;
    uint64_t n_kv;
} gw;

static buf *gw_key(gw *w, const char *key, uint32_t type) {
    b_str(&w->kv, key);
    b_u32(&w->kv, type);
    w->n_kv++;
    return &w->kv;
}
/* array header: element type and count; the caller appends the elements */
static buf *gw_arr(gw *w, const char *key, uint32_t elem, uint64_t n) {
    buf *b = gw_key(w, key, MXL_GGUF_TYPE_ARRAY);
    b_u32(b, elem);
    b_u64(b, n);
    return b;
}

/* ---- the vocabulary the input describes ---- */
#define MAX_TOK 1024
#define MAX_MERGE 1024
#define MAX_TEXT 512

typedef struct tok {
    const uint8_t *s;
    size_t n;
    int32_t type;
    int8_t score;
    char own[8]; /* for generated byte tokens */
} tok;

static tok g_tok[MAX_TOK + 256];
static struct {
    const uint8_t *s;
    size_t n;
} g_merge[MAX_MERGE];
static char g_auto_merges[MAX_TOK][80];
static size_t g_auto_merge_len[MAX_TOK];
static size_t g_nm, g_n_auto; /* merges of this input: the input's, the automatic ones */

/* Whether every merge the loader keeps (both sides tokens) makes a token. A merge whose result is
 * no token leaves BPE a piece without an id, which llama.cpp (and so the GGUF tokenizer) then
 * emits byte by byte, dropping bytes that are no token of their own: no round trip there. */
static bool merges_closed(const mxl_tokenizer *t) {
    for (size_t k = 0; k < g_nm + g_n_auto; k++) {
        const char *m = k < g_nm ? (const char *)g_merge[k].s : g_auto_merges[k - g_nm];
        const size_t n = k < g_nm ? g_merge[k].n : g_auto_merge_len[k - g_nm];
        const char *sp = n > 1 ? memchr(m + 1, ' ', n - 1) : NULL;
        if (!sp) continue;
        const size_t al = (size_t)(sp - m), bl = n - al - 1;
        if (mxl_tokenizer_token_id(t, m, al) < 0 || mxl_tokenizer_token_id(t, sp + 1, bl) < 0) continue;
        char joined[600];
        if (al + bl > sizeof joined) return false;
        memcpy(joined, m, al);
        memcpy(joined + al, sp + 1, bl);
        if (mxl_tokenizer_token_id(t, joined, al + bl) < 0) return false;
    }
    return true;
}

static const char *const k_pre[] = {
    "",           "default",      "llama3",   "llama-bpe",  "qwen2",     "qwen35",     "deepseek-llm", "deepseek-coder",
    "deepseek-v3", "falcon",      "starcoder", "gpt-2",     "gpt-4o",    "tekken",     "poro-chat",    "viking",
    "gemma4",     "dbrx",         "chatglm-bpe", "smollm",  "olmo",      "refact",     "command-r",    "bloom",
    "mpt",        "jina-v2-code", "exaone",   "hunyuan",    "lfm2",      "no-such-pre", "llama-v3",
};

static const char *const k_models[] = {"llama", "gpt2", "bert", "gemma4", "gpt2", "llama", "rwkv", NULL};

/* GPT-2 byte -> char table. */
static unsigned byte_cp(unsigned b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return b;
    unsigned n = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) n++;
    return 256 + n;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* Length of the UTF-8 character at s (1 for a stray byte). */
static size_t char_len(const uint8_t *s, size_t n) {
    size_t l = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 1;
    return l <= n ? l : 1;
}

static int64_t edge_val(uint8_t v, uint64_t n_tok, uint64_t first) {
    if (v < 0xF0) return (int64_t)(first + v);
    switch (v & 15) {
    case 0: return (int64_t)n_tok;
    case 1: return (int64_t)n_tok - 1;
    case 2: return 1 << 30;
    case 3: return (1 << 30) - 1;
    case 4: return UINT32_MAX;
    case 5: return -1;
    case 6: return INT32_MAX;
    case 7: return 256;
    default: return 300 + (v & 15);
    }
}

static uint32_t g_nv; /* mxl_tokenizer_n_vocab of the tokenizer under test (a scan: called once) */

static bool id_ok(const mxl_tokenizer *t, int32_t id) {
    size_t l;
    return id == -1 || (id >= 0 && (uint32_t)id < g_nv && mxl_tokenizer_token(t, id, &l) != NULL);
}

static void exercise(const mxl_tokenizer *t, uint64_t n_tok, const char *text, size_t tl, bool clean,
                     const char *tmpl, size_t tmpl_len) {
    const uint32_t nv = g_nv = mxl_tokenizer_n_vocab(t);
    FUZZ_ASSERT(nv >= 1 && nv <= n_tok);
    FUZZ_ASSERT(id_ok(t, mxl_tokenizer_bos_id(t)) && id_ok(t, mxl_tokenizer_eos_id(t)));
    FUZZ_ASSERT(id_ok(t, mxl_tokenizer_unk_id(t)) && id_ok(t, mxl_tokenizer_pad_id(t)));
    size_t ne;
    const int32_t *eos = mxl_tokenizer_eos_ids(t, &ne);
    for (size_t i = 0; i < ne; i++) FUZZ_ASSERT(eos[i] >= 0 && id_ok(t, eos[i]));
    for (int w = 0; w < 6; w++) FUZZ_ASSERT(id_ok(t, mxl_tokenizer_fim_id(t, w)));
    FUZZ_ASSERT(mxl_tokenizer_fim_id(t, 6) == -1 && mxl_tokenizer_fim_id(t, -1) == -1);
    const char *ct = mxl_tokenizer_chat_template(t);
    if (tmpl) FUZZ_ASSERT(ct && strlen(ct) <= tmpl_len && memcmp(ct, tmpl, strlen(ct)) == 0);
    mxl_error err = {0};
    mxl_token_ids plain[2] = {{0}};
    bool plain_ok[2] = {false, false};
    for (unsigned fl = 0; fl < 4; fl++) {
        mxl_token_ids ids = {0};
        mxl_status st = mxl_tokenizer_encode(t, text, tl, fl, &ids, &err);
        if (st != MXL_OK) {
            check_msg(&err);
            mxl_token_ids_free(&ids);
            continue;
        }
        for (size_t i = 0; i < ids.n; i++) FUZZ_ASSERT(id_ok(t, ids.ids[i]) && ids.ids[i] >= 0);
        /* deterministic */
        mxl_token_ids again = {0};
        FUZZ_ASSERT(mxl_tokenizer_encode(t, text, tl, fl, &again, &err) == MXL_OK);
        FUZZ_ASSERT(again.n == ids.n && (ids.n == 0 || memcmp(again.ids, ids.ids, ids.n * sizeof(int32_t)) == 0));
        mxl_token_ids_free(&again);
        if (!(fl & MXL_TOK_ADD_SPECIAL)) {
            plain[fl >> 1] = ids;
            plain_ok[fl >> 1] = true;
        } else if (plain_ok[fl >> 1]) {
            /* the special tokens only surround the plain ids */
            const mxl_token_ids *p = &plain[fl >> 1];
            bool found = p->n == 0;
            for (size_t o = 0; !found && o + p->n <= ids.n; o++)
                found = memcmp(ids.ids + o, p->ids, p->n * sizeof(int32_t)) == 0;
            FUZZ_ASSERT(found && ids.n <= p->n + 2);
        }
        for (int skip = 0; skip < 2; skip++) {
            char *dec = NULL;
            size_t dl = 0;
            FUZZ_ASSERT(mxl_tokenizer_decode(t, ids.ids, ids.n, skip, &dec, &dl, &err) == MXL_OK);
            FUZZ_ASSERT(dec && dec[dl] == 0 && detok_utf8_valid((const unsigned char *)dec, dl));
            /* GGUF decoding joins pieces and repairs UTF-8 locally, so it never rewrites what was
             * emitted (the step-by-step oracle is quadratic: short id lists only) */
            if (!(fl & MXL_TOK_ADD_SPECIAL) && ids.n <= 64) FUZZ_ASSERT(!detok_check(t, ids.ids, ids.n, skip));
            else if (!(fl & MXL_TOK_ADD_SPECIAL)) detok_check_exact(t, ids.ids, ids.n, skip);
            if (clean && !skip && !(fl & MXL_TOK_ADD_SPECIAL)) {
                char *exp = mxl_malloc(3 * tl + 1);
                FUZZ_ASSERT(exp != NULL);
                size_t el = detok_lossy((const unsigned char *)text, tl, exp);
                if (getenv("FUZZ_GGUF_TOKENIZER_DEBUG") && (dl != el || memcmp(dec, exp, el) != 0)) {
                    fprintf(stderr, "round trip (flags %u): [%.*s] != [%.*s]; ids", fl, (int)dl, dec, (int)el, exp);
                    for (size_t k = 0; k < ids.n; k++) fprintf(stderr, " %d", ids.ids[k]);
                    fprintf(stderr, "\n");
                }
                FUZZ_ASSERT(dl == el && (el == 0 || memcmp(dec, exp, el) == 0));
                mxl_free(exp);
            }
            mxl_free(dec);
        }
        if (fl & MXL_TOK_ADD_SPECIAL) mxl_token_ids_free(&ids);
    }
    mxl_token_ids_free(&plain[0]);
    mxl_token_ids_free(&plain[1]);
}

/* Opens buf as a GGUF, builds its tokenizer, frees buf, then exercises the tokenizer. */
static void run_gguf(uint8_t *bytes, size_t n, const char *text, size_t tl, bool clean, const char *tmpl,
                     size_t tmpl_len) {
    mxl_gguf *g = NULL;
    mxl_error err = {0};
    if (mxl_gguf_open_buffer(bytes, n, "fuzz.gguf", &g, &err) != MXL_OK) {
        check_msg(&err);
        mxl_free(bytes);
        return;
    }
    uint64_t n_tok = 0;
    const mxl_gguf_array *a;
    mxl_error e2;
    if (mxl_gguf_get_array(g, "tokenizer.ggml.tokens", &a, &e2) == MXL_OK) n_tok = a->n;
    mxl_tokenizer *t = NULL;
    mxl_status st = mxl_tokenizer_load_gguf(g, &t, &err);
    mxl_gguf_close(g);
    mxl_free(bytes); /* the tokenizer keeps copies, never views of the file */
    const bool round_trip = st == MXL_OK && clean && merges_closed(t);
    if (getenv("FUZZ_GGUF_TOKENIZER_DEBUG"))
        fprintf(stderr, "load: %s (%llu tokens)%s\n", st == MXL_OK ? "ok" : err.msg, (unsigned long long)n_tok,
                round_trip ? ", round trip checked" : "");
    if (st != MXL_OK) {
        check_msg(&err);
        FUZZ_ASSERT(t == NULL);
        return;
    }
    exercise(t, n_tok, text, tl, round_trip, tmpl, tmpl_len);
    mxl_tokenizer_destroy(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size >= 4 && memcmp(data, "GGUF", 4) == 0) {
        uint8_t *copy = mxl_malloc(size);
        FUZZ_ASSERT(copy != NULL);
        memcpy(copy, data, size);
        g_nm = g_n_auto = 0;
        run_gguf(copy, size, "Hello world, 123 \xC3\xA9\xE4\xB8\xAD!\n  <s>", 30, false, NULL, 0);
        return 0;
    }
    if (size < 3) return 0;
    const uint8_t m = data[0], p = data[1], x = data[2];
    size_t i = 3;
    int64_t sid[8];
    bool have_sid = (p >> 6) & 1;
    uint8_t sid_raw[8] = {0};
    if (have_sid)
        for (int k = 0; k < 8; k++) sid_raw[k] = i < size ? data[i++] : 0;
    /* tokens */
    size_t nt = 0;
    const bool auto_bytes = (m >> 3) & 1;
    const char *model = k_models[m & 7];
    const bool gpt2 = model && strcmp(model, "gpt2") == 0;
    if (auto_bytes) {
        for (unsigned b = 0; b < 256; b++) {
            tok *tk = &g_tok[nt++];
            if (gpt2) {
                tk->n = put_utf8(tk->own, byte_cp(b));
                tk->type = 1;
            } else {
                tk->n = (size_t)snprintf(tk->own, sizeof tk->own, "<0x%02X>", b);
                tk->type = 6;
            }
            tk->s = (const uint8_t *)tk->own;
            tk->score = 0;
        }
    }
    bool clean = gpt2 && auto_bytes && (p & 31) != 16 && !((m >> 7) & 1);
    size_t n_in = 0;
    while (i < size && n_in < MAX_TOK) {
        uint8_t lb = data[i++];
        if (lb == 0xFF) break;
        size_t len = lb & 63;
        tok *tk = &g_tok[nt++];
        n_in++;
        tk->type = i < size ? data[i++] : 1;
        tk->score = (int8_t)(i < size ? data[i++] : 0);
        if (len > size - i) len = size - i;
        tk->s = data + i;
        tk->n = len;
        i += len;
        if (tk->type == 2 || tk->type == 3 || tk->type == 4 || tk->type == 6) clean = false;
    }
    size_t nm = 0;
    while (i < size && nm < MAX_MERGE) {
        uint8_t lb = data[i++];
        if (lb == 0xFF) break;
        size_t len = lb;
        if (len > size - i) len = size - i;
        g_merge[nm].s = data + i;
        g_merge[nm].n = len;
        nm++;
        i += len;
    }
    g_nm = nm;
    const char *text = (const char *)data + i;
    size_t tl = size - i < MAX_TEXT ? size - i : MAX_TEXT;
    /* types of tokens of the input that the vocabulary's types array can't hold as int32 */
    const bool lie = (m >> 7) & 1;
    const unsigned lie_kind = (x >> 3) & 7;

    gw w = {0};
    if (model) {
        b_str(gw_key(&w, "tokenizer.ggml.model", MXL_GGUF_TYPE_STRING), model);
    } else if (lie && lie_kind == 7) {
        b_u32(gw_key(&w, "tokenizer.ggml.model", MXL_GGUF_TYPE_UINT32), 1);
    }
    if ((p & 31) != 31) b_str(gw_key(&w, "tokenizer.ggml.pre", MXL_GGUF_TYPE_STRING), k_pre[p & 31]);
    /* tokens */
    if (lie && lie_kind == 0) {
        buf *b = gw_arr(&w, "tokenizer.ggml.tokens", MXL_GGUF_TYPE_INT32, nt);
        for (size_t k = 0; k < nt; k++) b_u32(b, (uint32_t)k);
    } else if (lie && lie_kind == 6) {
        gw_arr(&w, "tokenizer.ggml.tokens", MXL_GGUF_TYPE_STRING, 0);
    } else {
        buf *b = gw_arr(&w, "tokenizer.ggml.tokens", MXL_GGUF_TYPE_STRING, nt);
        for (size_t k = 0; k < nt; k++) b_strn(b, g_tok[k].s, g_tok[k].n);
    }
    if ((m >> 4) & 1) {
        size_t n = lie && lie_kind == 1 && nt ? nt - 1 : nt;
        if (lie && lie_kind == 3) {
            buf *b = gw_arr(&w, "tokenizer.ggml.token_type", MXL_GGUF_TYPE_FLOAT32, n);
            for (size_t k = 0; k < n; k++) b_f32(b, (float)g_tok[k].type);
        } else {
            buf *b = gw_arr(&w, "tokenizer.ggml.token_type", (x >> 7) & 1 ? MXL_GGUF_TYPE_UINT32 : MXL_GGUF_TYPE_INT32, n);
            for (size_t k = 0; k < n; k++) b_u32(b, (uint32_t)g_tok[k].type);
        }
    }
    if ((m >> 5) & 1) {
        size_t n = lie && lie_kind == 2 && nt ? nt - 1 : nt;
        if (lie && lie_kind == 4) {
            buf *b = gw_arr(&w, "tokenizer.ggml.scores", MXL_GGUF_TYPE_STRING, n);
            for (size_t k = 0; k < n; k++) b_str(b, "0");
        } else if ((x >> 7) & 1) {
            buf *b = gw_arr(&w, "tokenizer.ggml.scores", MXL_GGUF_TYPE_INT32, n);
            for (size_t k = 0; k < n; k++) b_u32(b, (uint32_t)(int32_t)g_tok[k].score);
        } else {
            buf *b = gw_arr(&w, "tokenizer.ggml.scores", MXL_GGUF_TYPE_FLOAT32, n);
            for (size_t k = 0; k < n; k++) {
                float f = g_tok[k].score == -128 ? -1e30f : g_tok[k].score == 127 ? 1e30f : (float)g_tok[k].score / 4;
                b_f32(b, f);
            }
        }
    }
    /* merges: the input's, then the automatic ones */
    size_t n_auto = 0;
    if ((m >> 6) & 1) {
        for (size_t k = 0; k < nt && n_auto < MAX_TOK; k++) {
            const tok *tk = &g_tok[k];
            if (tk->n < 2 || tk->n > 64) continue;
            size_t c = char_len(tk->s, tk->n);
            if (c >= tk->n) continue;
            char *o = g_auto_merges[n_auto];
            memcpy(o, tk->s, c);
            o[c] = ' ';
            memcpy(o + c + 1, tk->s + c, tk->n - c);
            g_auto_merge_len[n_auto++] = tk->n + 1;
        }
    }
    g_n_auto = n_auto;
    if (nm || n_auto || gpt2 || (model && strcmp(model, "gemma4") == 0)) {
        if (lie && lie_kind == 5) {
            buf *b = gw_arr(&w, "tokenizer.ggml.merges", MXL_GGUF_TYPE_INT32, nm + n_auto);
            for (size_t k = 0; k < nm + n_auto; k++) b_u32(b, (uint32_t)k);
        } else {
            buf *b = gw_arr(&w, "tokenizer.ggml.merges", MXL_GGUF_TYPE_STRING, nm + n_auto);
            for (size_t k = 0; k < nm; k++) b_strn(b, g_merge[k].s, g_merge[k].n);
            for (size_t k = 0; k < n_auto; k++) b_strn(b, g_auto_merges[k], g_auto_merge_len[k]);
        }
    }
    if ((p >> 5) & 1) {
        buf *b = gw_key(&w, "tokenizer.ggml.add_bos_token", MXL_GGUF_TYPE_BOOL);
        b_put(b, (uint8_t[]){(uint8_t)(x & 1)}, 1);
        b = gw_key(&w, "tokenizer.ggml.add_eos_token", MXL_GGUF_TYPE_BOOL);
        b_put(b, (uint8_t[]){(uint8_t)((x >> 1) & 1)}, 1);
    }
    if (have_sid) {
        static const char *const keys[8] = {"tokenizer.ggml.bos_token_id",       "tokenizer.ggml.eos_token_id",
                                            "tokenizer.ggml.unknown_token_id",   "tokenizer.ggml.seperator_token_id",
                                            "tokenizer.ggml.padding_token_id",   "tokenizer.ggml.cls_token_id",
                                            "tokenizer.ggml.mask_token_id",      "tokenizer.ggml.fim_pre_token_id"};
        for (int k = 0; k < 8; k++) {
            sid[k] = edge_val(sid_raw[k], nt, auto_bytes ? 256 : 0);
            if (lie && lie_kind == 7 && k == 1) {
                b_str(gw_key(&w, keys[k], MXL_GGUF_TYPE_STRING), "2");
            } else if (sid[k] < 0) {
                b_u32(gw_key(&w, keys[k], MXL_GGUF_TYPE_INT32), (uint32_t)(int32_t)sid[k]);
            } else if (sid[k] > UINT32_MAX / 2) {
                b_u64(gw_key(&w, keys[k], MXL_GGUF_TYPE_UINT64), (uint64_t)sid[k]);
            } else {
                b_u32(gw_key(&w, keys[k], MXL_GGUF_TYPE_UINT32), (uint32_t)sid[k]);
            }
        }
    }
    const char *tmpl = NULL;
    size_t tmpl_len = 0;
    if ((p >> 7) & 1) {
        buf *b = gw_key(&w, "tokenizer.ggml.add_space_prefix", MXL_GGUF_TYPE_BOOL);
        b_put(b, (uint8_t[]){(uint8_t)((x >> 2) & 1)}, 1);
        tmpl = text;
        tmpl_len = tl;
        b_strn(gw_key(&w, "tokenizer.chat_template", MXL_GGUF_TYPE_STRING), text, tl);
    }
    buf out = {0};
    b_put(&out, "GGUF", 4);
    b_u32(&out, (x >> 6) & 1 ? 2 : 3);
    b_u64(&out, 0);
    b_u64(&out, w.n_kv);
    b_put(&out, w.kv.p, w.kv.n);
    mxl_free(w.kv.p);
    /* an exact-size copy, so ASan sees any read past the end */
    uint8_t *bytes = mxl_malloc(out.n);
    FUZZ_ASSERT(bytes != NULL);
    memcpy(bytes, out.p, out.n);
    size_t n = out.n;
    mxl_free(out.p);
    run_gguf(bytes, n, text, tl, clean, tmpl, tmpl_len);
    return 0;
}
