/* loader_json.c - reads a Hugging Face tokenizer.json (jansson) into an mxl_tokenizer.
 *
 * Every component is checked as it is read; a missing field, a wrong type, an unknown component
 * type or a bad regex is one MXL_ERR_FORMAT / MXL_ERR_UNSUPPORTED line naming the JSON path of the
 * component, e.g. "tok.json: pre_tokenizer.pretokenizers[0] (Split): bad regex at offset 3: ...".
 * Defaults follow HF's serde defaults (ByteLevel.use_regex=true, Metaspace.split=true,
 * WordPiece prefix "##" and max_input_chars_per_word 100, ...). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "io/json_read.h"
#include "io/mapped_file.h"
#include "tokenizer/json_fast.h"
#include "tokenizer/tok_internal.h"

typedef struct ld {
    mxl_tokenizer *t;
    mxl_error *err;
    /* spans of model.vocab / model.merges read by json_fast.c instead of jansson (0,0 = none) */
    const char *src;
    size_t src_len;
    size_t vocab_s, vocab_e, merges_s, merges_e;
    uint64_t alloc_failed0; /* mxl_alloc_thread_failures() at the start */
} ld;

static mxl_status fail(ld *c, mxl_status st, const char *path, const char *fmt, const char *a) {
    /* a scanner that could not allocate reports what it saw as malformed: say what it was */
    if (mxl_alloc_thread_failures() != c->alloc_failed0)
        return mxl_error_set(c->err, MXL_ERR_NOMEM, "%s: %s: out of memory", c->t->name, path);
    char msg[300];
    snprintf(msg, sizeof(msg), fmt, a ? a : "");
    return mxl_error_set(c->err, st, "%s: %s: %s", c->t->name, path, msg);
}

static const char *jstr(json_t *o, const char *k, size_t *len) {
    json_t *v = json_object_get(o, k);
    if (!json_is_string(v)) return NULL;
    if (len) *len = json_string_length(v);
    return json_string_value(v);
}

