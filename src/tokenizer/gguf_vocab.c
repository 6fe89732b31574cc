/* gguf_vocab.c - GGUF vocabularies (tokenizer.ggml.*) as llama.cpp's llama-vocab.cpp reads them:
 *   llama  -> SentencePiece score merges (model_spm.c), " " prefix and U+2581 escaping;
 *   gpt2   -> byte-level BPE with the pre-tokenizer regexes named by tokenizer.ggml.pre;
 *   gemma4 -> BPE on raw UTF-8 with U+2581 escaping, split only at newlines, <0xXX> fallback;
 *   bert   -> llama.cpp's WordPiece (model_wordpiece.c).
 * Token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte. Control,
 * user-defined and unknown tokens are cut out of the text first (user-defined always, the others
 * only when special tokens are parsed), longest text first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "io/gguf.h"
#include "tokenizer/tok_internal.h"

#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define LLAMA3_RE                                                                                  \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2_RE                                                                                   \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"    \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN35_RE                                                                                  \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+"  \
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define GPT4O_RE                                                                                   \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define DSV3_RE                                                                                    \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|" \
    "\\s*[\r\n]+|\\s+(?!\\S)|\\s+"

typedef struct pre_def {
    const char *names; /* '|'-separated tokenizer.ggml.pre values */
    bool ignore_merges;
    const char *re[6];
} pre_def;

