/* loader_spm.c - a SentencePiece model file (spiece.model: a serialized sentencepiece ModelProto)
 * as the tokenizer of a directory without tokenizer.json, for the tokenizer classes whose
 * Python-side behaviour is known here: SigLIP's (SiglipTokenizer, as google/siglip-* ship it).
 *
 * The ModelProto fields read (sentencepiece_model.proto): pieces (1: piece 1, score 2, type 3),
 * trainer_spec (2: model_type 3, unk_id 40, byte_fallback 35), normalizer_spec
 * (3: precompiled_charsmap 2). Only Unigram models (model_type 1) are taken.
 *
 * The file becomes the tokenizer.json document HF tokenizers would run for it, built here and read
 * by loader_json.c. For SiglipTokenizer (which lower-cases, removes ASCII punctuation, collapses
 * whitespace and strips before SentencePiece, and appends </s>), checked against transformers'
 * slow tokenizer on 3000 random texts (tests/fixtures/siglip/gen_siglip_spiece_fixtures.py):
 *   normalizer: Replace(U+2581, " "), Lowercase (do_lower_case), Replace(punctuation, ""),
 *               Replace(\s+, " "), Strip, Precompiled(charsmap), Replace(" {2,}", " ")
 *   pre_tokenizer: Metaspace(U+2581, prepend always); model: Unigram(pieces, unk_id);
 *   post_processor: $A </s>; control and user-defined pieces as added tokens. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "io/json_read.h"
#include "tokenizer/tok_internal.h"

#define SPM_FILE_MAX (INT64_C(256) << 20)

typedef struct pb {
    const uint8_t *p, *end;
} pb;

static bool varint(pb *b, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && b->p < b->end; shift += 7) {
        const uint8_t c = *b->p++;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return true;
    }
    return false;
}

/* The next field: its number, wire type and (length-delimited) body; false at the end or on a
 * malformed field (*bad set). */
static bool field(pb *b, uint32_t *num, int *wire, pb *body, uint64_t *val, bool *bad) {
    if (b->p >= b->end) return false;
    uint64_t key;
    if (!varint(b, &key)) return !(*bad = true);
    *num = (uint32_t)(key >> 3);
    *wire = (int)(key & 7);
    switch (*wire) {
    case 0: if (!varint(b, val)) return !(*bad = true); return true;
    case 1: if (b->end - b->p < 8) return !(*bad = true); memcpy(val, b->p, 8); b->p += 8; return true;
    case 5: {
        uint32_t x;
        if (b->end - b->p < 4) return !(*bad = true);
        memcpy(&x, b->p, 4);
        b->p += 4;
        *val = x;
        return true;
    }
    case 2: {
        uint64_t n;
        if (!varint(b, &n) || n > (uint64_t)(b->end - b->p)) return !(*bad = true);
        body->p = b->p;
        body->end = b->p + n;
        b->p += n;
        return true;
    }
    default: return !(*bad = true);
    }
}

typedef struct spm_model {
    json_t *vocab;   /* [[piece, score], ...] */
    json_t *added;   /* added_tokens */
    int64_t unk_id, model_type;
    bool byte_fallback;
    const uint8_t *charsmap;
    size_t charsmap_len;
} spm_model;