static bool jbool(json_t *o, const char *k, bool dflt) {
    json_t *v = json_object_get(o, k);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static char *dupn(const char *s, size_t n) {
    char *p = mxl_malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* {"String": s} | {"Regex": r} -> compiled regex */
static mxl_status pattern(ld *c, json_t *o, const char *path, tok_regex **out) {
    json_t *p = json_object_get(o, "pattern");
    if (!json_is_object(p)) return fail(c, MXL_ERR_FORMAT, path, "missing \"pattern\" object%s", NULL);
    json_t *s = json_object_get(p, "String"), *r = json_object_get(p, "Regex");
    json_t *v = json_is_string(s) ? s : r;
    if (!json_is_string(v))
        return fail(c, MXL_ERR_FORMAT, path, "\"pattern\" needs a \"String\" or \"Regex\" string%s", NULL);
    char eb[200];
    mxl_status st = tok_regex_compile(json_string_value(v), json_string_length(v), v == s, out, eb, sizeof(eb));
    if (st != MXL_OK) return fail(c, st, path, "%s", eb);
    return MXL_OK;
}

static bool behavior(const char *s, tok_split_behavior *b) {
    static const struct {
        const char *n;
        tok_split_behavior b;
    } tab[] = {{"Removed", TOK_SPLIT_REMOVED},
               {"Isolated", TOK_SPLIT_ISOLATED},
               {"MergedWithPrevious", TOK_SPLIT_MERGED_WITH_PREVIOUS},
               {"MergedWithNext", TOK_SPLIT_MERGED_WITH_NEXT},
               {"Contiguous", TOK_SPLIT_CONTIGUOUS}};
    for (size_t i = 0; s && i < sizeof(tab) / sizeof(tab[0]); i++)
        if (strcmp(s, tab[i].n) == 0) {
            *b = tab[i].b;
            return true;
        }
    return false;
}

static bool one_char(const char *s, size_t n, uint32_t *cp) {
    if (!s || !n || !tok_utf8_valid(s, n)) return false;
    size_t k = tok_utf8_decode(s, n, cp);
    return k == n;
}

static mxl_status prepend_scheme(ld *c, json_t *o, const char *path, tok_prepend_scheme *ps) {
    const char *s = jstr(o, "prepend_scheme", NULL);
    if (!s) {
        *ps = jbool(o, "add_prefix_space", true) ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
        return MXL_OK;
    }
    if (strcmp(s, "always") == 0) *ps = TOK_PREPEND_ALWAYS;
    else if (strcmp(s, "first") == 0) *ps = TOK_PREPEND_FIRST;
    else if (strcmp(s, "never") == 0) *ps = TOK_PREPEND_NEVER;
    else return fail(c, MXL_ERR_FORMAT, path, "unknown prepend_scheme \"%s\"", s);
    return MXL_OK;
}

/* ---- normalizers ---- */
static mxl_status load_norm(ld *c, json_t *o, const char *path, tok_normalizer **out) {
    *out = NULL;
    if (!json_is_object(o)) return fail(c, MXL_ERR_FORMAT, path, "expected an object%s", NULL);
    const char *type = jstr(o, "type", NULL);
    if (!type) return fail(c, MXL_ERR_FORMAT, path, "missing \"type\"%s", NULL);
    char p2[256];
    snprintf(p2, sizeof(p2), "%s (%s)", path, type);
    tok_normalizer *n = mxl_calloc(1, sizeof(*n));
    if (!n) return fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
    mxl_status st = MXL_OK;
    if (strcmp(type, "Sequence") == 0) {
        n->kind = TOK_NORM_SEQUENCE;
        json_t *arr = json_object_get(o, "normalizers");
        if (!json_is_array(arr)) {
            st = fail(c, MXL_ERR_FORMAT, p2, "missing \"normalizers\" list%s", NULL);
        } else {
            n->children = mxl_calloc(json_array_size(arr) + 1, sizeof(*n->children));
            if (!n->children) st = fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
            for (size_t i = 0; st == MXL_OK && i < json_array_size(arr); i++) {
                char p3[256];
                snprintf(p3, sizeof(p3), "%s.normalizers[%zu]", path, i);
                st = load_norm(c, json_array_get(arr, i), p3, &n->children[i]);
                if (st == MXL_OK) n->n_children++;
            }
        }
    } else if (strcmp(type, "NFC") == 0) n->kind = TOK_NORM_NFC;
    else if (strcmp(type, "NFD") == 0) n->kind = TOK_NORM_NFD;
    else if (strcmp(type, "NFKC") == 0) n->kind = TOK_NORM_NFKC;
    else if (strcmp(type, "NFKD") == 0) n->kind = TOK_NORM_NFKD;
    else if (strcmp(type, "Lowercase") == 0) n->kind = TOK_NORM_LOWERCASE;
    else if (strcmp(type, "StripAccents") == 0) n->kind = TOK_NORM_STRIP_ACCENTS;
    else if (strcmp(type, "ByteLevel") == 0) n->kind = TOK_NORM_BYTE_LEVEL;
    else if (strcmp(type, "Strip") == 0) {
        n->kind = TOK_NORM_STRIP;
        n->left = jbool(o, "strip_left", true);
        n->right = jbool(o, "strip_right", true);
    } else if (strcmp(type, "Replace") == 0) {
        n->kind = TOK_NORM_REPLACE;
        size_t l;
        const char *s = jstr(o, "content", &l);
        if (!s) st = fail(c, MXL_ERR_FORMAT, p2, "missing \"content\" string%s", NULL);
        else if (!(n->content = dupn(s, l))) st = fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
        else {
            n->content_len = l;
            st = pattern(c, o, p2, &n->re);
        }
    } else if (strcmp(type, "Prepend") == 0) {
        n->kind = TOK_NORM_PREPEND;
        size_t l;
        const char *s = jstr(o, "prepend", &l);
        if (!s) st = fail(c, MXL_ERR_FORMAT, p2, "missing \"prepend\" string%s", NULL);
        else if (!(n->content = dupn(s, l))) st = fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
        else n->content_len = l;
    } else if (strcmp(type, "BertNormalizer") == 0) {
        n->kind = TOK_NORM_BERT;
        n->clean_text = jbool(o, "clean_text", true);
        n->handle_chinese = jbool(o, "handle_chinese_chars", true);
        n->lowercase = jbool(o, "lowercase", true);
        json_t *sa = json_object_get(o, "strip_accents");
        n->strip_accents = json_is_boolean(sa) ? (json_is_true(sa) ? 1 : 0) : -1;
    } else if (strcmp(type, "Precompiled") == 0) {
        n->kind = TOK_NORM_PRECOMPILED;
        size_t l;
        const char *s = jstr(o, "precompiled_charsmap", &l), *why = NULL;
        if (!s) st = fail(c, MXL_ERR_FORMAT, p2, "missing \"precompiled_charsmap\" string%s", NULL);
        else if ((st = tok_precompiled_parse(s, l, &n->charsmap, &why)) != MXL_OK) st = fail(c, st, p2, "%s", why);
    } else {
        st = fail(c, MXL_ERR_UNSUPPORTED, p2, "unsupported normalizer type%s", NULL);
    }
    if (st != MXL_OK) {
        tok_normalizer_free(n);
        return st;
    }
    *out = n;
    return MXL_OK;
}

/* ---- pre-tokenizers ---- */
static mxl_status load_pre(ld *c, json_t *o, const char *path, tok_pretok **out) {
    *out = NULL;
    if (!json_is_object(o)) return fail(c, MXL_ERR_FORMAT, path, "expected an object%s", NULL);
    const char *type = jstr(o, "type", NULL);
    if (!type) return fail(c, MXL_ERR_FORMAT, path, "missing \"type\"%s", NULL);
    char p2[256];
    snprintf(p2, sizeof(p2), "%s (%s)", path, type);
    tok_pretok *p = mxl_calloc(1, sizeof(*p));
    if (!p) return fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
    mxl_status st = MXL_OK;
    char eb[200];
    if (strcmp(type, "Sequence") == 0) {
        p->kind = TOK_PRE_SEQUENCE;
        json_t *arr = json_object_get(o, "pretokenizers");
        if (!json_is_array(arr)) {
            st = fail(c, MXL_ERR_FORMAT, p2, "missing \"pretokenizers\" list%s", NULL);
        } else {
            p->children = mxl_calloc(json_array_size(arr) + 1, sizeof(*p->children));
            if (!p->children) st = fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
            for (size_t i = 0; st == MXL_OK && i < json_array_size(arr); i++) {
                char p3[256];
                snprintf(p3, sizeof(p3), "%s.pretokenizers[%zu]", path, i);
                st = load_pre(c, json_array_get(arr, i), p3, &p->children[i]);
                if (st == MXL_OK) p->n_children++;
            }
        }
    } else if (strcmp(type, "ByteLevel") == 0) {
        p->kind = TOK_PRE_BYTE_LEVEL;
        p->add_prefix_space = jbool(o, "add_prefix_space", true);
        p->use_regex = jbool(o, "use_regex", true);
        if (p->use_regex) {
            st = tok_regex_compile(tok_gpt2_pattern, strlen(tok_gpt2_pattern), false, &p->re, eb, sizeof(eb));
            if (st != MXL_OK) st = fail(c, st, p2, "%s", eb);
        }
    } else if (strcmp(type, "Split") == 0) {
        p->kind = TOK_PRE_SPLIT;
        p->invert = jbool(o, "invert", false);
        if (!behavior(jstr(o, "behavior", NULL), &p->behavior))
            st = fail(c, MXL_ERR_FORMAT, p2, "missing or unknown \"behavior\"%s", NULL);
        else
            st = pattern(c, o, p2, &p->re);
    } else if (strcmp(type, "Metaspace") == 0) {
        p->kind = TOK_PRE_METASPACE;
        size_t l;
        const char *r = jstr(o, "replacement", &l);
        if (!r) r = "\xE2\x96\x81", l = 3;
        if (!one_char(r, l, &p->replacement))
            st = fail(c, MXL_ERR_FORMAT, p2, "\"replacement\" must be one character%s", NULL);
        else
            st = prepend_scheme(c, o, p2, &p->prepend);
        p->split = jbool(o, "split", true);
    } else if (strcmp(type, "Whitespace") == 0) {
        p->kind = TOK_PRE_WHITESPACE;
        static const char wpat[] = "\\w+|[^\\w\\s]+";
        st = tok_regex_compile(wpat, strlen(wpat), false, &p->re, eb, sizeof(eb));
        if (st != MXL_OK) st = fail(c, st, p2, "%s", eb);
    } else if (strcmp(type, "WhitespaceSplit") == 0) {
        p->kind = TOK_PRE_WHITESPACE_SPLIT;
    } else if (strcmp(type, "Punctuation") == 0) {
        p->kind = TOK_PRE_PUNCTUATION;
        const char *b = jstr(o, "behavior", NULL);
        p->behavior = TOK_SPLIT_ISOLATED;
        if (b && !behavior(b, &p->behavior)) st = fail(c, MXL_ERR_FORMAT, p2, "unknown behavior \"%s\"", b);
    } else if (strcmp(type, "Digits") == 0) {
        p->kind = TOK_PRE_DIGITS;
        p->individual_digits = jbool(o, "individual_digits", false);
    } else if (strcmp(type, "BertPreTokenizer") == 0) {
        p->kind = TOK_PRE_BERT;
    } else if (strcmp(type, "CharDelimiterSplit") == 0) {
        p->kind = TOK_PRE_CHAR_DELIMITER;
        size_t l;
        const char *d = jstr(o, "delimiter", &l);
        if (!one_char(d, l, &p->replacement))
            st = fail(c, MXL_ERR_FORMAT, p2, "\"delimiter\" must be one character%s", NULL);
    } else {
        st = fail(c, MXL_ERR_UNSUPPORTED, p2, "unsupported pre-tokenizer type%s", NULL);
    }
    if (st != MXL_OK) {
        tok_pretok_free(p);
        return st;
    }
    *out = p;
    return MXL_OK;
}

/* ---- post-processors ---- */
static mxl_status pair_id(ld *c, json_t *o, const char *k, const char *path, int32_t *id) {
    json_t *a = json_object_get(o, k);
    json_t *v = json_array_get(a, 1);
    if (!json_is_array(a) || !json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) >= (1 << 30))
        return fail(c, MXL_ERR_FORMAT, path, "\"%s\" must be [token, id]", k);
    *id = (int32_t)json_integer_value(v);
    return MXL_OK;
}

static mxl_status load_post(ld *c, json_t *o, const char *path, tok_post **out) {
    *out = NULL;
    if (!json_is_object(o)) return fail(c, MXL_ERR_FORMAT, path, "expected an object%s", NULL);
    const char *type = jstr(o, "type", NULL);
    if (!type) return fail(c, MXL_ERR_FORMAT, path, "missing \"type\"%s", NULL);
    char p2[256];
    snprintf(p2, sizeof(p2), "%s (%s)", path, type);
    tok_post *p = mxl_calloc(1, sizeof(*p));
    if (!p) return fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
    mxl_status st = MXL_OK;
    if (strcmp(type, "Sequence") == 0) {
        p->kind = TOK_POST_SEQUENCE;
        json_t *arr = json_object_get(o, "processors");
        if (!json_is_array(arr)) {
            st = fail(c, MXL_ERR_FORMAT, p2, "missing \"processors\" list%s", NULL);
        } else {
            p->children = mxl_calloc(json_array_size(arr) + 1, sizeof(*p->children));
            if (!p->children) st = fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
            for (size_t i = 0; st == MXL_OK && i < json_array_size(arr); i++) {
                char p3[256];
                snprintf(p3, sizeof(p3), "%s.processors[%zu]", path, i);
                st = load_post(c, json_array_get(arr, i), p3, &p->children[i]);
                if (st == MXL_OK) p->n_children++;
            }
        }
    } else if (strcmp(type, "ByteLevel") == 0) {
        p->kind = TOK_POST_BYTE_LEVEL;
    } else if (strcmp(type, "BertProcessing") == 0 || strcmp(type, "RobertaProcessing") == 0) {
        p->kind = type[0] == 'B' ? TOK_POST_BERT : TOK_POST_ROBERTA;
        st = pair_id(c, o, "cls", p2, &p->cls_id);
        if (st == MXL_OK) st = pair_id(c, o, "sep", p2, &p->sep_id);
    } else if (strcmp(type, "TemplateProcessing") == 0) {
        p->kind = TOK_POST_TEMPLATE;
        json_t *single = json_object_get(o, "single"), *sp = json_object_get(o, "special_tokens");
        if (!json_is_array(single) || (sp && !json_is_object(sp))) {
            st = fail(c, MXL_ERR_FORMAT, p2, "needs a \"single\" list and a \"special_tokens\" object%s", NULL);
        }
        for (size_t i = 0; st == MXL_OK && i < json_array_size(single); i++) {
            json_t *it = json_array_get(single, i);
            json_t *stok = json_object_get(it, "SpecialToken");
            if (json_object_get(it, "Sequence")) {
                int32_t m = -1;
                int32_t *v = mxl_realloc(p->single, (p->n_single + 1) * sizeof(int32_t));
                if (!v) { st = fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL); break; }
                p->single = v;
                p->single[p->n_single++] = m;
            } else if (stok) {
                const char *name = jstr(stok, "id", NULL);
                json_t *ids = json_object_get(json_object_get(sp, name ? name : ""), "ids");
                if (!name || !json_is_array(ids)) {
                    st = fail(c, MXL_ERR_FORMAT, p2, "special token \"%s\" is not in special_tokens", name ? name : "?");
                    break;
                }
                for (size_t k = 0; k < json_array_size(ids); k++) {
                    json_t *iv = json_array_get(ids, k);
                    if (!json_is_integer(iv) || json_integer_value(iv) < 0 || json_integer_value(iv) >= (1 << 30)) {
                        st = fail(c, MXL_ERR_FORMAT, p2, "special token \"%s\" has a bad id", name);
                        break;
                    }
                    int32_t *v = mxl_realloc(p->single, (p->n_single + 1) * sizeof(int32_t));
                    if (!v) { st = fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL); break; }
                    p->single = v;
                    p->single[p->n_single++] = (int32_t)json_integer_value(iv);
                }
            } else {
                st = fail(c, MXL_ERR_FORMAT, p2, "template items are SpecialToken or Sequence%s", NULL);
            }
        }
    } else {
        st = fail(c, MXL_ERR_UNSUPPORTED, p2, "unsupported post-processor type%s", NULL);
    }
    if (st != MXL_OK) {
        tok_post_free(p);
        return st;
    }
    *out = p;
    return MXL_OK;
}

