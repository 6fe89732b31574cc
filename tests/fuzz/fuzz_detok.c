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
 *   11: (lead & 0x3f) picks an edge id: negatives, INT32_MIN / MAX, n_vocab +- 1, 2^30, bos / eos / unk / pad
 * The ids are fed one at a time; flush at the end.
 *
 * Asserted (abort on violation): the stream's contract as tests/fuzz/detok_check.h states it
 * (refused ids are exactly those without a token and leave no trace; every piece is valid UTF-8;
 * the pieces equal the full decode as far as it is final, and all of it after the flush; where a
 * decoder rewrites emitted text - ByteFallback's invalid byte runs - the step emits the decode of
 * the ids since the last emission as a continuation, and never fails). FUZZ_DETOK_DEBUG=1 prints
 * every step.
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
#include "tokenizer/tokenizer.h"


#include "detok_check.h"

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
    detok_debug = getenv("FUZZ_DETOK_DEBUG") != NULL;
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

    detok_check(k->t, ids, n_ids, skip);
    return 0;
}
