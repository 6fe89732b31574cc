/* tok_export.c - a GGUF vocabulary written out as Hugging Face tokenizer files (for
 * `mlxcel convert`).
 *
 * gpt2 vocabularies (tokenizer.ggml.model = "gpt2") map one to one onto tokenizers' byte-level
 * BPE: the tokens are already in GPT-2's byte-to-unicode alphabet, the merges are "a b" strings,
 * and llama.cpp's pre-tokenizer (the regexes tokenizer.ggml.pre names, applied in turn, each
 * match isolated) is a Sequence of Split(Isolated) followed by ByteLevel without its own regex,
 * which is how converted Hugging Face tokenizers of those families are written. Control (3) and
 * user-defined (4) tokens become added tokens (control ones special), as llama.cpp cuts them out
 * of the text; BOS is prepended by a TemplateProcessing post-processor when add_bos says so.
 * llama (SentencePiece) vocabularies: llama.cpp escapes spaces as U+2581 (with a leading one when
 * add_space_prefix) and merges the best-scoring adjacent pair first, falling back to <0xXX> byte
 * tokens; tokenizers says the same with a Replace (+ Prepend) normalizer, no pre-tokenizer, and a
 * byte_fallback BPE whose merges are every two-piece split of a token ranked by the token's score
 * (transformers' SentencePieceExtractor order). For Gemma 3 this tokenizes 266 documents of mixed
 * text and the golden corpus exactly as Hugging Face's own Gemma 3 tokenizer.json does.
 * The checks: Hugging Face `tokenizers` reading the file gives the ids llama.cpp's rules give, and
 * for Gemma 3 the ids of HF's tokenizer goldens (tests/cli/test_convert.py). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "io/gguf.h"
#include "io/json_write.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

static json_t *gstr(const mxl_gguf_str *s) { return json_stringn(s->data, (size_t)s->len); }

static bool get_u32(const mxl_gguf *g, const char *key, int64_t *out) {
    uint64_t v;
    if (!mxl_gguf_find(g, key) || mxl_gguf_get_u64(g, key, &v, NULL) != MXL_OK || v >= (1u << 30)) return false;
    *out = (int64_t)v;
    return true;
}

static bool get_flag(const mxl_gguf *g, const char *key, bool dflt) {
    bool b = dflt;
    if (mxl_gguf_find(g, key)) mxl_gguf_get_bool(g, key, &b, NULL);
    return b;
}


static json_t *token_content(const mxl_gguf_array *toks, int64_t id) {
    return id >= 0 && (uint64_t)id < toks->n ? gstr(&toks->strs[id]) : json_null();
}

/* SentencePiece BPE as tokenizers' BPE: every split of a token into two vocabulary pieces is a
 * merge, ranked by the merged token's score (highest first; ties in token-id order, then by the
 * pieces' ids), which is how transformers' SentencePieceExtractor orders them, so llama.cpp's
 * "merge the best-scoring pair" and tokenizers' "merge the lowest rank" agree. Splits are at
 * character boundaries. */
typedef struct spm_merge {
    float score;
    uint32_t tok, left, right;
} spm_merge;

static int cmp_spm_merge(const void *a, const void *b) {
    const spm_merge *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->tok != y->tok) return x->tok < y->tok ? -1 : 1;
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    return x->right < y->right ? -1 : x->right > y->right;
}