/* ---- decoders ---- */
static mxl_status load_dec(ld *c, json_t *o, const char *path, tok_decoder **out) {
    *out = NULL;
    if (!json_is_object(o)) return fail(c, MXL_ERR_FORMAT, path, "expected an object%s", NULL);
    const char *type = jstr(o, "type", NULL);
    if (!type) return fail(c, MXL_ERR_FORMAT, path, "missing \"type\"%s", NULL);
    char p2[256];
    snprintf(p2, sizeof(p2), "%s (%s)", path, type);
    tok_decoder *d = mxl_calloc(1, sizeof(*d));
    if (!d) return fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
    mxl_status st = MXL_OK;
    size_t l;
    const char *s;
    if (strcmp(type, "Sequence") == 0) {
        d->kind = TOK_DEC_SEQUENCE;
        json_t *arr = json_object_get(o, "decoders");
        if (!json_is_array(arr)) {
            st = fail(c, MXL_ERR_FORMAT, p2, "missing \"decoders\" list%s", NULL);
        } else {
            d->children = mxl_calloc(json_array_size(arr) + 1, sizeof(*d->children));
            if (!d->children) st = fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
            for (size_t i = 0; st == MXL_OK && i < json_array_size(arr); i++) {
                char p3[256];
                snprintf(p3, sizeof(p3), "%s.decoders[%zu]", path, i);
                st = load_dec(c, json_array_get(arr, i), p3, &d->children[i]);
                if (st == MXL_OK) d->n_children++;
            }
        }
    } else if (strcmp(type, "ByteLevel") == 0) d->kind = TOK_DEC_BYTE_LEVEL;
    else if (strcmp(type, "ByteFallback") == 0) d->kind = TOK_DEC_BYTE_FALLBACK;
    else if (strcmp(type, "Fuse") == 0) d->kind = TOK_DEC_FUSE;
    else if (strcmp(type, "Metaspace") == 0) {
        d->kind = TOK_DEC_METASPACE;
        s = jstr(o, "replacement", &l);
        if (!s) s = "\xE2\x96\x81", l = 3;
        if (!one_char(s, l, &d->ch)) st = fail(c, MXL_ERR_FORMAT, p2, "\"replacement\" must be one character%s", NULL);
        else st = prepend_scheme(c, o, p2, &d->prepend);
    } else if (strcmp(type, "Strip") == 0) {
        d->kind = TOK_DEC_STRIP;
        s = jstr(o, "content", &l);
        json_t *a = json_object_get(o, "start"), *b = json_object_get(o, "stop");
        if (!one_char(s, l, &d->ch) || !json_is_integer(a) || !json_is_integer(b) ||
            json_integer_value(a) < 0 || json_integer_value(b) < 0)
            st = fail(c, MXL_ERR_FORMAT, p2, "needs one-character \"content\" and integer \"start\"/\"stop\"%s", NULL);
        else {
            d->start = (size_t)json_integer_value(a);
            d->stop = (size_t)json_integer_value(b);
        }
    } else if (strcmp(type, "Replace") == 0) {
        d->kind = TOK_DEC_REPLACE;
        s = jstr(o, "content", &l);
        if (!s) st = fail(c, MXL_ERR_FORMAT, p2, "missing \"content\" string%s", NULL);
        else if (!(d->content = dupn(s, l))) st = fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
        else {
            d->content_len = l;
            st = pattern(c, o, p2, &d->re);
        }
    } else if (strcmp(type, "WordPiece") == 0) {
        d->kind = TOK_DEC_WORDPIECE;
        s = jstr(o, "prefix", &l);
        if (!s) s = "##", l = 2;
        d->cleanup = jbool(o, "cleanup", true);
        if (!(d->content = dupn(s, l))) st = fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
        d->content_len = l;
    } else if (strcmp(type, "BPEDecoder") == 0) {
        d->kind = TOK_DEC_BPE;
        s = jstr(o, "suffix", &l);
        if (!s) s = "</w>", l = 4;
        if (!(d->content = dupn(s, l))) st = fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
        d->content_len = l;
    } else if (strcmp(type, "CTC") == 0) {
        d->kind = TOK_DEC_CTC;
        s = jstr(o, "pad_token", &l);
        if (!s) s = "<pad>", l = 5;
        d->content = dupn(s, l);
        d->content_len = l;
        s = jstr(o, "word_delimiter_token", &l);
        if (!s) s = "|", l = 1;
        d->content2 = dupn(s, l);
        d->content2_len = l;
        d->cleanup = jbool(o, "cleanup", true);
        if (!d->content || !d->content2) st = fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
    } else {
        st = fail(c, MXL_ERR_UNSUPPORTED, p2, "unsupported decoder type%s", NULL);
    }
    if (st != MXL_OK) {
        tok_decoder_free(d);
        return st;
    }
    *out = d;
    return MXL_OK;
}

