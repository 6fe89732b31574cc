/* fuzz_tokenizer.c - libFuzzer harness for tokenizer.json loading and encode/decode round trips.
 *
 * Input layout: the first byte selects the mode.
 *   mode even: the rest is a tokenizer.json; when it loads, a few fixed texts are encoded (with
 *              and without special tokens / post-processor) and decoded, and the streaming
 *              detokenizer must keep its contract (detok_check.h: the full decode, or a
 *              continuation after a decoder rewrote emitted text). Errors must be one-line messages.
 *   mode odd:  the rest is text for a fixed byte-level BPE tokenizer built at start-up (256 byte
 *              tokens, a few merges, an added special token, no normalizer): decode(encode(text)) must equal
 *              the text with invalid UTF-8 replaced by U+FFFD (byte-level BPE round-trips), and
 *              streaming must agree with the full decode.
 * Seeds: tests/fuzz/corpus/tokenizer/.
 *
 *   make build/fuzz/fuzz_tokenizer
 *   build/fuzz/fuzz_tokenizer -max_len=8192 tests/fuzz/corpus/tokenizer */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/tokenizer.h"


#include "detok_check.h"

/* GPT-2 byte -> char table, to build the fixed byte-level vocabulary. */
static unsigned byte_cp(unsigned b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return b;
    unsigned n = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) n++;
    return 256 + n;
}

static void put_json_cp(char **p, unsigned cp) {
    if (cp == '"' || cp == '\\') *p += sprintf(*p, "\\%c", (char)cp);
    else if (cp < 0x20 || cp >= 0x7F) *p += sprintf(*p, "\\u%04x", cp);
    else *p += sprintf(*p, "%c", (char)cp);
}

static mxl_tokenizer *g_fixed;

static mxl_tokenizer *build_fixed(void) {
    static char buf[65536];
    char *p = buf;
    p += sprintf(p, "{\"added_tokens\":[{\"id\":260,\"content\":\"<|end|>\",\"single_word\":false,"
                    "\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true}],"
                    "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
                    "\"decoder\":{\"type\":\"ByteLevel\"},"
                    "\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (unsigned b = 0; b < 256; b++) {
        *p++ = '"';
        put_json_cp(&p, byte_cp(b));
        p += sprintf(p, "\":%u,", b);
    }
    /* merges: "h e" -> he (256), "he l" -> hel (257), "Ġ t" (258), "Ġt h" (259) */
    p += sprintf(p, "\"he\":256,\"hel\":257,\"\\u0120t\":258,\"\\u0120th\":259},"
                    "\"merges\":[\"h e\",\"he l\",\"\\u0120 t\",\"\\u0120t h\"]}}");
    mxl_tokenizer *t = NULL;
    mxl_error err = {0};
    if (mxl_tokenizer_load_json_bytes(buf, (size_t)(p - buf), "fixed.json", &t, &err) != MXL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        abort();
    }
    return t;
}

/* The stream over ids keeps its contract (detok_check.h): the full decode, or after a decoder's
 * rewrite of emitted text (ByteFallback, a right Strip) a continuation from there. */
static void check_stream(const mxl_tokenizer *t, const mxl_token_ids *ids) { detok_check(t, ids->ids, ids->n, false); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    mxl_error err = {0};
    if ((data[0] & 1) == 0) {
        mxl_tokenizer *t = NULL;
        mxl_status st = mxl_tokenizer_load_json_bytes((const char *)data + 1, size - 1, "fuzz.json", &t, &err);
        if (st != MXL_OK) {
            check_msg(&err);
            FUZZ_ASSERT(t == NULL);
            return 0;
        }
        static const char *texts[] = {"Hello world", " a  b\tc\n", "<s>x</s>", "\xC3\xA9\xE4\xB8\xAD 123", ""};
        for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
            for (unsigned fl = 0; fl < 4; fl++) {
                mxl_token_ids ids = {0};
                st = mxl_tokenizer_encode(t, texts[k], strlen(texts[k]), fl, &ids, &err);
                if (st != MXL_OK) {
                    check_msg(&err);
                    mxl_token_ids_free(&ids);
                    continue;
                }
                char *dec = NULL;
                size_t dl = 0;
                st = mxl_tokenizer_decode(t, ids.ids, ids.n, fl & 1, &dec, &dl, &err);
                if (st == MXL_OK) {
                    if (!(fl & 1)) check_stream(t, &ids);
                } else {
                    check_msg(&err);
                }
                mxl_free(dec);
                mxl_token_ids_free(&ids);
            }
        }
        mxl_tokenizer_destroy(t);
        return 0;
    }
    if (!g_fixed) g_fixed = build_fixed();
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    mxl_token_ids ids = {0};
    FUZZ_ASSERT(mxl_tokenizer_encode(g_fixed, text, n, 0, &ids, &err) == MXL_OK);
    char *dec = NULL;
    size_t dl = 0;
    FUZZ_ASSERT(mxl_tokenizer_decode(g_fixed, ids.ids, ids.n, false, &dec, &dl, &err) == MXL_OK);
    /* no normalizer: byte-level BPE gives back exactly the (U+FFFD-repaired) text */
    char *exp = mxl_malloc(3 * n + 1);
    FUZZ_ASSERT(exp != NULL);
    size_t el = detok_lossy((const unsigned char *)text, n, exp);
    FUZZ_ASSERT(dl == el && (el == 0 || memcmp(dec, exp, el) == 0));
    mxl_free(exp);
    /* byte-level BPE never rewrites what was streamed (the step-by-step oracle is quadratic) */
    if (ids.n <= 64) FUZZ_ASSERT(!detok_check(g_fixed, ids.ids, ids.n, false));
    else detok_check_exact(g_fixed, ids.ids, ids.n, false);
    mxl_free(dec);
    mxl_token_ids_free(&ids);
    return 0;
}
