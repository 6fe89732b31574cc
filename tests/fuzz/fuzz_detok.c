/* fuzz_detok.c - libFuzzer harness for the streaming detokenizer (tokenizer.h mxl_detok_stream,
 * what generation and the server's streaming push text through) over real vocabularies.
 *
 * Real tokenizers are loaded once from ../shared/testdata (relative to the repository root:
 * $MXL_REPO_ROOT, else three folders above this executable): Qwen3 (tokenizer.json, byte-level
 * BPE), Llama 2 (tokenizer.json, BPE with byte fallback, Metaspace + Strip decoders), and the
 * GGUF vocabularies llama-spm (SentencePiece), bert-bge (WordPiece) and gemma-4 (BPE with U+2581
 * escaping and <0xXX> bytes), which decode through the GGUF path.
 *
 * Input: byte 0 picks the tokenizer (bits 0-2) and skip_special (bit 3); the rest is a list of
 * token ids, each item led by a byte whose top two bits say how the id is written:
 *   00: the next byte b -> the vocabulary's token for the single byte b (byte-level char or <0xXX>)
 *   01: the next byte k -> the k-th special / added / control / user / unknown token
 *   10: (lead & 0x3f) << 16 | next two bytes, modulo n_vocab + 64 (so a few ids are out of range)
 *   11: (lead & 0x3f) picks an edge id: negatives, INT32_MIN / MAX, n_vocab, n_ids, ...
 * The ids are fed one at a time; flush at the end.
 *
 * Asserted (abort on violation), with E the concatenation of everything emitted and D the full
 * decode of the ids the stream accepted (mxl_tokenizer_decode, same skip_special):
 *   - a step fails only for an id without a token (out of range), with a one-line message, and
 *     such an id is not kept (the stream goes on as if it never came);
 *   - every emitted piece is valid UTF-8, and so is every decode;
 *   - after every step E is a prefix of D, and E == D whenever D does not end in U+FFFD (text is
 *     held back only while a character may still be incomplete);
 *   - after the flush E == D exactly (nothing is held back forever);
 *   - except where a decoder rewrites text already emitted (ByteFallback turns a byte run into
 *     U+FFFD per byte once it proves invalid; detok_stream.c): when D, final (no U+FFFD at its
 *     end, or at the flush), no longer begins with E, the step emits exactly the decode of the
 *     ids since the last emission as a continuation (tok_decode cont), and the rules above then
 *     hold for the segment that starts there (its ids decoded as a continuation against the
 *     text emitted from it on). A rewrite never fails a step.
 * Seeds: tests/fuzz/corpus/detok/.
 *
 *   make build/fuzz/fuzz_detok
 *   build/fuzz/fuzz_detok -max_len=8192 tests/fuzz/corpus/detok */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "tokenizer/tok_internal.h" /* tok_decode: the decode of a continuation */
#include "tokenizer/tokenizer.h"

#define FUZZ_ASSERT(c) ((c) ? (void)0 : fuzz_fail(#c, __LINE__))

static void fuzz_fail(const char *expr, int line) {
    fprintf(stderr, "fuzz_detok.c:%d: invariant failed: %s\n", line, expr);
    abort();
}

static void check_msg(const mxl_error *err) {
    size_t n = strnlen(err->msg, sizeof err->msg);
    FUZZ_ASSERT(n > 0 && n < sizeof err->msg);
    FUZZ_ASSERT(memchr(err->msg, '\n', n) == NULL);
}

#define MAX_IDS 384
#define MAX_SPECIAL 256

typedef struct tok_case {
    const char *rel; /* under ../shared/testdata */
    mxl_tokenizer *t;
    uint32_t n_vocab;
    int32_t byte_id[256];        /* -1: none */
    int32_t special[MAX_SPECIAL]; /* special / added / control / user / unknown ids */
    int n_special;
} tok_case;

static tok_case g_cases[] = {
    {.rel = "tokenizers/qwen3"},
    {.rel = "tokenizers/llama2"},
    {.rel = "llama-cpp-vocab/ggml-vocab-llama-spm.gguf"},
    {.rel = "llama-cpp-vocab/ggml-vocab-bert-bge.gguf"},
    {.rel = "llama-cpp-vocab/ggml-vocab-gemma-4.gguf"},
};
#define N_CASES ((int)(sizeof g_cases / sizeof g_cases[0]))

static const char *repo_root(void) {
    static char root[4096];
    if (root[0]) return root;
    const char *e = getenv("MXL_REPO_ROOT");
    if (e && *e) {
        snprintf(root, sizeof root, "%s", e);
        return root;
    }
    /* <root>/build/fuzz/fuzz_detok */
    ssize_t n = readlink("/proc/self/exe", root, sizeof root - 1);
    if (n <= 0) {
        fprintf(stderr, "fuzz_detok: cannot find the repository root; set MXL_REPO_ROOT\n");
        abort();
    }
    root[n] = 0;
    for (int k = 0; k < 3; k++) {
        char *s = strrchr(root, '/');
        if (!s) abort();
        *s = 0;
    }
    return root;
}