/* ---- model ---- */
static mxl_status load_vocab(ld *c, json_t *v) {
    const char *k;
    json_t *val;
    json_object_foreach(v, k, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= (1 << 30))
            return fail(c, MXL_ERR_FORMAT, "model.vocab", "token \"%.80s\" has no valid id", k);
        if (!tok_vocab_set(c->t, k, strlen(k), (int32_t)json_integer_value(val), false))
            return fail(c, MXL_ERR_NOMEM, "model.vocab", "out of memory%s", NULL);
    }
    return MXL_OK;
}

/* model.vocab read straight from the source bytes: { "token": id, ... }. Entries are parsed
 * TOK_MAP_BATCH at a time and their table slots prefetched before they are put, so the cache
 * misses of a batch overlap. */
typedef struct vocab_batch {
    mxl_strbuf text;
    size_t n, off[TOK_MAP_BATCH], len[TOK_MAP_BATCH];
    int32_t id[TOK_MAP_BATCH];
} vocab_batch;

static mxl_status vocab_flush(ld *c, vocab_batch *vb) {
    for (size_t i = 0; i < vb->n; i++) tok_map_prefetch(&c->t->vocab, vb->text.p + vb->off[i], vb->len[i]);
    for (size_t i = 0; i < vb->n; i++)
        if (!tok_vocab_set(c->t, vb->text.p + vb->off[i], vb->len[i], vb->id[i], false))
            return fail(c, MXL_ERR_NOMEM, "model.vocab", "out of memory%s", NULL);
    vb->n = 0;
    vb->text.n = 0;
    return MXL_OK;
}

