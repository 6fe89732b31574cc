/* fuzz_spiece.c - libFuzzer harness for SentencePiece model files (tokenizer/loader_spm.c: the
 * ModelProto reader and the tokenizer built from it, as a SigLIP directory without
 * tokenizer.json loads). The input is the model file's bytes; when it loads, a few fixed texts
 * are encoded (with </s>) and decoded. Errors must be one-line messages.
 * Seeds: tests/fuzz/corpus/spiece/ (the SigLIP fixture's spiece.model).
 *
 *   make build/fuzz/fuzz_spiece
 *   build/fuzz/fuzz_spiece tests/fuzz/corpus/spiece */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

#define FUZZ_ASSERT(c) ((c) ? (void)0 : fuzz_fail(#c, __LINE__))

static void fuzz_fail(const char *expr, int line) {
    fprintf(stderr, "fuzz_spiece.c:%d: invariant failed: %s\n", line, expr);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mxl_tokenizer *t = NULL;
    mxl_error err;
    mxl_error_clear(&err);
    if (mxl_tokenizer_load_siglip_spm(data, size, "spiece.model", true, "</s>", &t, &err) != MXL_OK) {
        const size_t n = strnlen(err.msg, sizeof err.msg);
        FUZZ_ASSERT(n > 0 && n < sizeof err.msg);
        FUZZ_ASSERT(memchr(err.msg, '\n', n) == NULL);
        return 0;
    }
    static const char *const texts[] = {"a photo of a cat", "  Spaced,  OUT!\t", "", "caf\xc3\xa9 \xef\xac\x81sh \xe2\x96\x81"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        mxl_token_ids ids = {0};
        if (mxl_tokenizer_encode(t, texts[i], strlen(texts[i]), MXL_TOK_ADD_SPECIAL, &ids, &err) == MXL_OK) {
            char *s = NULL;
            size_t len = 0;
            if (mxl_tokenizer_decode(t, ids.ids, ids.n, false, &s, &len, &err) == MXL_OK) mxl_free(s);
        }
        mxl_token_ids_free(&ids);
    }
    mxl_tokenizer_destroy(t);
    return 0;
}