/* GPT-2 byte -> char table (byte-level vocabularies). */
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
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    o[0] = (char)(0xE0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
}

static void init_cases(void) {
    static int done;
    if (done) return;
    done = 1;
    for (int c = 0; c < N_CASES; c++) {
        tok_case *k = &g_cases[c];
        char path[8192];
        snprintf(path, sizeof path, "%s/../shared/testdata/%s", repo_root(), k->rel);
        mxl_error err = {0};
        if (mxl_tokenizer_load(path, &k->t, &err) != MXL_OK) {
            fprintf(stderr, "fuzz_detok: %s\n", err.msg);
            abort();
        }
        k->n_vocab = mxl_tokenizer_n_vocab(k->t);
        for (unsigned b = 0; b < 256; b++) {
            char s[8];
            snprintf(s, sizeof s, "<0x%02X>", b);
            int32_t id = mxl_tokenizer_token_id(k->t, s, 6);
            if (id < 0) {
                size_t l = put_utf8(s, byte_cp(b));
                id = mxl_tokenizer_token_id(k->t, s, l);
            }
            k->byte_id[b] = id;
        }
        for (uint32_t id = 0; id < k->n_vocab && k->n_special < MAX_SPECIAL; id++) {
            unsigned a = mxl_tokenizer_token_attr(k->t, (int32_t)id);
            if (a & (MXL_TOKEN_ATTR_ADDED | MXL_TOKEN_ATTR_SPECIAL | MXL_TOKEN_ATTR_USER | MXL_TOKEN_ATTR_UNKNOWN |
                     MXL_TOKEN_ATTR_UNUSED))
                k->special[k->n_special++] = (int32_t)id;
        }
        if (k->n_special == 0) k->special[k->n_special++] = 0;
    }
}

/* Strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
static int utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t need;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c == 0xE0) need = 2, lo = 0xA0;
        else if (c >= 0xE1 && c <= 0xEC) need = 2;
        else if (c == 0xED) need = 2, hi = 0x9F;
        else if (c == 0xEE || c == 0xEF) need = 2;
        else if (c == 0xF0) need = 3, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3) need = 3;
        else if (c == 0xF4) need = 3, hi = 0x8F;
        else return 0;
        if (n - i <= need) return 0;
        for (size_t k = 1; k <= need; k++) {
            unsigned b = s[i + k];
            if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return 0;
        }
        i += need + 1;
    }
    return 1;
}

static int g_debug; /* FUZZ_DETOK_DEBUG set: each step's E and D to stderr */

static int ends_fffd(const char *s, size_t n) { return n >= 3 && memcmp(s + n - 3, "\xEF\xBF\xBD", 3) == 0; }

