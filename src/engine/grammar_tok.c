/* grammar_tok.c - token texts for the grammar matcher (grammar_tok.h).
 *
 * The text of an id is its decode on its own with special tokens kept. The decoder is lossy for
 * pieces that are not whole UTF-8 characters (they come out as U+FFFD), but the matcher must see
 * the real bytes, so those ids are rebuilt from the raw vocabulary string: a "<0xXX>" byte token
 * is that byte, and a byte-level (GPT-2) piece maps each character back through the GPT-2 byte
 * table. Decoders that strip the leading space of a lone SentencePiece piece ("▁Hello" ->
 * "Hello") would hide a space the stream will show, so a raw piece starting with U+2581 keeps it. */
#include "engine/grammar_tok.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

typedef struct tok_ctx {
    const mxl_tokenizer *t;
    const int32_t *eog;
    size_t n_eog;
    char *buf;
    size_t cap;
} tok_ctx;

/* GPT-2 bytes_to_unicode inverse: the byte a code point stands for, -1 if none. */
static int gpt2_byte(uint32_t cp) {
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255)) return (int)cp;
    if (cp < 256 || cp > 256 + 67) return -1;
    /* the other 68 bytes (0-32, 127-160, 173) get 256, 257, ... in byte order */
    int k = (int)(cp - 256);
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        if (printable) continue;
        if (k-- == 0) return b;
    }
    return -1;
}

static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    if (s[0] < 0x80 || n < 2) return *cp = s[0], 1;
    if ((s[0] >> 5) == 6) return *cp = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F), 2;
    if ((s[0] >> 4) == 14 && n >= 3) return *cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F), 3;
    if ((s[0] >> 3) == 30 && n >= 4)
        return *cp = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F), 4;
    return *cp = s[0], 1;
}

static int hexd(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

static bool put(tok_ctx *c, size_t at, const void *p, size_t n) {
    if (at + n + 1 > c->cap) {
        size_t cap = c->cap ? c->cap : 256;
        while (cap < at + n + 1) cap *= 2;
        char *b = mxl_realloc(c->buf, cap);
        if (!b) return false;
        c->buf = b;
        c->cap = cap;
    }
    memcpy(c->buf + at, p, n);
    return true;
}

static mxl_status piece(void *ctx, int32_t id, const char **text, size_t *len, bool *is_eog, mxl_error *err) {
    tok_ctx *c = ctx;
    *is_eog = false;
    for (size_t i = 0; i < c->n_eog; i++)
        if (c->eog[i] == id) *is_eog = true;
    *text = "";
    *len = 0;
    size_t rlen = 0;
    const char *raw = mxl_tokenizer_token(c->t, id, &rlen);
    if (!raw) return MXL_OK; /* an id without a token: never allowed */
    char *dec = NULL;
    size_t dlen = 0;
    if (mxl_tokenizer_decode(c->t, &id, 1, false, &dec, &dlen, NULL) != MXL_OK) {
        mxl_free(dec);
        dec = NULL;
        dlen = 0;
    }
    size_t n = 0;
    bool lossy = dec && memmem(dec, dlen, "\xEF\xBF\xBD", 3) && !memmem(raw, rlen, "\xEF\xBF\xBD", 3);
    bool ok = true;
    if (lossy || !dec) {
        if (rlen == 6 && raw[0] == '<' && raw[1] == '0' && raw[2] == 'x' && raw[5] == '>' && hexd(raw[3]) >= 0 && hexd(raw[4]) >= 0) {
            char b = (char)(hexd(raw[3]) * 16 + hexd(raw[4]));
            ok = put(c, 0, &b, 1);
            n = 1;
        } else {
            /* byte-level: every character must map back to a byte */
            bool all = true;
            for (size_t i = 0; i < rlen && all && ok;) {
                uint32_t cp;
                i += utf8_next((const unsigned char *)raw + i, rlen - i, &cp);
                int b = gpt2_byte(cp);
                if (b < 0) all = false;
                else {
                    char ch = (char)b;
                    ok = put(c, n++, &ch, 1);
                }
            }
            if (!all) {
                n = 0;
                if (dec) ok = put(c, 0, dec, dlen), n = dlen;
            }
        }
    } else {
        bool spm_space = rlen >= 3 && !memcmp(raw, "\xE2\x96\x81", 3) && !(dlen && dec[0] == ' ');
        if (spm_space) ok = put(c, n++, " ", 1);
        if (ok && dlen) ok = put(c, n, dec, dlen), n += dlen;
    }
    mxl_free(dec);
    if (!ok) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    *text = c->buf;
    *len = n;
    return MXL_OK;
}

mxl_status mxl_grammar_vocab_from_tokenizer(const mxl_tokenizer *t, int32_t n_vocab, const int32_t *eog, size_t n_eog,
                                            mxl_grammar_vocab **out, mxl_error *err) {
    tok_ctx c = {.t = t, .eog = eog, .n_eog = n_eog};
    mxl_status st = mxl_grammar_vocab_create(n_vocab, piece, &c, out, err);
    mxl_free(c.buf);
    return st;
}
