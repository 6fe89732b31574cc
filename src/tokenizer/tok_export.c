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
 * The check is that Hugging Face `tokenizers` reading the file gives the ids llama.cpp's rules give
 * (tests/cli/test_convert.py). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "io/gguf.h"
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

static mxl_status write_json(json_t *doc, const char *dir, const char *name, mxl_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!doc) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", path);
    int rc = json_dump_file(doc, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(doc);
    return rc == 0 ? MXL_OK : mxl_error_set(err, MXL_ERR_IO, "%s: cannot write", path);
}

static json_t *token_content(const mxl_gguf_array *toks, int64_t id) {
    return id >= 0 && (uint64_t)id < toks->n ? gstr(&toks->strs[id]) : json_null();
}

mxl_status mxl_tokenizer_export_gguf(const struct mxl_gguf *g, const char *dir, mxl_error *err) {
    const char *gname = mxl_gguf_name(g);
    mxl_gguf_str model = {0}, pre = {0}, tmpl = {0};
    const mxl_gguf_array *toks = NULL, *types = NULL, *merges = NULL;
    mxl_status st;
    if ((st = mxl_gguf_get_str(g, "tokenizer.ggml.model", &model, err))) return st;
    if (model.len != 4 || memcmp(model.data, "gpt2", 4) != 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED,
                             "%s: writing tokenizer.json for a '%.*s' GGUF vocabulary is not supported yet (gpt2 BPE is)", gname,
                             (int)(model.len < 32 ? model.len : 32), model.data);
    if (mxl_gguf_find(g, "tokenizer.ggml.pre") && (st = mxl_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err))) return st;
    if ((st = mxl_gguf_get_array(g, "tokenizer.ggml.tokens", &toks, err)) ||
        (st = mxl_gguf_get_array(g, "tokenizer.ggml.merges", &merges, err)))
        return st;
    if (toks->elem_type != MXL_GGUF_TYPE_STRING || merges->elem_type != MXL_GGUF_TYPE_STRING)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tokenizer.ggml.tokens / merges must be string arrays", gname);
    if (mxl_gguf_find(g, "tokenizer.ggml.token_type") && (st = mxl_gguf_get_array(g, "tokenizer.ggml.token_type", &types, err)))
        return st;
    if (types && (types->n < toks->n || (types->elem_type != MXL_GGUF_TYPE_INT32 && types->elem_type != MXL_GGUF_TYPE_UINT32)))
        types = NULL;
    char pname[64];
    snprintf(pname, sizeof pname, "%.*s", (int)(pre.len < 63 ? pre.len : 63), pre.data ? pre.data : "");
    const char *const *re;
    int n_re;
    bool ignore_merges;
    if (!tok_gguf_pre_lookup(pname, &re, &n_re, &ignore_merges))
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: unsupported tokenizer.ggml.pre '%s'", gname, pname);

    int64_t bos = -1, eos = -1, unk = -1, pad = -1;
    get_u32(g, "tokenizer.ggml.bos_token_id", &bos);
    get_u32(g, "tokenizer.ggml.eos_token_id", &eos);
    get_u32(g, "tokenizer.ggml.unknown_token_id", &unk);
    get_u32(g, "tokenizer.ggml.padding_token_id", &pad);
    bool add_bos = get_flag(g, "tokenizer.ggml.add_bos_token", false), add_eos = get_flag(g, "tokenizer.ggml.add_eos_token", false);

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
    for (uint64_t i = 0; i < merges->n; i++) json_array_append_new(mlist, gstr(&merges->strs[i]));

    json_object_set_new(doc, "version", json_string("1.0"));
    json_object_set_new(doc, "truncation", json_null());
    json_object_set_new(doc, "padding", json_null());
    json_object_set_new(doc, "added_tokens", added);
    json_object_set_new(doc, "normalizer", json_null());
    json_t *seq = json_array();
    for (int i = 0; i < n_re; i++)
        json_array_append_new(seq, json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex", re[i],
                                             "behavior", "Isolated", "invert", 0));
    json_array_append_new(seq, json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 0,
                                         "use_regex", 0));
    json_object_set_new(doc, "pre_tokenizer", json_pack("{s:s, s:o}", "type", "Sequence", "pretokenizers", seq));
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
    json_object_set_new(doc, "decoder", json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 1,
                                                  "trim_offsets", 1, "use_regex", 1));
    json_t *m = json_object();
    json_object_set_new(m, "type", json_string("BPE"));
    json_object_set_new(m, "dropout", json_null());
    json_object_set_new(m, "unk_token", json_null());
    json_object_set_new(m, "continuing_subword_prefix", json_null());
    json_object_set_new(m, "end_of_word_suffix", json_null());
    json_object_set_new(m, "fuse_unk", json_false());
    json_object_set_new(m, "byte_fallback", json_false());
    json_object_set_new(m, "ignore_merges", json_boolean(ignore_merges));
    json_object_set_new(m, "vocab", vocab);
    json_object_set_new(m, "merges", mlist);
    json_object_set_new(doc, "model", m);
    if ((st = write_json(doc, dir, "tokenizer.json", err))) return st;

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
    return write_json(cfg, dir, "tokenizer_config.json", err);
}