static mxl_status vocab_fault(ld *c, vocab_batch *vb, const char *fmt, const char *a) {
    mxl_status st = vocab_flush(c, vb);
    return st != MXL_OK ? st : fail(c, MXL_ERR_FORMAT, "model.vocab", fmt, a);
}

static mxl_status fast_vocab(ld *c) {
    const char *s = c->src;
    size_t n = c->vocab_e, i = tok_json_ws(s, n, c->vocab_s + 1);
    mxl_strbuf k = {0};
    vocab_batch vb = {0};
    mxl_status st = MXL_OK;
    if (i < n && s[i] == '}') return MXL_OK;
    while (st == MXL_OK) {
        i = tok_json_string(s, n, i, &k);
        if (i == TOK_JSON_BAD) {
            st = vocab_fault(c, &vb, "malformed token string%s", NULL);
            break;
        }
        i = tok_json_ws(s, n, i);
        if (i >= n || s[i] != ':') {
            st = vocab_fault(c, &vb, "expected ':' after \"%.80s\"", k.p);
            break;
        }
        i = tok_json_ws(s, n, i + 1);
        uint64_t v = 0;
        size_t d = i;
        while (i < n && s[i] >= '0' && s[i] <= '9' && v < (1u << 30)) v = v * 10 + (uint64_t)(s[i++] - '0');
        if (i == d || v >= (1u << 30) || (i < n && (s[i] == '.' || s[i] == 'e' || s[i] == 'E' || (s[i] >= '0' && s[i] <= '9')))) {
            st = vocab_fault(c, &vb, "token \"%.80s\" has no valid id", k.p ? k.p : "");
            break;
        }
        vb.off[vb.n] = vb.text.n;
        vb.len[vb.n] = k.n;
        vb.id[vb.n] = (int32_t)v;
        if (!mxl_strbuf_append(&vb.text, k.p ? k.p : "", k.n)) {
            st = fail(c, MXL_ERR_NOMEM, "model.vocab", "out of memory%s", NULL);
            break;
        }
        if (++vb.n == TOK_MAP_BATCH && (st = vocab_flush(c, &vb)) != MXL_OK) break;
        i = tok_json_ws(s, n, i);
        if (i < n && s[i] == ',') {
            i = tok_json_ws(s, n, i + 1);
            continue;
        }
        if (i < n && s[i] == '}') break;
        st = vocab_fault(c, &vb, "expected ',' or '}'%s", NULL);
    }
    if (st == MXL_OK) st = vocab_flush(c, &vb);
    mxl_strbuf_free(&k);
    mxl_strbuf_free(&vb.text);
    return st;
}