static bool read_piece(pb b, int64_t id, spm_model *m) {
    uint32_t num;
    int wire;
    pb body = {0};
    uint64_t val = 0;
    bool bad = false;
    const char *s = NULL;
    size_t len = 0;
    float score = 0;
    int64_t type = 1;
    while (field(&b, &num, &wire, &body, &val, &bad)) {
        if (num == 1 && wire == 2) s = (const char *)body.p, len = (size_t)(body.end - body.p);
        else if (num == 2 && wire == 5) {
            uint32_t x = (uint32_t)val;
            memcpy(&score, &x, 4);
        } else if (num == 3 && wire == 0) type = (int64_t)val;
    }
    if (bad || !s) return false;
    json_t *piece = json_stringn(s, len);
    if (!piece || json_array_append_new(m->vocab, json_pack("[o, f]", piece, (double)score))) return false;
    if (type == 3 || type == 4) /* control / user-defined: added tokens (control ones special) */
        json_array_append_new(m->added, json_pack("{s:I, s:s%, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)id, "content", s, len,
                                                  "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0, "special", type == 3));
    return true;
}

static bool parse_model(const uint8_t *data, size_t n, spm_model *m) {
    pb b = {data, data + n}, body = {0};
    uint32_t num;
    int wire;
    uint64_t val = 0;
    bool bad = false;
    int64_t id = 0;
    m->model_type = 1;
    while (field(&b, &num, &wire, &body, &val, &bad)) {
        if (num == 1 && wire == 2) {
            if (!read_piece(body, id++, m)) return false;
        } else if (num == 2 && wire == 2) { /* trainer_spec */
            pb t = body, tb = {0};
            uint32_t tn;
            int tw;
            uint64_t tv = 0;
            while (field(&t, &tn, &tw, &tb, &tv, &bad)) {
                if (tn == 3 && tw == 0) m->model_type = (int64_t)tv;
                else if (tn == 40 && tw == 0) m->unk_id = (int64_t)(int32_t)tv;
                else if (tn == 35 && tw == 0) m->byte_fallback = tv != 0;
            }
        } else if (num == 3 && wire == 2) { /* normalizer_spec */
            pb t = body, tb = {0};
            uint32_t tn;
            int tw;
            uint64_t tv = 0;
            while (field(&t, &tn, &tw, &tb, &tv, &bad))
                if (tn == 2 && tw == 2) m->charsmap = tb.p, m->charsmap_len = (size_t)(tb.end - tb.p);
        }
    }
    return !bad && id > 0 && m->unk_id >= 0 && m->unk_id < id;
}

static char *base64(const uint8_t *p, size_t n) {
    static const char k[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = mxl_malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *o++ = k[v >> 18 & 63];
        *o++ = k[v >> 12 & 63];
        *o++ = i + 1 < n ? k[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? k[v & 63] : '=';
    }
    *o = 0;
    return out;
}

static json_t *replace(const char *pattern, bool regex, const char *with) {
    return json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern", regex ? "Regex" : "String", pattern, "content", with);
}

/* The tokenizer.json document for a SiglipTokenizer's model m (its eos piece's id eos). */
static json_t *siglip_document(const spm_model *m, bool lower, int64_t eos, const char *eos_piece) {
    char *cm = m->charsmap_len ? base64(m->charsmap, m->charsmap_len) : NULL;
    json_t *norms = json_array();
    json_array_append_new(norms, replace("\xE2\x96\x81", false, " "));
    if (lower) json_array_append_new(norms, json_pack("{s:s}", "type", "Lowercase"));
    json_array_append_new(norms, replace("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~]", true, ""));
    json_array_append_new(norms, replace("\\s+", true, " "));
    json_array_append_new(norms, json_pack("{s:s, s:b, s:b}", "type", "Strip", "strip_left", 1, "strip_right", 1));
    if (cm) json_array_append_new(norms, json_pack("{s:s, s:s}", "type", "Precompiled", "precompiled_charsmap", cm));
    json_array_append_new(norms, replace(" {2,}", true, " "));
    mxl_free(cm);
    json_t *meta = json_pack("{s:s, s:s, s:s, s:b}", "type", "Metaspace", "replacement", "\xE2\x96\x81", "prepend_scheme", "always", "split", 1);
    json_t *doc = json_pack(
        "{s:s, s:O, s:{s:s, s:o}, s:o, s:{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}], s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}, {s:{s:s, s:i}}, {s:{s:s, s:i}}], s:{s:{s:s, s:[I], s:[s]}}}, "
        "s:O, s:{s:s, s:I, s:O, s:b}}",
        "version", "1.0", "added_tokens", m->added, "normalizer", "type", "Sequence", "normalizers", norms, "pre_tokenizer", meta,
        "post_processor", "type", "TemplateProcessing", "single", "Sequence", "id", "A", "type_id", 0, "SpecialToken", "id", eos_piece,
        "type_id", 0, "pair", "Sequence", "id", "A", "type_id", 0, "SpecialToken", "id", eos_piece, "type_id", 0, "Sequence", "id", "B",
        "type_id", 0, "SpecialToken", "id", eos_piece, "type_id", 0, "special_tokens", eos_piece, "id", eos_piece, "ids", (json_int_t)eos,
        "tokens", eos_piece, "decoder", meta, "model", "type", "Unigram", "unk_id", (json_int_t)m->unk_id, "vocab", m->vocab,
        "byte_fallback", m->byte_fallback);
    return doc;
}

mxl_status mxl_tokenizer_load_siglip_spm(const uint8_t *data, size_t n, const char *name, bool lower, const char *eos_piece,
                                         mxl_tokenizer **out, mxl_error *err) {
    *out = NULL;
    spm_model m = {json_array(), json_array(), 0, 1, false, NULL, 0};
    char *text = NULL;
    int64_t eos = -1;
    mxl_status st = MXL_OK;
    if (!m.vocab || !m.added) {
        st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    } else if (!parse_model(data, n, &m)) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: not a SentencePiece model (a malformed or empty ModelProto)", name);
    } else if (m.model_type != 1) {
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: a SentencePiece %s model; only Unigram ones are read without tokenizer.json", name,
                           m.model_type == 2 ? "BPE" : m.model_type == 3 ? "word" : "character");
    } else {
        for (size_t i = 0; i < json_array_size(m.vocab) && eos < 0; i++)
            if (strcmp(json_string_value(json_array_get(json_array_get(m.vocab, i), 0)), eos_piece) == 0) eos = (int64_t)i;
        if (eos < 0) st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the end-of-sequence piece '%s' is not in the model", name, eos_piece);
    }
    if (!st) {
        json_t *doc = siglip_document(&m, lower, eos, eos_piece);
        text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        json_decref(doc);
        st = text ? mxl_tokenizer_load_json_bytes(text, strlen(text), name, out, err) : mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    mxl_free(text); /* (jansson allocates through core/alloc.c) */
    json_decref(m.vocab);
    json_decref(m.added);
    return st;
}

mxl_status mxl_tokenizer_load_spiece(const char *dir, const char *model_path, mxl_tokenizer **out, mxl_error *err) {
    *out = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    json_t *cfg = NULL;
    mxl_status st = mxl_json_load_file_py(path, MXL_JSON_SIDE_FILE_MAX, &cfg, err);
    if (st) {
        mxl_error_prefix(err, "no tokenizer.json, and a SentencePiece model needs tokenizer_config.json: ");
        return st;
    }
    const char *cls = json_string_value(json_object_get(cfg, "tokenizer_class"));
    if (!cls || strcmp(cls, "SiglipTokenizer") != 0) {
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: no tokenizer.json, and a SentencePiece model is read without one only for SiglipTokenizer (tokenizer_class '%s')",
                           dir, cls ? cls : "none");
        json_decref(cfg);
        return st;
    }
    json_t *lc = json_object_get(cfg, "do_lower_case"), *eo = json_object_get(cfg, "eos_token");
    const bool lower = !json_is_boolean(lc) || json_is_true(lc);
    const char *eos_piece = json_is_string(eo) ? json_string_value(eo) : json_is_object(eo) ? json_string_value(json_object_get(eo, "content")) : "</s>";
    FILE *f = fopen(model_path, "rb");
    uint8_t *data = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && n < SPM_FILE_MAX && fseek(f, 0, SEEK_SET) == 0 && (data = mxl_malloc((size_t)n)) &&
        fread(data, 1, (size_t)n, f) != (size_t)n) {
        mxl_free(data);
        data = NULL;
    }
    if (f) fclose(f);
    st = data ? mxl_tokenizer_load_siglip_spm(data, (size_t)n, model_path, lower, eos_piece ? eos_piece : "</s>", out, err)
              : mxl_error_set(err, MXL_ERR_IO, "%s: cannot read the SentencePiece model", model_path);
    mxl_free(data);
    json_decref(cfg);
    return st;
}