static const pre_def k_pre[] = {
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2", true, {LLAMA3_RE}},
    {"dbrx|smaug-bpe|chatglm-bpe|glm4", false, {LLAMA3_RE}},
    {"deepseek-llm", false,
     {"[\r\n]",
      "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
      "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
      "\\s+$", "[一-龥ࠀ-一가-퟿]+", "\\p{N}+"}},
    {"deepseek-coder", false,
     {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
      "[一-龥ࠀ-一가-퟿]+", "\\p{N}"}},
    {"deepseek-v3|hunyuan-dense", false,
     {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", DSV3_RE}},
    {"falcon", false, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_RE, "[0-9][0-9][0-9]"}},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b", false, {"\\p{N}", GPT2_RE}},
    {"gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|mpt|olmo|jais|trillion|"
     "granite-docling|jina-v1-en|jina-v2-code|roberta-bpe|exaone4|a.x-4.0|mellum|modern-bert",
     false, {GPT2_RE}},
    {"qwen2|deepseek-r1-qwen|megrez|stablelm2|hunyuan|kormo", false, {QWEN2_RE}},
    {"qwen35", false, {QWEN35_RE}},
    {"gpt-4o|llama4|minimax-m2|kanana2", false, {GPT4O_RE}},
    {"tekken", true,
     {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?"
      "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"poro-chat|bloom|gpt3-finnish", false,
     {" ?[^(\\s|.,!?…。，、।۔،)]+"}},
    {"viking", false,
     {" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}"}},
    {"default", false, {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_RE, "\\p{N}+", "[0-9][0-9][0-9]"}},
};

static bool name_in(const char *names, const char *s, size_t n);

bool tok_gguf_pre_lookup(const char *pre, const char *const **re, int *n_re, bool *ignore_merges) {
    const char *pn = pre && pre[0] ? pre : "default";
    for (size_t i = 0; i < sizeof(k_pre) / sizeof(k_pre[0]); i++) {
        if (!name_in(k_pre[i].names, pn, strlen(pn))) continue;
        *re = k_pre[i].re;
        for (*n_re = 0; *n_re < 6 && k_pre[i].re[*n_re]; (*n_re)++) {}
        *ignore_merges = k_pre[i].ignore_merges;
        return true;
    }
    return false;
}

static bool name_in(const char *names, const char *s, size_t n) {
    const char *p = names;
    while (*p) {
        const char *e = strchr(p, '|');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && memcmp(p, s, n) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

static mxl_status add_split(mxl_tokenizer *t, tok_pretok *seq, const char *re, mxl_error *err) {
    tok_pretok *p = mxl_calloc(1, sizeof(*p));
    if (!p) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", t->name);
    seq->children[seq->n_children++] = p;
    p->kind = TOK_PRE_SPLIT;
    p->behavior = TOK_SPLIT_ISOLATED;
    char eb[200];
    mxl_status st = tok_regex_compile(re, strlen(re), false, &p->re, eb, sizeof(eb));
    if (st != MXL_OK) return mxl_error_set(err, st, "%s: pre-tokenizer regex: %s", t->name, eb);
    return MXL_OK;
}

static _Thread_local const mxl_tokenizer *g_cmp_tok; /* qsort context (per loading thread) */
static int cmp_special(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    size_t lx = 0, ly = 0;
    tok_id_str(g_cmp_tok, x, &lx);
    tok_id_str(g_cmp_tok, y, &ly);
    if (lx != ly) return lx > ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

static bool get_id(const mxl_gguf *g, const char *key, int32_t *out) {
    uint64_t v;
    if (!mxl_gguf_find(g, key) || mxl_gguf_get_u64(g, key, &v, NULL) != MXL_OK || v >= (1u << 30)) return false;
    *out = (int32_t)v;
    return true;
}

static void get_bool(const mxl_gguf *g, const char *key, bool *out) {
    bool b;
    if (mxl_gguf_find(g, key) && mxl_gguf_get_bool(g, key, &b, NULL) == MXL_OK) *out = b;
}

/* Appends id to the end-of-generation list (once). */
static bool eog_add(mxl_tokenizer *t, int32_t id, size_t *cap) {
    if (id < 0 || (uint32_t)id >= t->n_ids) return true;
    for (size_t i = 0; i < t->n_eos_ids; i++)
        if (t->eos_ids[i] == id) return true;
    if (t->n_eos_ids == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        int32_t *v = mxl_realloc(t->eos_ids, nc * sizeof(int32_t));
        if (!v) return false;
        t->eos_ids = v;
        *cap = nc;
    }
    t->eos_ids[t->n_eos_ids++] = id;
    return true;
}

static void eog_remove(mxl_tokenizer *t, int32_t id) {
    for (size_t i = 0; i < t->n_eos_ids; i++)
        if (t->eos_ids[i] == id) {
            memmove(t->eos_ids + i, t->eos_ids + i + 1, (t->n_eos_ids - i - 1) * sizeof(int32_t));
            t->n_eos_ids--;
            return;
        }
}

/* The ids that end generation, as llama.cpp's llama_vocab::impl::load builds its EOG set
 * (src/llama-vocab.cpp): the FIM pad / repo / file-separator tokens, the tokens whose text is
 * one of its end-of-turn names, then EOS, EOT and EOM; "<|end|>" leaves the set when the
 * vocabulary also has "<|return|>" and "<|call|>" (GPT-OSS harmony) or "<|calls|>" and
 * "<|flush|>", and "</s>" when it has "<|tool_response>" or "<|plamo:eos|>" (a normal token
 * there). (llama.cpp also retypes the matched tokens as control tokens; their types here stay as
 * the GGUF says, which keeps tokenization as the HF tokenizers do it.) */
static mxl_status gguf_eog(mxl_tokenizer *t, const mxl_gguf *g, const char *gname, mxl_error *err) {
    static const char *const names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
                                        "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
                                        "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
                                        "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "[e~["};
    size_t cap = 0;
    bool ok = true;
    for (int w = MXL_TOK_FIM_PAD; w <= MXL_TOK_FIM_SEP; w++) {
        int32_t id = mxl_tokenizer_fim_id(t, w);
        ok &= eog_add(t, id, &cap);
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int32_t id = mxl_tokenizer_token_id(t, names[i], strlen(names[i]));
        if (id >= 0) ok &= eog_add(t, id, &cap);
    }
    int32_t eot = -1, eom = -1;
    get_id(g, "tokenizer.ggml.eot_token_id", &eot);
    get_id(g, "tokenizer.ggml.eom_token_id", &eom);
    ok &= eog_add(t, t->eos_id, &cap) && eog_add(t, eot, &cap) && eog_add(t, eom, &cap);
    if (!ok) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", gname);
    int32_t end = -1, s_id = -1;
    bool ret = false, call = false, flush = false, s_normal = false;
    for (size_t i = 0; i < t->n_eos_ids; i++) {
        size_t len = 0;
        const char *x = mxl_tokenizer_token(t, t->eos_ids[i], &len);
#define IS(lit) (x && len == sizeof(lit) - 1 && !memcmp(x, lit, len))
        if (IS("<|return|>")) ret = true;
        else if (IS("<|call|>") || IS("<|calls|>")) call = true;
        else if (IS("<|flush|>")) flush = true;
        else if (IS("<|end|>")) end = t->eos_ids[i];
        if (IS("<|tool_response>") || IS("<|plamo:eos|>")) s_normal = true;
        else if (IS("</s>")) s_id = t->eos_ids[i];
#undef IS
    }
    if (end >= 0 && ((ret && call) || (call && flush))) eog_remove(t, end);
    if (s_normal && s_id >= 0) eog_remove(t, s_id);
    return MXL_OK;
}

mxl_status mxl_tokenizer_load_gguf(const struct mxl_gguf *g, mxl_tokenizer **out, mxl_error *err) {
    *out = NULL;
    const char *gname = mxl_gguf_name(g);
    mxl_tokenizer *t = tok_alloc(gname);
    if (!t) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", gname);
    t->flavor = TOK_FLAVOR_GGUF;
    mxl_status st;
    mxl_gguf_str model = {0}, pre = {0};
    const mxl_gguf_array *toks = NULL, *types = NULL, *scores = NULL, *merges = NULL;
    if ((st = mxl_gguf_get_str(g, "tokenizer.ggml.model", &model, err)) != MXL_OK) goto fail;
    if (mxl_gguf_find(g, "tokenizer.ggml.pre") && (st = mxl_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err)) != MXL_OK)
        goto fail;
    if ((st = mxl_gguf_get_array(g, "tokenizer.ggml.tokens", &toks, err)) != MXL_OK) goto fail;
    if (toks->elem_type != MXL_GGUF_TYPE_STRING || toks->n == 0 || toks->n >= (1u << 30)) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: tokenizer.ggml.tokens must be a non-empty string array", gname);
        goto fail;
    }
    if (mxl_gguf_find(g, "tokenizer.ggml.token_type") &&
        (st = mxl_gguf_get_array(g, "tokenizer.ggml.token_type", &types, err)) != MXL_OK)
        goto fail;
    if (types && (types->n < toks->n || (types->elem_type != MXL_GGUF_TYPE_INT32 && types->elem_type != MXL_GGUF_TYPE_UINT32))) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: tokenizer.ggml.token_type must be an int32 array per token", gname);
        goto fail;
    }
    if (mxl_gguf_find(g, "tokenizer.ggml.scores") &&
        (st = mxl_gguf_get_array(g, "tokenizer.ggml.scores", &scores, err)) != MXL_OK)
        goto fail;
    if (scores && (scores->n < toks->n || (scores->elem_type != MXL_GGUF_TYPE_FLOAT32 && scores->elem_type != MXL_GGUF_TYPE_INT32))) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: tokenizer.ggml.scores must be a float32 array per token", gname);
        goto fail;
    }
    for (uint64_t i = 0; i < toks->n; i++) {
        const mxl_gguf_str *s = &toks->strs[i];
        if (!tok_vocab_set(t, s->data, s->len, (int32_t)i, false)) {
            st = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", gname);
            goto fail;
        }
        unsigned attr = MXL_TOKEN_ATTR_NORMAL;
        if (types) {
            mxl_gguf_value v;
            int64_t ty = 1;
            if (mxl_gguf_array_get(types, i, &v)) mxl_gguf_value_as_i64(&v, &ty);
            switch (ty) {
            case 2: attr = MXL_TOKEN_ATTR_UNKNOWN; break;
            case 3: attr = MXL_TOKEN_ATTR_SPECIAL; break;
            case 4: attr = MXL_TOKEN_ATTR_USER; break;
            case 5: attr = MXL_TOKEN_ATTR_UNUSED; break;
            case 6: attr = MXL_TOKEN_ATTR_BYTE; break;
            default: attr = MXL_TOKEN_ATTR_NORMAL; break;
            }
        }
        t->id_attr[i] = (uint8_t)attr;
    }
    uint64_t n_tok = toks->n;
    if (t->n_ids > n_tok) {
        /* tok_vocab_set over-allocates; ids beyond the list have no token */
    }
    for (int b = 0; b < 256; b++) {
        char hx[8];
        snprintf(hx, sizeof(hx), "<0x%02X>", b);
        t->model.byte_ids[b] = tok_map_get(&t->vocab, hx, 6);
    }
    char mname[32] = {0}, pname[64] = {0};
    snprintf(mname, sizeof(mname), "%.*s", (int)(model.len < 31 ? model.len : 31), model.data ? model.data : "");
    snprintf(pname, sizeof(pname), "%.*s", (int)(pre.len < 63 ? pre.len : 63), pre.data ? pre.data : "");
    if (strcmp(mname, "llama") == 0) {
        t->model.kind = TOK_MODEL_SPM;
        t->gguf_add_space_prefix = true;
        t->gguf_escape_whitespace = true;
        t->add_bos = true;
        t->bos_id = 1;
        t->eos_id = 2;
        t->unk_id = 0;
        t->model.scores = mxl_calloc(n_tok, sizeof(float));
        if (!t->model.scores) {
            st = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", gname);
            goto fail;
        }
        for (uint64_t i = 0; scores && i < n_tok; i++) {
            mxl_gguf_value v;
            double d = 0;
            if (mxl_gguf_array_get(scores, i, &v)) mxl_gguf_value_as_f64(&v, &d);
            t->model.scores[i] = (float)d;
        }
    } else if (strcmp(mname, "bert") == 0) {
        t->model.kind = TOK_MODEL_WPM;
        t->add_bos = true;
        t->bos_id = 101;
        t->unk_id = 100;
        t->sep_id = 102;
        t->pad_id = 0;
        t->mask_id = 103;
        for (uint64_t i = 0; i < n_tok; i++)
            if (toks->strs[i].len > t->model.max_token_len) t->model.max_token_len = toks->strs[i].len;
    } else if (strcmp(mname, "gpt2") == 0 || strcmp(mname, "gemma4") == 0) {
        bool gemma4 = strcmp(mname, "gemma4") == 0;
        t->model.kind = TOK_MODEL_BPE;
        t->model.gguf_byte_tokens = true;
        t->model.gguf_byte_encode = !gemma4;
        if (!gemma4) {
            t->bos_id = 11;
            t->eos_id = 11;
        }
        if ((st = mxl_gguf_get_array(g, "tokenizer.ggml.merges", &merges, err)) != MXL_OK) goto fail;
        if (merges->elem_type != MXL_GGUF_TYPE_STRING) {
            st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: tokenizer.ggml.merges must be a string array", gname);
            goto fail;
        }
        for (uint64_t i = 0; i < merges->n && i < UINT32_MAX; i++) {
            const mxl_gguf_str *m = &merges->strs[i];
            const char *sp = m->len > 1 ? memchr(m->data + 1, ' ', m->len - 1) : NULL;
            if (!sp) continue;
            size_t al = (size_t)(sp - m->data), bl = m->len - al - 1;
            int32_t ia = tok_map_get(&t->vocab, m->data, al), ib = tok_map_get(&t->vocab, sp + 1, bl);
            if (ia < 0 || ib < 0) continue;
            mxl_strbuf tmp = {0};
            if (!mxl_strbuf_append(&tmp, m->data, al) || !mxl_strbuf_append(&tmp, sp + 1, bl)) {
                mxl_strbuf_free(&tmp);
                st = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", gname);
                goto fail;
            }
            int32_t in = tok_map_get(&t->vocab, tmp.p, tmp.n);
            mxl_strbuf_free(&tmp);
            if (!tok_pairmap_put(&t->model.merges, ia, ib, (uint32_t)i, in)) {
                st = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", gname);
                goto fail;
            }
        }
        const pre_def *pd = NULL;
        if (gemma4 || strcmp(pname, "gemma4") == 0) {
            static const pre_def g4 = {"gemma4", false, {"[^\\n]+|[\\n]+"}};
            pd = &g4;
            t->gguf_escape_whitespace = true;
            t->model.newline_words_whole = true;
            t->model.gguf_byte_encode = false;
        } else {
            const char *pn = pname[0] ? pname : "default";
            for (size_t i = 0; i < sizeof(k_pre) / sizeof(k_pre[0]); i++)
                if (name_in(k_pre[i].names, pn, strlen(pn))) pd = &k_pre[i];
            if (!pd) {
                st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: unsupported tokenizer.ggml.pre '%s'", gname, pn);
                goto fail;
            }
            if (name_in("llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|tekken", pn, strlen(pn)))
                t->add_bos = true;
        }
        t->model.ignore_merges = pd->ignore_merges;
        tok_pretok *seq = mxl_calloc(1, sizeof(*seq));
        if (!seq || !(seq->children = mxl_calloc(8, sizeof(*seq->children)))) {
            mxl_free(seq);
            st = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", gname);
            goto fail;
        }
        seq->kind = TOK_PRE_SEQUENCE;
        t->pre = seq;
        for (int i = 0; i < 6 && pd->re[i]; i++)
            if ((st = add_split(t, seq, pd->re[i], err)) != MXL_OK) goto fail;
        if (t->model.gguf_byte_encode) {
            tok_pretok *bl = mxl_calloc(1, sizeof(*bl));
            if (!bl) {
                st = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", gname);
                goto fail;
            }
            bl->kind = TOK_PRE_BYTE_LEVEL;
            seq->children[seq->n_children++] = bl;
        }
    } else {
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: unsupported tokenizer.ggml.model '%s'", gname, mname);
        goto fail;
    }
    get_bool(g, "tokenizer.ggml.add_space_prefix", &t->gguf_add_space_prefix);
    if (t->model.kind != TOK_MODEL_SPM) t->gguf_add_space_prefix = false;
    get_id(g, "tokenizer.ggml.bos_token_id", &t->bos_id);
    get_id(g, "tokenizer.ggml.eos_token_id", &t->eos_id);
    get_id(g, "tokenizer.ggml.unknown_token_id", &t->unk_id);
    get_id(g, "tokenizer.ggml.seperator_token_id", &t->sep_id);
    get_id(g, "tokenizer.ggml.padding_token_id", &t->pad_id);
    get_id(g, "tokenizer.ggml.cls_token_id", &t->cls_id);
    get_id(g, "tokenizer.ggml.mask_token_id", &t->mask_id);
    /* FIM ids (the older prefix/suffix/middle keys name the same three) */
    static const char *const fim_keys[6][2] = {{"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"},
                                               {"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"},
                                               {"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"},
                                               {"tokenizer.ggml.fim_pad_token_id", NULL},
                                               {"tokenizer.ggml.fim_rep_token_id", NULL},
                                               {"tokenizer.ggml.fim_sep_token_id", NULL}};
    for (int i = 0; i < 6; i++)
        if (!get_id(g, fim_keys[i][0], &t->fim_meta[i]) && fim_keys[i][1]) get_id(g, fim_keys[i][1], &t->fim_meta[i]);
    get_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos);
    get_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos);
    if (strcmp(mname, "gemma4") == 0) t->add_bos = true;
    int32_t *ids[] = {&t->bos_id, &t->eos_id, &t->unk_id, &t->sep_id, &t->pad_id, &t->cls_id, &t->mask_id};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
        if (*ids[i] >= (int32_t)n_tok) *ids[i] = -1;
    /* as llama.cpp: an id past the token list is ignored (the FIM ids then fall back to the token
     * names mxl_tokenizer_fim_id recognises), never handed out as an id without a token */
    for (int i = 0; i < 6; i++)
        if (t->fim_meta[i] >= (int32_t)n_tok) t->fim_meta[i] = -1;
    if (t->model.kind == TOK_MODEL_BPE && t->model.gguf_byte_tokens) t->model.unk_id = -1;
    {
        mxl_gguf_str ct;
        if (mxl_gguf_find(g, "tokenizer.chat_template") &&
            mxl_gguf_get_str(g, "tokenizer.chat_template", &ct, NULL) == MXL_OK) {
            t->chat_template = mxl_malloc(ct.len + 1);
            if (t->chat_template) {
                memcpy(t->chat_template, ct.data, ct.len);
                t->chat_template[ct.len] = 0;
            }
        }
    }
    if ((st = gguf_eog(t, g, gname, err))) goto fail;
    /* special-token cache: control / user-defined / unknown, longest first */
    size_t ns = 0;
    for (uint64_t i = 0; i < n_tok; i++)
        if (t->id_attr[i] & (MXL_TOKEN_ATTR_SPECIAL | MXL_TOKEN_ATTR_USER | MXL_TOKEN_ATTR_UNKNOWN)) ns++;
    if (ns) {
        t->gguf_special = mxl_malloc(ns * sizeof(int32_t));
        if (!t->gguf_special) {
            st = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", gname);
            goto fail;
        }
        for (uint64_t i = 0; i < n_tok; i++)
            if (t->id_attr[i] & (MXL_TOKEN_ATTR_SPECIAL | MXL_TOKEN_ATTR_USER | MXL_TOKEN_ATTR_UNKNOWN))
                t->gguf_special[t->n_gguf_special++] = (int32_t)i;
        g_cmp_tok = t;
        qsort(t->gguf_special, t->n_gguf_special, sizeof(int32_t), cmp_special);
    }
    *out = t;
    return MXL_OK;
fail:
    mxl_tokenizer_destroy(t);
    return st;
}

mxl_status mxl_tokenizer_load_gguf_file(const char *path, mxl_tokenizer **out, mxl_error *err) {
    *out = NULL;
    mxl_gguf *g = NULL;
    mxl_status st = mxl_gguf_open(path, &g, err);
    if (st != MXL_OK) return st;
    st = mxl_tokenizer_load_gguf(g, out, err);
    mxl_gguf_close(g);
    return st;
}