/* Unigram: "vocab": [[piece, score], ...] (id = index), "unk_id": int | null, "byte_fallback". */
static mxl_status load_unigram(ld *c, json_t *m, const char *p2) {
    mxl_tokenizer *t = c->t;
    json_t *vocab = json_object_get(m, "vocab");
    if (!json_is_array(vocab)) return fail(c, MXL_ERR_FORMAT, p2, "missing \"vocab\" list%s", NULL);
    size_t n = json_array_size(vocab);
    if (n >= (1u << 30)) return fail(c, MXL_ERR_FORMAT, p2, "vocabulary too large%s", NULL);
    t->model.kind = TOK_MODEL_UNIGRAM;
    t->model.uscores = mxl_malloc((n + 1) * sizeof(double));
    if (!t->model.uscores) return fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
    double min_score = 1e300;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(vocab, i);
        json_t *piece = json_array_get(e, 0), *score = json_array_get(e, 1);
        if (!json_is_array(e) || !json_is_string(piece) || !json_is_number(score)) {
            char pth[64];
            snprintf(pth, sizeof(pth), "model.vocab[%zu]", i);
            return fail(c, MXL_ERR_FORMAT, pth, "expected [piece, score]%s", NULL);
        }
        size_t l = json_string_length(piece);
        if (!tok_vocab_set(t, json_string_value(piece), l, (int32_t)i, false))
            return fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
        t->model.uscores[i] = json_number_value(score);
        if (t->model.uscores[i] < min_score) min_score = t->model.uscores[i];
        if (l > t->model.max_piece_len) t->model.max_piece_len = l;
    }
    t->model.unk_score = (n ? min_score : 0.0) - 10.0;
    json_t *unk = json_object_get(m, "unk_id");
    t->model.unk_id = -1;
    if (json_is_integer(unk)) {
        if (json_integer_value(unk) < 0 || (size_t)json_integer_value(unk) >= n)
            return fail(c, MXL_ERR_FORMAT, p2, "unk_id is out of range%s", NULL);
        t->model.unk_id = (int32_t)json_integer_value(unk);
    }
    t->model.byte_fallback = jbool(m, "byte_fallback", false);
    t->model.fuse_unk = true;
    for (int b = 0; b < 256; b++) {
        char hx[8];
        snprintf(hx, sizeof(hx), "<0x%02X>", b);
        t->model.byte_ids[b] = tok_map_get(&t->vocab, hx, 6);
    }
    return MXL_OK;
}

static mxl_status load_model(ld *c, json_t *m) {
    mxl_tokenizer *t = c->t;
    if (!json_is_object(m)) return fail(c, MXL_ERR_FORMAT, "model", "missing \"model\" object%s", NULL);
    const char *type = jstr(m, "type", NULL);
    json_t *vocab = json_object_get(m, "vocab");
    if (!type) {
        if (json_object_get(m, "merges")) type = "BPE";
        else if (json_object_get(m, "max_input_chars_per_word")) type = "WordPiece";
        else if (json_is_array(vocab)) type = "Unigram";
        else type = "WordLevel";
    }
    char p2[64];
    snprintf(p2, sizeof(p2), "model (%s)", type);
    if (strcmp(type, "Unigram") == 0) return load_unigram(c, m, p2);
    if (!json_is_object(vocab)) return fail(c, MXL_ERR_FORMAT, p2, "missing \"vocab\" object%s", NULL);
    mxl_status st = c->vocab_e ? fast_vocab(c) : load_vocab(c, vocab);
    if (st != MXL_OK) return st;
    size_t l;
    const char *s;
    const char *unk = jstr(m, "unk_token", NULL);
    if (strcmp(type, "BPE") == 0) {
        t->model.kind = TOK_MODEL_BPE;
        t->model.fuse_unk = jbool(m, "fuse_unk", false);
        t->model.byte_fallback = jbool(m, "byte_fallback", false);
        t->model.ignore_merges = jbool(m, "ignore_merges", false);
        if ((s = jstr(m, "continuing_subword_prefix", &l))) {
            if (!(t->model.cont_prefix = dupn(s, l))) return fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
            t->model.cont_prefix_len = l;
        }
        if ((s = jstr(m, "end_of_word_suffix", &l))) {
            if (!(t->model.eow_suffix = dupn(s, l))) return fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
            t->model.eow_suffix_len = l;
        }
        json_t *dp = json_object_get(m, "dropout");
        if (json_is_number(dp) && json_number_value(dp) > 0.0)
            return fail(c, MXL_ERR_UNSUPPORTED, p2, "BPE dropout is not supported%s", NULL);
        json_t *merges = json_object_get(m, "merges");
        if (!json_is_array(merges)) return fail(c, MXL_ERR_FORMAT, p2, "missing \"merges\" list%s", NULL);
        st = c->merges_e ? tok_merges_load_fast(t, c->src, c->merges_s, c->merges_e, c->err)
                         : tok_merges_load_json(t, merges, c->err);
        if (st != MXL_OK) return st;
    } else if (strcmp(type, "WordPiece") == 0) {
        t->model.kind = TOK_MODEL_WORDPIECE;
        if (!unk) unk = "[UNK]";
        s = jstr(m, "continuing_subword_prefix", &l);
        if (!s) s = "##", l = 2;
        if (!(t->model.cont_prefix = dupn(s, l))) return fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
        t->model.cont_prefix_len = l;
        json_t *mx = json_object_get(m, "max_input_chars_per_word");
        t->model.max_input_chars = json_is_integer(mx) && json_integer_value(mx) >= 0 ? (size_t)json_integer_value(mx) : 100;
    } else if (strcmp(type, "WordLevel") == 0) {
        t->model.kind = TOK_MODEL_WORDLEVEL;
    } else {
        return fail(c, MXL_ERR_UNSUPPORTED, p2, "unsupported model type%s", NULL);
    }
    if ((t->model.cont_prefix == NULL && jstr(m, "continuing_subword_prefix", NULL)) ||
        (t->model.eow_suffix == NULL && jstr(m, "end_of_word_suffix", NULL)))
        return fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
    if (unk) t->model.unk_id = tok_map_get(&t->vocab, unk, strlen(unk));
    if (t->model.kind == TOK_MODEL_BPE && !t->model.cont_prefix_len && !t->model.eow_suffix_len) {
        t->model.bmp_ids = mxl_malloc(0x10000 * sizeof(int32_t));
        if (!t->model.bmp_ids) return fail(c, MXL_ERR_NOMEM, p2, "out of memory%s", NULL);
        for (uint32_t cp = 0; cp < 0x10000; cp++) t->model.bmp_ids[cp] = -1;
        for (size_t i = 0; i < t->vocab.n_ents; i++) {
            const tok_map_entry *e = &t->vocab.ents[i];
            const char *s2 = t->vocab.pool.p + e->off;
            uint32_t cp;
            if (e->len >= 1 && e->len <= 3 && tok_utf8_valid(s2, e->len) && tok_utf8_decode(s2, e->len, &cp) == e->len &&
                cp < 0x10000 && t->model.bmp_ids[cp] < 0)
                t->model.bmp_ids[cp] = e->id;
        }
    }
    for (int b = 0; b < 256; b++) {
        char hx[8];
        snprintf(hx, sizeof(hx), "<0x%02X>", b);
        t->model.byte_ids[b] = tok_map_get(&t->vocab, hx, 6);
    }
    return MXL_OK;
}