static int32_t edge_id(const tok_case *k, unsigned sel) {
    const int32_t nv = (int32_t)k->n_vocab;
    switch (sel % 16) {
    case 0: return -1;
    case 1: return -2;
    case 2: return INT32_MIN;
    case 3: return INT32_MAX;
    case 4: return nv;
    case 5: return nv + 1;
    case 6: return nv - 1;
    case 7: return 0;
    case 8: return mxl_tokenizer_bos_id(k->t);
    case 9: return mxl_tokenizer_eos_id(k->t);
    case 10: return mxl_tokenizer_unk_id(k->t);
    case 11: return mxl_tokenizer_pad_id(k->t);
    case 12: return 1 << 30;
    case 13: return -(1 << 30);
    case 14: return nv + 64;
    default: return (int32_t)(sel * 2654435761u % (uint32_t)(nv ? nv : 1));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    init_cases();
    g_debug = getenv("FUZZ_DETOK_DEBUG") != NULL;
    const tok_case *k = &g_cases[(data[0] & 7) % N_CASES];
    const bool skip = (data[0] >> 3) & 1;

    int32_t ids[MAX_IDS];
    size_t n_ids = 0;
    for (size_t i = 1; i < size && n_ids < MAX_IDS;) {
        uint8_t lead = data[i++];
        uint8_t b1 = i < size ? data[i] : 0;
        switch (lead >> 6) {
        case 0:
            i++;
            ids[n_ids++] = k->byte_id[b1];
            break;
        case 1:
            i++;
            ids[n_ids++] = k->special[b1 % k->n_special];
            break;
        case 2: {
            uint8_t b2 = i + 1 < size ? data[i + 1] : 0;
            i += 2;
            uint32_t v = ((uint32_t)(lead & 0x3f) << 16) | ((uint32_t)b1 << 8) | b2;
            ids[n_ids++] = (int32_t)(v % (k->n_vocab + 64));
            break;
        }
        default: ids[n_ids++] = edge_id(k, lead & 0x3f); break;
        }
    }

    mxl_error err = {0};
    mxl_detok_stream *s = NULL;
    FUZZ_ASSERT(mxl_detok_stream_create(k->t, skip, &s, &err) == MXL_OK);
    int32_t acc[MAX_IDS]; /* the ids the stream accepted */
    size_t n_acc = 0;
    char *out = NULL; /* E */
    size_t ol = 0;
    /* the current segment: acc[seg_start..] decoded with cont seg_cont must extend E[seg_base..] */
    size_t seg_start = 0, seg_base = 0, last_emit = 0;
    bool seg_cont = false, rewritten = false;
    for (size_t i = 0; i < n_ids; i++) {
        size_t before = ol;
        mxl_status st = mxl_detok_stream_step(s, ids[i], &out, &ol, &err);
        if (st != MXL_OK) {
            check_msg(&err);
            size_t tl;
            /* only an id without a token is refused, and it leaves no trace */
            FUZZ_ASSERT(ids[i] < 0 || mxl_tokenizer_token(k->t, ids[i], &tl) == NULL);
            FUZZ_ASSERT(ol == before);
            continue;
        }
        acc[n_acc++] = ids[i];
        FUZZ_ASSERT(ol == before || utf8_valid((const unsigned char *)out + before, ol - before));
        char *full = NULL;
        size_t fl = 0;
        FUZZ_ASSERT(tok_decode(k->t, acc + seg_start, n_acc - seg_start, skip, seg_cont, &full, &fl, &err) == MXL_OK);
        if (g_debug)
            fprintf(stderr, "step id %d: E=[%.*s] (%zu) segment from id %zu, base %zu, D=[%.*s] (%zu)\n", ids[i], (int)ol,
                    out ? out : "", ol, seg_start, seg_base, (int)fl, full, fl);
        FUZZ_ASSERT(utf8_valid((const unsigned char *)full, fl));
        const size_t el = before - seg_base; /* emitted in this segment before this step */
        if (el <= fl && memcmp(out ? out + seg_base : "", full, el) == 0) {
            /* no rewrite: E extends as far as D is final */
            FUZZ_ASSERT(ol - seg_base <= fl && memcmp(out ? out + seg_base : "", full, ol - seg_base) == 0);
            if (!ends_fffd(full, fl)) FUZZ_ASSERT(ol - seg_base == fl);
            if (ol > before) last_emit = n_acc;
        } else if (ends_fffd(full, fl)) {
            /* D rewrote emitted text but may still become its extension (an incomplete character) */
            FUZZ_ASSERT(ol == before);
        } else {
            /* a final rewrite: the ids since the last emission start a new segment, a continuation */
            mxl_free(full);
            seg_start = last_emit;
            seg_cont = true;
            seg_base = before;
            last_emit = n_acc;
            rewritten = true;
            FUZZ_ASSERT(tok_decode(k->t, acc + seg_start, n_acc - seg_start, skip, true, &full, &fl, &err) == MXL_OK);
            FUZZ_ASSERT(ol - before == fl && (fl == 0 || memcmp(out + before, full, fl) == 0));
        }
        mxl_free(full);
    }
    size_t before = ol;
    FUZZ_ASSERT(mxl_detok_stream_flush(s, &out, &ol, &err) == MXL_OK);
    FUZZ_ASSERT(ol == before || utf8_valid((const unsigned char *)out + before, ol - before));
    char *full = NULL;
    size_t fl = 0;
    FUZZ_ASSERT(tok_decode(k->t, acc + seg_start, n_acc - seg_start, skip, seg_cont, &full, &fl, &err) == MXL_OK);
    if (before - seg_base <= fl && memcmp(out ? out + seg_base : "", full, before - seg_base) == 0) {
        /* nothing is held back after the flush */
        FUZZ_ASSERT(ol - seg_base == fl && (fl == 0 || memcmp(out + seg_base, full, fl) == 0));
    } else {
        mxl_free(full);
        FUZZ_ASSERT(tok_decode(k->t, acc + last_emit, n_acc - last_emit, skip, true, &full, &fl, &err) == MXL_OK);
        FUZZ_ASSERT(ol - before == fl && (fl == 0 || memcmp(out + before, full, fl) == 0));
        rewritten = true;
    }
    mxl_free(full);
    /* without a rewrite, the whole stream is the public full decode */
    if (!rewritten) {
        FUZZ_ASSERT(mxl_tokenizer_decode(k->t, acc, n_acc, skip, &full, &fl, &err) == MXL_OK);
        FUZZ_ASSERT(ol == fl && (fl == 0 || memcmp(out, full, fl) == 0));
        mxl_free(full);
    }
    mxl_free(out);
    mxl_detok_stream_destroy(s);
    return 0;
}