static json_t *spm_merges(const mxl_gguf_array *toks, const mxl_gguf_array *scores) {
    tok_map ids = {0};
    spm_merge *v = NULL;
    size_t n = 0, cap = 0;
    json_t *out = NULL;
    if (!tok_map_reserve(&ids, toks->n)) goto done;
    for (uint64_t i = 0; i < toks->n; i++)
        if (!tok_map_put(&ids, toks->strs[i].data, (size_t)toks->strs[i].len, (int32_t)i, NULL)) goto done;
    for (uint64_t i = 0; i < toks->n; i++) {
        const char *s = toks->strs[i].data;
        size_t len = (size_t)toks->strs[i].len;
        float sc;
        memcpy(&sc, scores->data + 4 * i, 4);
        for (size_t k = 1; k < len; k++) {
            if (((uint8_t)s[k] & 0xC0) == 0x80) continue; /* inside a UTF-8 character */
            int32_t l = tok_map_get(&ids, s, k), r = tok_map_get(&ids, s + k, len - k);
            if (l < 0 || r < 0) continue;
            if (n == cap) {
                size_t nc = cap ? 2 * cap : 1 << 16;
                spm_merge *nv = mxl_realloc(v, nc * sizeof *nv);
                if (!nv) goto done;
                v = nv;
                cap = nc;
            }
            v[n++] = (spm_merge){sc, (uint32_t)i, (uint32_t)l, (uint32_t)r};
        }
    }
    qsort(v, n, sizeof *v, cmp_spm_merge);
    out = json_array();
    for (size_t i = 0; out && i < n; i++) {
        json_t *pair = json_array();
        json_array_append_new(pair, gstr(&toks->strs[v[i].left]));
        json_array_append_new(pair, gstr(&toks->strs[v[i].right]));
        json_array_append_new(out, pair);
    }
done:
    mxl_free(v);
    tok_map_free(&ids);
    return out;
}