static mxl_status load_added(ld *c, json_t *arr) {
    mxl_tokenizer *t = c->t;
    if (!arr || json_is_null(arr)) return MXL_OK;
    if (!json_is_array(arr)) return fail(c, MXL_ERR_FORMAT, "added_tokens", "expected a list%s", NULL);
    size_t n = json_array_size(arr);
    t->added = mxl_calloc(n + 1, sizeof(tok_added));
    if (!t->added) return fail(c, MXL_ERR_NOMEM, "added_tokens", "out of memory%s", NULL);
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        char pth[64];
        snprintf(pth, sizeof(pth), "added_tokens[%zu]", i);
        json_t *id = json_object_get(o, "id");
        size_t l;
        const char *s = jstr(o, "content", &l);
        if (!s || !json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= (1 << 30))
            return fail(c, MXL_ERR_FORMAT, pth, "needs \"content\" and a valid \"id\"%s", NULL);
        tok_added *a = &t->added[t->n_added];
        a->content = dupn(s, l);
        if (!a->content) return fail(c, MXL_ERR_NOMEM, pth, "out of memory%s", NULL);
        t->n_added++;
        a->len = l;
        a->id = (int32_t)json_integer_value(id);
        a->special = jbool(o, "special", false);
        a->single_word = jbool(o, "single_word", false);
        a->lstrip = jbool(o, "lstrip", false);
        a->rstrip = jbool(o, "rstrip", false);
        a->normalized = jbool(o, "normalized", !a->special);
        if (!tok_vocab_set(t, s, l, a->id, true)) return fail(c, MXL_ERR_NOMEM, pth, "out of memory%s", NULL);
        t->id_attr[a->id] |= MXL_TOKEN_ATTR_ADDED | (a->special ? MXL_TOKEN_ATTR_SPECIAL : 0);
        if (a->normalized) {
            mxl_strbuf nb = {0};
            if (t->norm) {
                mxl_status st = tok_normalize(t->norm, s, l, &nb);
                if (st != MXL_OK) {
                    mxl_strbuf_free(&nb);
                    return fail(c, st, pth, "normalizing the token failed%s", NULL);
                }
            } else if (!mxl_strbuf_append(&nb, s, l)) {
                return fail(c, MXL_ERR_NOMEM, pth, "out of memory%s", NULL);
            }
            a->norm_content = nb.p ? nb.p : dupn("", 0);
            a->norm_len = nb.n;
            if (!a->norm_content) return fail(c, MXL_ERR_NOMEM, pth, "out of memory%s", NULL);
        }
    }
    return tok_added_build(t, c->err);
}

mxl_status mxl_tokenizer_load_json_bytes(const char *data, size_t len, const char *name,
                                         mxl_tokenizer **out, mxl_error *err) {
    *out = NULL;
    if (len >= 3 && !memcmp(data, "\xEF\xBB\xBF", 3)) { /* a UTF-8 BOM, as Python's json skips it */
        data += 3;
        len -= 3;
    }
    mxl_tokenizer *t = tok_alloc(name);
    if (!t) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", name ? name : "tokenizer");
    ld c = {t, err, data, len, 0, 0, 0, 0, mxl_alloc_thread_failures()};
    json_error_t je;
    /* Cut model.vocab / model.merges out for json_fast.c; jansson parses the (small) rest. */
    char *small = NULL;
    {
        size_t sp[6];
        tok_json_find_model_spans(data, len, sp);
        if (mxl_alloc_thread_failures() != c.alloc_failed0) { /* it reads "no model" then */
            mxl_tokenizer_destroy(t);
            return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", name ? name : "tokenizer");
        }
        if (sp[1] && data[sp[0]] == '{') {
            c.vocab_s = sp[0];
            c.vocab_e = sp[1];
            /* size the tables once instead of growing them (the counts are upper bounds) */
            if (!tok_map_reserve(&t->vocab, sp[4])) {
                mxl_tokenizer_destroy(t);
                return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", name ? name : "tokenizer");
            }
        }
        if (sp[3] && data[sp[2]] == '[') {
            c.merges_s = sp[2];
            c.merges_e = sp[3];
            if (!tok_pairmap_reserve(&t->model.merges, sp[5])) {
                mxl_tokenizer_destroy(t);
                return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", name ? name : "tokenizer");
            }
        }
    }
    if (c.vocab_e || c.merges_e) {
        small = mxl_malloc(len + 4);
        if (!small) {
            mxl_tokenizer_destroy(t); /* t->name goes with it */
            return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", name ? name : "tokenizer");
        }
        /* spans in file order */
        size_t s1 = c.vocab_e ? c.vocab_s : SIZE_MAX, e1 = c.vocab_e, s2 = c.merges_e ? c.merges_s : SIZE_MAX, e2 = c.merges_e;
        const char *r1 = "{}", *r2 = "[]";
        if (s2 < s1) {
            size_t x = s1; s1 = s2; s2 = x;
            x = e1; e1 = e2; e2 = x;
            const char *y = r1; r1 = r2; r2 = y;
        }
        size_t k = 0, pos = 0;
        memcpy(small + k, data + pos, s1 - pos);
        k += s1 - pos;
        memcpy(small + k, r1, 2);
        k += 2;
        pos = e1;
        if (s2 != SIZE_MAX) {
            memcpy(small + k, data + pos, s2 - pos);
            k += s2 - pos;
            memcpy(small + k, r2, 2);
            k += 2;
            pos = e2;
        }
        memcpy(small + k, data + pos, len - pos);
        k += len - pos;
        data = small;
        len = k;
    }
    json_t *root = mxl_json_loads_py(data, len, &je);
    mxl_status st = MXL_OK;
    if (!root && mxl_json_error_is_oom(&je)) {
        st = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", t->name);
        goto done;
    }
    if (!root) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: invalid JSON at line %d: %s", t->name, je.line, je.text);
        goto done;
    }
    if (!json_is_object(root)) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: top level is not an object", t->name);
        goto done;
    }
    json_t *v;
    if ((v = json_object_get(root, "normalizer")) && !json_is_null(v) &&
        (st = load_norm(&c, v, "normalizer", &t->norm)) != MXL_OK)
        goto done;
    if ((v = json_object_get(root, "pre_tokenizer")) && !json_is_null(v) &&
        (st = load_pre(&c, v, "pre_tokenizer", &t->pre)) != MXL_OK)
        goto done;
    if ((st = load_model(&c, json_object_get(root, "model"))) != MXL_OK) goto done;
    if ((v = json_object_get(root, "post_processor")) && !json_is_null(v) &&
        (st = load_post(&c, v, "post_processor", &t->post)) != MXL_OK)
        goto done;
    if ((v = json_object_get(root, "decoder")) && !json_is_null(v) &&
        (st = load_dec(&c, v, "decoder", &t->dec)) != MXL_OK)
        goto done;
    if ((st = load_added(&c, json_object_get(root, "added_tokens"))) != MXL_OK) goto done;
    for (uint32_t i = 0; i < t->n_ids; i++)
        if (t->id_ent[i] && !(t->id_attr[i] & MXL_TOKEN_ATTR_ADDED)) t->id_attr[i] |= MXL_TOKEN_ATTR_NORMAL;
    for (int b = 0; b < 256; b++)
        if (t->model.byte_ids[b] >= 0) t->id_attr[t->model.byte_ids[b]] |= MXL_TOKEN_ATTR_BYTE;
    t->unk_id = t->model.unk_id;
    /* template / bert post-processors name the BOS-like and EOS-like ids */
    if (t->post && t->post->kind == TOK_POST_TEMPLATE && t->post->n_single && t->post->single[0] >= 0)
        t->bos_id = t->post->single[0];
    if (t->post && (t->post->kind == TOK_POST_BERT || t->post->kind == TOK_POST_ROBERTA)) {
        t->cls_id = t->post->cls_id;
        t->sep_id = t->post->sep_id;
    }
done:
    json_decref(root);
    mxl_free(small);
    if (st != MXL_OK) {
        mxl_tokenizer_destroy(t);
        return st;
    }
    *out = t;
    return MXL_OK;
}

mxl_status mxl_tokenizer_load_json_file(const char *path, mxl_tokenizer **out, mxl_error *err) {
    *out = NULL;
    mxl_mapped_file f; /* mapped, not read: a 33 MB tokenizer.json is parsed in place */
    mxl_status st = mxl_mapped_file_open(path, &f, err);
    if (st != MXL_OK) return st;
    st = mxl_tokenizer_load_json_bytes(f.data ? (const char *)f.data : "", (size_t)f.size, path, out, err);
    mxl_mapped_file_close(&f);
    return st;
}