mxl_status mxl_tokenizer_export_gguf(const struct mxl_gguf *g, const char *dir, mxl_error *err) {
    const char *gname = mxl_gguf_name(g);
    mxl_gguf_str model = {0}, pre = {0}, tmpl = {0};
    const mxl_gguf_array *toks = NULL, *types = NULL, *merges = NULL, *scores = NULL;
    mxl_status st;
    if ((st = mxl_gguf_get_str(g, "tokenizer.ggml.model", &model, err))) return st;
    bool spm = model.len == 5 && memcmp(model.data, "llama", 5) == 0;
    if (!spm && (model.len != 4 || memcmp(model.data, "gpt2", 4) != 0))
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED,
                             "%s: writing tokenizer.json for a '%.*s' GGUF vocabulary is not supported yet (gpt2 and llama are)", gname,
                             (int)(model.len < 32 ? model.len : 32), model.data);
    if (mxl_gguf_find(g, "tokenizer.ggml.pre") && (st = mxl_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err))) return st;
    if ((st = mxl_gguf_get_array(g, "tokenizer.ggml.tokens", &toks, err))) return st;
    if (spm) {
        if ((st = mxl_gguf_get_array(g, "tokenizer.ggml.scores", &scores, err))) return st;
        if (scores->elem_type != MXL_GGUF_TYPE_FLOAT32 || scores->n < toks->n)
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tokenizer.ggml.scores must be a float32 array per token", gname);
    } else if ((st = mxl_gguf_get_array(g, "tokenizer.ggml.merges", &merges, err))) {
        return st;
    }
    if (toks->elem_type != MXL_GGUF_TYPE_STRING || (merges && merges->elem_type != MXL_GGUF_TYPE_STRING))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tokenizer.ggml.tokens / merges must be string arrays", gname);
    if (mxl_gguf_find(g, "tokenizer.ggml.token_type") && (st = mxl_gguf_get_array(g, "tokenizer.ggml.token_type", &types, err)))
        return st;
    if (types && (types->n < toks->n || (types->elem_type != MXL_GGUF_TYPE_INT32 && types->elem_type != MXL_GGUF_TYPE_UINT32)))
        types = NULL;
    char pname[64];
    snprintf(pname, sizeof pname, "%.*s", (int)(pre.len < 63 ? pre.len : 63), pre.data ? pre.data : "");
    const char *const *re = NULL;
    int n_re = 0;
    bool ignore_merges = false;
    if (!spm && !tok_gguf_pre_lookup(pname, &re, &n_re, &ignore_merges))
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: unsupported tokenizer.ggml.pre '%s'", gname, pname);

    int64_t bos = -1, eos = -1, unk = -1, pad = -1;
    get_u32(g, "tokenizer.ggml.bos_token_id", &bos);
    get_u32(g, "tokenizer.ggml.eos_token_id", &eos);
    get_u32(g, "tokenizer.ggml.unknown_token_id", &unk);
    get_u32(g, "tokenizer.ggml.padding_token_id", &pad);
    /* llama.cpp's defaults: SentencePiece vocabularies add BOS and a space prefix unless told not to */
    bool add_bos = get_flag(g, "tokenizer.ggml.add_bos_token", spm), add_eos = get_flag(g, "tokenizer.ggml.add_eos_token", false);
    bool space_prefix = spm && get_flag(g, "tokenizer.ggml.add_space_prefix", true);

    json_t *doc = json_object(), *added = json_array(), *vocab = json_object(), *mlist = json_array();
    for (uint64_t i = 0; i < toks->n; i++) {
        json_t *s = gstr(&toks->strs[i]);
        if (!s) {
            json_decref(doc), json_decref(added), json_decref(vocab), json_decref(mlist);
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: token %llu is not valid UTF-8", gname, (unsigned long long)i);
        }
        uint32_t ty = 1;
        if (types) memcpy(&ty, types->data + 4 * i, 4);
        if (ty == 3 || ty == 4) {
            json_t *a = json_object();
            json_object_set_new(a, "id", json_integer((json_int_t)i));
            json_object_set(a, "content", s);
            json_object_set_new(a, "single_word", json_false());
            json_object_set_new(a, "lstrip", json_false());
            json_object_set_new(a, "rstrip", json_false());
            json_object_set_new(a, "normalized", json_false());
            json_object_set_new(a, "special", json_boolean(ty == 3));
            json_array_append_new(added, a);
        }
        /* a repeated token string keeps the first id, as llama.cpp's token_to_id map does */
        if (!json_object_get(vocab, json_string_value(s))) json_object_set_new(vocab, json_string_value(s), json_integer((json_int_t)i));
        json_decref(s);
    }
    if (spm) {
        json_decref(mlist);
        if (!(mlist = spm_merges(toks, scores))) {
            json_decref(doc), json_decref(added), json_decref(vocab);
            return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", gname);
        }
    } else {
        for (uint64_t i = 0; i < merges->n; i++) json_array_append_new(mlist, gstr(&merges->strs[i]));
    }

    json_object_set_new(doc, "version", json_string("1.0"));
    json_object_set_new(doc, "truncation", json_null());
    json_object_set_new(doc, "padding", json_null());
    json_object_set_new(doc, "added_tokens", added);
    if (spm) {
        /* llama.cpp escapes spaces as U+2581 (and prefixes one) and merges the whole text */
        json_t *rep = json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern", "String", " ", "content", "\u2581");
        json_object_set_new(doc, "normalizer",
                            space_prefix ? json_pack("{s:s, s:[{s:s, s:s}, o]}", "type", "Sequence", "normalizers", "type",
                                                     "Prepend", "prepend", "\u2581", rep)
                                         : rep);
        json_object_set_new(doc, "pre_tokenizer", json_null());
    } else {
        json_object_set_new(doc, "normalizer", json_null());
        json_t *seq = json_array();
        for (int i = 0; i < n_re; i++)
            json_array_append_new(seq, json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex", re[i],
                                                 "behavior", "Isolated", "invert", 0));
        json_array_append_new(seq, json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 0,
                                             "use_regex", 0));
        json_object_set_new(doc, "pre_tokenizer", json_pack("{s:s, s:o}", "type", "Sequence", "pretokenizers", seq));
    }
    if ((add_bos && bos >= 0) || (add_eos && eos >= 0)) {
        json_t *sp = json_object();
        const int64_t ids[2] = {add_bos ? bos : -1, add_eos ? eos : -1};
        /* TemplateProcessing names its special tokens by content: [BOS] $A [EOS] (and $B likewise) */
        json_t *tl = json_array(), *pl = json_array();
        for (int k = 0; k < 2; k++) {
            if (ids[k] < 0) continue;
            json_t *c = token_content(toks, ids[k]);
            json_object_set_new(sp, json_string_value(c),
                                json_pack("{s:O, s:[I], s:[O]}", "id", c, "ids", (json_int_t)ids[k], "tokens", c));
            json_decref(c);
        }
        for (int part = 0; part < 2; part++) {
            json_t *l = part ? pl : tl;
            for (int seg = 0; seg <= part; seg++) {
                json_t *bt = ids[0] >= 0 ? token_content(toks, ids[0]) : NULL, *et = ids[1] >= 0 ? token_content(toks, ids[1]) : NULL;
                if (bt) json_array_append_new(l, json_pack("{s:{s:O, s:i}}", "SpecialToken", "id", bt, "type_id", seg));
                json_array_append_new(l, json_pack("{s:{s:s, s:i}}", "Sequence", "id", seg ? "B" : "A", "type_id", seg));
                if (et) json_array_append_new(l, json_pack("{s:{s:O, s:i}}", "SpecialToken", "id", et, "type_id", seg));
                json_decref(bt);
                json_decref(et);
            }
        }
        json_object_set_new(doc, "post_processor",
                            json_pack("{s:s, s:o, s:o, s:o}", "type", "TemplateProcessing", "single", tl, "pair", pl,
                                      "special_tokens", sp));
    } else {
        json_object_set_new(doc, "post_processor", json_null());
    }
    if (spm) {
        json_t *dec = json_array();
        json_array_append_new(dec, json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern", "String", "\u2581", "content", " "));
        json_array_append_new(dec, json_pack("{s:s}", "type", "ByteFallback"));
        json_array_append_new(dec, json_pack("{s:s}", "type", "Fuse"));
        if (space_prefix) json_array_append_new(dec, json_pack("{s:s, s:s, s:i, s:i}", "type", "Strip", "content", " ", "start", 1, "stop", 0));
        json_object_set_new(doc, "decoder", json_pack("{s:s, s:o}", "type", "Sequence", "decoders", dec));
    } else {
        json_object_set_new(doc, "decoder", json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 1,
                                                      "trim_offsets", 1, "use_regex", 1));
    }
    json_t *m = json_object();
    json_object_set_new(m, "type", json_string("BPE"));
    json_object_set_new(m, "dropout", json_null());
    json_object_set_new(m, "unk_token", spm ? token_content(toks, unk) : json_null());
    json_object_set_new(m, "continuing_subword_prefix", json_null());
    json_object_set_new(m, "end_of_word_suffix", json_null());
    json_object_set_new(m, "fuse_unk", json_boolean(spm));
    json_object_set_new(m, "byte_fallback", json_boolean(spm));
    json_object_set_new(m, "ignore_merges", json_boolean(ignore_merges));
    json_object_set_new(m, "vocab", vocab);
    json_object_set_new(m, "merges", mlist);
    json_object_set_new(doc, "model", m);
    if ((st = mxl_json_write_file(doc, dir, "tokenizer.json", err))) return st;

    json_t *cfg = json_object();
    json_object_set_new(cfg, "add_bos_token", json_boolean(add_bos));
    json_object_set_new(cfg, "add_eos_token", json_boolean(add_eos));
    json_object_set_new(cfg, "bos_token", token_content(toks, bos));
    json_object_set_new(cfg, "eos_token", token_content(toks, eos));
    json_object_set_new(cfg, "unk_token", token_content(toks, unk));
    json_object_set_new(cfg, "pad_token", token_content(toks, pad));
    if (mxl_gguf_find(g, "tokenizer.chat_template") && mxl_gguf_get_str(g, "tokenizer.chat_template", &tmpl, NULL) == MXL_OK)
        json_object_set_new(cfg, "chat_template", gstr(&tmpl));
    json_object_set_new(cfg, "clean_up_tokenization_spaces", json_false());
    json_object_set_new(cfg, "tokenizer_class", json_string("PreTrainedTokenizerFast"));
    return mxl_json_write_file(cfg, dir, "tokenizer_config.json", err);
}
