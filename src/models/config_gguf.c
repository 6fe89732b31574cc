/* config_gguf.c - GGUF metadata -> mxl_model_config (see config_gguf.h).
 *
 * Key names follow llama.cpp's llama-arch.cpp (LLM_KV_*): `ARCH.block_count`,
 * `ARCH.embedding_length`, `ARCH.attention.head_count`, ... where ARCH is the value of
 * `general.architecture`. Absent keys leave the config's "not declared" values (-1 / NAN / "").
 * Values are checked for type and range: a size that is negative or absurd is a format error
 * naming the key, since family code sizes buffers from these numbers. */
#include "models/config_gguf.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/decoder_family.h"

/* Upper bounds on sizes read from metadata. Layer count is also the length of arrays we allocate
 * (layer_is_sliding), so it is kept small; the others only need to fit in int64 comfortably. */
#define MAX_LAYERS ((int64_t)1 << 16)
#define MAX_SIZE ((int64_t)1 << 40)

/* ---- architecture and file-type names ----------------------------------------------------- */

typedef struct arch_map {
    const char *gguf; /* llama.cpp LLM_ARCH_NAMES */
    const char *hf;   /* transformers model_type */
} arch_map;

/* The architectures of the spec's families that this build does not run (or runs under another
 * name); those it runs come from the family records (decoder_family.h gguf_arch) first. */
static const arch_map k_arch_map[] = {
    {"llama4", "llama4_text"}, /* the text decoder (the vision tower is a separate mmproj file) */
    {"llama-embed", "llama"},
    {"deci", "nemotron-nas"},
    {"mistral3", "mistral3"},
    {"mistral4", "mistral4"},
    {"gemma3n", "gemma3n_text"},
    {"gemma4", "gemma4_text"},
    {"gemma-embedding", "gemma3_text"}, /* EmbeddingGemma is a bidirectional gemma3_text */
    {"qwen2moe", "qwen2_moe"},
    {"qwen3moe", "qwen3_moe"},
    {"qwen3next", "qwen3_next"},
    {"qwen3vlmoe", "qwen3_vl_moe"},
    {"qwen35", "qwen3_5"},
    {"qwen35moe", "qwen3_5_moe"},
    {"phi2", "phi"},
    {"phimoe", "phimoe"},
    {"starcoder", "gpt_bigcode"},
    {"gptneox", "gpt_neox"},
    {"gpt-oss", "gpt_oss"},
    {"bert", "bert"},
    {"modern-bert", "modernbert"},
    {"nomic-bert", "nomic_bert"},
    {"nomic-bert-moe", "nomic_bert_moe"},
    {"olmo", "olmo"},
    {"olmoe", "olmoe"},
    {"granitemoe", "granitemoe"},
    {"granitehybrid", "granitemoehybrid"},
    {"deepseek", "deepseek"},
    {"deepseek2", "deepseek_v2"}, /* deepseek_v3 when the router is sigmoid, see below */
    {"command-r", "cohere"},
    {"cohere2", "cohere2"},
    {"internlm2", "internlm2"},
    {"minicpm", "minicpm"},
    {"minicpm3", "minicpm3"},
    {"stablelm", "stablelm"},
    {"nemotron", "nemotron"},
    {"nemotron_h", "nemotron_h"},
    {"nemotron_h_moe", "nemotron_h"},
    {"exaone", "exaone"},
    {"exaone4", "exaone4"},
    {"exaone-moe", "exaone_moe"},
    {"glm4", "glm4"},
    {"glm4moe", "glm4_moe"},
    {"glm-dsa", "glm_moe_dsa"},
    {"ernie4_5", "ernie4_5"},
    {"ernie4_5-moe", "ernie4_5_moe"},
    {"hunyuan-dense", "hunyuan_v1_dense"},
    {"hunyuan-moe", "hunyuan"},
    {"mamba", "mamba"},
    {"mamba2", "mamba2"},
    {"jamba", "jamba"},
    {"falcon-h1", "falcon_h1"},
    {"rwkv7", "rwkv7"},
    {"lfm2", "lfm2"},
    {"lfm2moe", "lfm2_moe"},
    {"plamo2", "plamo2"},
    {"openelm", "openelm"},
    {"bitnet", "bitnet"},
    {"dbrx", "dbrx"},
    {"dots1", "dots1"},
    {"bailingmoe", "bailing_moe"},
    {"afmoe", "afmoe"},
    {"arcee", "arcee"},
    {"apertus", "apertus"},
    {"seed_oss", "seed_oss"},
    {"kimi-linear", "kimi_linear"},
    {"step35", "step3p5"},
    {"mimo2", "mimo_v2_flash"},
    {"minimax-m2", "minimax_m2"},
};

const char *mxl_gguf_arch_to_model_type(const char *arch) {
    if (!arch) return NULL;
    const mxl_decoder_family *fam = mxl_decoder_family_find_gguf(arch); /* the families we run */
    if (fam) return fam->model_type;
    for (size_t i = 0; i < sizeof k_arch_map / sizeof k_arch_map[0]; i++)
        if (strcmp(k_arch_map[i].gguf, arch) == 0) return k_arch_map[i].hf;
    return NULL;
}

/* llama.h enum llama_ftype, LLAMA_FTYPE_MOSTLY_X -> "X" (ALL_F32 -> "F32"). */
static const char *const k_file_types[] = {
    [0] = "F32",          [1] = "F16",          [2] = "Q4_0",     [3] = "Q4_1",
    [4] = "Q4_1_SOME_F16", [7] = "Q8_0",        [8] = "Q5_0",     [9] = "Q5_1",
    [10] = "Q2_K",        [11] = "Q3_K_S",      [12] = "Q3_K_M",  [13] = "Q3_K_L",
    [14] = "Q4_K_S",      [15] = "Q4_K_M",      [16] = "Q5_K_S",  [17] = "Q5_K_M",
    [18] = "Q6_K",        [19] = "IQ2_XXS",     [20] = "IQ2_XS",  [21] = "Q2_K_S",
    [22] = "IQ3_XS",      [23] = "IQ3_XXS",     [24] = "IQ1_S",   [25] = "IQ4_NL",
    [26] = "IQ3_S",       [27] = "IQ3_M",       [28] = "IQ2_S",   [29] = "IQ2_M",
    [30] = "IQ4_XS",      [31] = "IQ1_M",       [32] = "BF16",    [33] = "Q4_0_4_4",
    [34] = "Q4_0_4_8",    [35] = "Q4_0_8_8",    [36] = "TQ1_0",   [37] = "TQ2_0",
    [38] = "MXFP4_MOE",   [39] = "NVFP4",       [40] = "Q1_0",
};
#define LLAMA_FTYPE_GUESSED 1024u

const char *mxl_gguf_file_type_name(uint64_t file_type) {
    file_type &= ~(uint64_t)LLAMA_FTYPE_GUESSED;
    if (file_type >= sizeof k_file_types / sizeof k_file_types[0]) return NULL;
    return k_file_types[file_type];
}

/* ---- typed key readers -------------------------------------------------------------------- */

typedef struct ctx {
    const mxl_gguf *g;
    const char *origin;
    const char *arch;
    mxl_error *err;
} ctx;

/* "ARCH.suffix" into buf. */
static const char *arch_key(const ctx *c, const char *suffix, char *buf, size_t cap) {
    snprintf(buf, cap, "%s.%s", c->arch, suffix);
    return buf;
}

/* Integer key in [lo, hi]; an ARRAY of integers (a per-layer value, e.g. head_count_kv in
 * models whose layers differ) yields its maximum, which is what buffers must be sized for.
 * Leaves *out untouched when the key is absent (or an empty array). */
static mxl_status opt_int(const ctx *c, const char *key, bool allow_array, int64_t lo, int64_t hi,
                          int64_t *out) {
    const mxl_gguf_kv *kv = mxl_gguf_find(c->g, key);
    if (!kv) return MXL_OK;
    int64_t v;
    if (kv->value.type == MXL_GGUF_TYPE_ARRAY && allow_array) {
        const mxl_gguf_array *a = &kv->value.v.arr;
        bool any = false;
        int64_t best = 0;
        for (uint64_t i = 0; i < a->n; i++) {
            mxl_gguf_value e;
            int64_t x;
            if (!mxl_gguf_array_get(a, i, &e) || !mxl_gguf_value_as_i64(&e, &x))
                return mxl_error_set(c->err, MXL_ERR_FORMAT,
                                     "%s: metadata key '%s' is an array of %s, expected integers",
                                     c->origin, key, mxl_gguf_type_name(a->elem_type));
            if (!any || x > best) best = x;
            any = true;
        }
        if (!any) return MXL_OK;
        v = best;
    } else if (!mxl_gguf_value_as_i64(&kv->value, &v)) {
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' has type %s, expected %s",
                             c->origin, key, mxl_gguf_type_name(kv->value.type),
                             allow_array ? "an integer or an array of integers" : "an integer");
    }
    if (v < lo || v > hi)
        return mxl_error_set(c->err, MXL_ERR_FORMAT,
                             "%s: metadata key '%s' is %lld, outside [%lld, %lld]", c->origin, key,
                             (long long)v, (long long)lo, (long long)hi);
    *out = v;
    return MXL_OK;
}

/* Finite number (float or integer type); untouched when absent. */
static mxl_status opt_float(const ctx *c, const char *key, double *out) {
    const mxl_gguf_kv *kv = mxl_gguf_find(c->g, key);
    if (!kv) return MXL_OK;
    double v;
    if (!mxl_gguf_value_as_f64(&kv->value, &v))
        return mxl_error_set(c->err, MXL_ERR_FORMAT,
                             "%s: metadata key '%s' has type %s, expected a number", c->origin, key,
                             mxl_gguf_type_name(kv->value.type));
    if (!isfinite(v))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' is not finite",
                             c->origin, key);
    *out = v;
    return MXL_OK;
}

#define TRY(expr)                                                                                \
    do {                                                                                         \
        mxl_status st_ = (expr);                                                                 \
        if (st_ != MXL_OK) return st_;                                                           \
    } while (0)

/* ---- pieces of the config ----------------------------------------------------------------- */

static mxl_status read_arch(ctx *c, mxl_model_config *cfg, char *arch, size_t cap) {
    const mxl_gguf_kv *kv = mxl_gguf_find(c->g, "general.architecture");
    if (!kv)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key 'general.architecture' is missing",
                             c->origin);
    if (kv->value.type != MXL_GGUF_TYPE_STRING)
        return mxl_error_set(c->err, MXL_ERR_FORMAT,
                             "%s: metadata key 'general.architecture' has type %s, expected STRING",
                             c->origin, mxl_gguf_type_name(kv->value.type));
    const mxl_gguf_str *s = &kv->value.v.str;
    if (s->len == 0 || s->len >= cap || s->len >= sizeof cfg->model_type)
        return mxl_error_set(c->err, MXL_ERR_FORMAT,
                             "%s: metadata key 'general.architecture' is empty or longer than %zu "
                             "bytes",
                             c->origin, sizeof cfg->model_type - 1);
    for (uint64_t i = 0; i < s->len; i++) {
        unsigned char ch = (unsigned char)s->data[i];
        if (ch <= 0x20 || ch >= 0x7f)
            return mxl_error_set(c->err, MXL_ERR_FORMAT,
                                 "%s: metadata key 'general.architecture' has a non-printable "
                                 "character",
                                 c->origin);
    }
    memcpy(arch, s->data, (size_t)s->len);
    arch[s->len] = '\0';
    c->arch = arch;

    const char *mt = mxl_gguf_arch_to_model_type(arch);
    if (mt && strcmp(arch, "deepseek2") == 0) {
        /* llama.cpp converts DeepSeek V2 and V3 to the same "deepseek2" architecture; V3 is the
         * one with a sigmoid router (LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID = 2). */
        char key[160];
        int64_t gating = -1;
        TRY(opt_int(c, arch_key(c, "expert_gating_func", key, sizeof key), false, 0, 255, &gating));
        if (gating == 2) mt = "deepseek_v3";
    }
    if (mt && strcmp(arch, "llama") == 0) {
        /* llama.cpp converts Mixtral to "llama" with experts */
        char key[160];
        int64_t experts = 0;
        TRY(opt_int(c, arch_key(c, "expert_count", key, sizeof key), false, 0, MAX_SIZE, &experts));
        if (experts > 0) mt = "mixtral";
    }
    snprintf(cfg->model_type, sizeof cfg->model_type, "%s", mt ? mt : arch);
    return MXL_OK;
}

static mxl_status read_sizes(ctx *c, mxl_model_config *cfg) {
    char key[160];
#define K(suffix) arch_key(c, suffix, key, sizeof key)
    TRY(opt_int(c, K("block_count"), false, 0, MAX_LAYERS, &cfg->num_hidden_layers));
    TRY(opt_int(c, K("embedding_length"), false, 0, MAX_SIZE, &cfg->hidden_size));
    /* per-layer arrays (OpenELM, Deci/Nemotron-NAS, Gemma 3n) -> the widest layer */
    TRY(opt_int(c, K("feed_forward_length"), true, 0, MAX_SIZE, &cfg->intermediate_size));
    TRY(opt_int(c, K("attention.head_count"), true, 0, MAX_SIZE, &cfg->num_attention_heads));
    /* head_count_kv may be a per-layer array (Deci/Nemotron-NAS, OpenELM, hybrid models with 0
     * for non-attention layers): take the maximum, the size the KV cache must hold per layer. */
    TRY(opt_int(c, K("attention.head_count_kv"), true, 0, MAX_SIZE, &cfg->num_key_value_heads));
    TRY(opt_int(c, K("attention.key_length"), false, 0, MAX_SIZE, &cfg->head_dim));
    TRY(opt_int(c, K("context_length"), false, 0, MAX_SIZE, &cfg->max_position_embeddings));
    TRY(opt_int(c, K("attention.sliding_window"), false, 0, MAX_SIZE, &cfg->sliding_window));
    TRY(opt_int(c, K("expert_count"), false, 0, MAX_SIZE, &cfg->num_experts));
    TRY(opt_int(c, K("expert_used_count"), false, 0, MAX_SIZE, &cfg->num_experts_per_tok));
    TRY(opt_float(c, K("rope.freq_base"), &cfg->rope_theta));
    TRY(opt_float(c, K("attention.layer_norm_rms_epsilon"), &cfg->rms_norm_eps));
    TRY(opt_float(c, K("attention.layer_norm_epsilon"), &cfg->layer_norm_eps));

    if (cfg->num_key_value_heads < 0) cfg->num_key_value_heads = cfg->num_attention_heads;
    if (cfg->head_dim < 0 && cfg->hidden_size >= 0 && cfg->num_attention_heads > 0)
        cfg->head_dim = cfg->hidden_size / cfg->num_attention_heads;

    int64_t rope_dim = -1;
    TRY(opt_int(c, K("rope.dimension_count"), false, 0, MAX_SIZE, &rope_dim));
    if (rope_dim >= 0 && cfg->head_dim > 0)
        cfg->partial_rotary_factor = (double)rope_dim / (double)cfg->head_dim;
    /* multi-head latent attention (deepseek2): the cached latent and its rotary key part */
    TRY(opt_int(c, K("attention.kv_lora_rank"), false, 0, MAX_SIZE, &cfg->kv_lora_rank));
    if (cfg->kv_lora_rank > 0) cfg->qk_rope_head_dim = rope_dim;

    int64_t vocab = -1;
    TRY(opt_int(c, K("vocab_size"), false, 0, MAX_SIZE, &vocab));
    if (vocab < 0) {
        const mxl_gguf_kv *kv = mxl_gguf_find(c->g, "tokenizer.ggml.tokens");
        if (kv) {
            if (kv->value.type != MXL_GGUF_TYPE_ARRAY)
                return mxl_error_set(c->err, MXL_ERR_FORMAT,
                                     "%s: metadata key 'tokenizer.ggml.tokens' has type %s, "
                                     "expected ARRAY",
                                     c->origin, mxl_gguf_type_name(kv->value.type));
            vocab = (int64_t)kv->value.v.arr.n; /* bounded by the file size */
        }
    }
    cfg->vocab_size = vocab;
#undef K
    return MXL_OK;
}

static mxl_status read_token_ids(ctx *c, mxl_model_config *cfg) {
    TRY(opt_int(c, "tokenizer.ggml.bos_token_id", false, 0, MAX_SIZE, &cfg->bos_token_id));
    /* EOS and the end-of-turn / end-of-message ids a GGUF declares: the eos_token_id list that
     * `convert` writes. (Generation stops on the tokenizer's end-of-generation set, which
     * gguf_vocab.c builds as llama.cpp does and which holds these.) */
    static const char *const eos_keys[] = {"tokenizer.ggml.eos_token_id",
                                           "tokenizer.ggml.eot_token_id",
                                           "tokenizer.ggml.eom_token_id"};
    for (size_t k = 0; k < sizeof eos_keys / sizeof eos_keys[0]; k++) {
        int64_t id = -1;
        TRY(opt_int(c, eos_keys[k], false, 0, MAX_SIZE, &id));
        if (id < 0) continue;
        bool dup = false;
        for (int i = 0; i < cfg->n_eos; i++) dup |= cfg->eos_token_ids[i] == id;
        if (!dup && cfg->n_eos < MXL_CONFIG_MAX_EOS) cfg->eos_token_ids[cfg->n_eos++] = id;
    }
    return MXL_OK;
}

/* Per-layer sliding-window pattern: layer i uses full attention when (i + 1) % pattern == 0
 * (llama.cpp hparams.set_swa_pattern; pattern 0 = every layer sliding, 1 = none). Explicit
 * `ARCH.attention.sliding_window_pattern` (integer, or one bool per layer with true = sliding)
 * wins; otherwise Gemma 2 alternates (pattern 2) and Gemma 3 has 5 sliding layers then 1
 * global (pattern 6), as transformers' Gemma2/Gemma3 configs and llama.cpp do. */
static mxl_status read_layer_pattern(ctx *c, mxl_model_config *cfg) {
    char key[160];
    int64_t n_layers = cfg->num_hidden_layers;
    int64_t pattern = -1;
    const mxl_gguf_kv *kv =
        mxl_gguf_find(c->g, arch_key(c, "attention.sliding_window_pattern", key, sizeof key));
    const mxl_gguf_array *flags = NULL;
    if (kv) {
        if (kv->value.type == MXL_GGUF_TYPE_ARRAY) {
            flags = &kv->value.v.arr;
            if (flags->elem_type != MXL_GGUF_TYPE_BOOL || n_layers < 0 ||
                flags->n != (uint64_t)n_layers)
                return mxl_error_set(c->err, MXL_ERR_FORMAT,
                                     "%s: metadata key '%s' must be an integer or one BOOL per "
                                     "layer (%lld)",
                                     c->origin, key, (long long)n_layers);
        } else {
            TRY(opt_int(c, key, false, 0, MAX_LAYERS, &pattern));
        }
    } else {
        /* the family's default where llama.cpp hard-codes one (Gemma 2: 2, Gemma 3: 6) */
        const mxl_decoder_family *fam = mxl_decoder_family_find_gguf(c->arch);
        if (fam && fam->gguf_sliding_pattern > 0) pattern = fam->gguf_sliding_pattern;
    }
    if (!flags && pattern < 0) return MXL_OK;
    if (pattern >= 0) cfg->sliding_window_pattern = pattern;
    if (n_layers <= 0) return MXL_OK;
    uint8_t *kinds = mxl_arena_alloc(&cfg->arena, (size_t)n_layers, 1);
    if (!kinds) return mxl_error_set(c->err, MXL_ERR_NOMEM, "%s: out of memory", c->origin);
    for (int64_t i = 0; i < n_layers; i++) {
        if (flags) {
            mxl_gguf_value e;
            kinds[i] = mxl_gguf_array_get(flags, (uint64_t)i, &e) && e.v.b ? 1 : 0;
        } else {
            kinds[i] = pattern == 0 ? 1 : ((i + 1) % pattern != 0);
        }
    }
    cfg->layer_is_sliding = kinds;
    cfg->n_layer_types = (int)n_layers;
    return MXL_OK;
}

/* general.file_type's llama.cpp name, else the ggml type of most weight matrices (tensors with
 * two or more dims; ties go to the type holding more bytes). */
static mxl_status read_quant(ctx *c, mxl_model_config *cfg) {
    cfg->quant.mode = MXL_QUANT_GGUF;
    const mxl_gguf_kv *kv = mxl_gguf_find(c->g, "general.file_type");
    if (kv) {
        uint64_t ft;
        if (!mxl_gguf_value_as_u64(&kv->value, &ft))
            return mxl_error_set(c->err, MXL_ERR_FORMAT,
                                 "%s: metadata key 'general.file_type' has type %s, expected an "
                                 "unsigned integer",
                                 c->origin, mxl_gguf_type_name(kv->value.type));
        const char *name = mxl_gguf_file_type_name(ft);
        if (name) {
            snprintf(cfg->quant.method, sizeof cfg->quant.method, "%s", name);
            return MXL_OK;
        }
    }
    enum { N = 64 };
    uint64_t count[N] = {0}, bytes[N] = {0};
    uint64_t nt = mxl_gguf_n_tensors(c->g);
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: matrices only; pass 1 (no matrices at all): every tensor */
        for (uint64_t i = 0; i < nt; i++) {
            const mxl_gguf_tensor_info *ti = mxl_gguf_tensor_at(c->g, i);
            if ((pass == 0 && ti->tensor.ndim < 2) || ti->ggml_type >= N) continue;
            count[ti->ggml_type]++;
            bytes[ti->ggml_type] += ti->tensor.nbytes; /* sum bounded by the file size */
        }
        int best = -1;
        for (int t = 0; t < N; t++) {
            if (!count[t]) continue;
            if (best < 0 || count[t] > count[best] ||
                (count[t] == count[best] && bytes[t] > bytes[best]))
                best = t;
        }
        if (best >= 0) {
            const char *name = mxl_ggml_type_name((uint32_t)best);
            snprintf(cfg->quant.method, sizeof cfg->quant.method, "%s", name ? name : "?");
            return MXL_OK;
        }
    }
    return MXL_OK;
}

mxl_status mxl_gguf_arch_number(const mxl_gguf *g, const char *origin, const char *suffix,
                                double *out, mxl_error *err) {
    char arch[64], key[192];
    const mxl_gguf_kv *kv = mxl_gguf_find(g, "general.architecture");
    if (!kv || !mxl_gguf_value_copy_str(&kv->value, arch, sizeof arch)) return MXL_OK;
    ctx c = {.g = g, .origin = origin ? origin : mxl_gguf_name(g), .arch = arch, .err = err};
    return opt_float(&c, arch_key(&c, suffix, key, sizeof key), out);
}

mxl_status mxl_model_config_from_gguf(const mxl_gguf *g, const char *origin,
                                      mxl_model_config *out, mxl_error *err) {
    mxl_model_config_init(out);
    out->source = MXL_CONFIG_SOURCE_GGUF;
    out->raw = NULL;
    char arch[64] = "";
    ctx c = {.g = g, .origin = origin ? origin : mxl_gguf_name(g), .arch = "", .err = err};
    mxl_status st = read_arch(&c, out, arch, sizeof arch);
    if (st == MXL_OK) st = read_sizes(&c, out);
    if (st == MXL_OK) st = read_token_ids(&c, out);
    if (st == MXL_OK) st = read_layer_pattern(&c, out);
    if (st == MXL_OK) st = read_quant(&c, out);
    if (st == MXL_OK) {
        /* llama.cpp reuses token_embd.weight as the LM head when output.weight is absent */
        out->tie_word_embeddings = mxl_gguf_find_tensor(g, "output.weight") == NULL;
        /* a sliding-layer RoPE base llama.cpp hard-codes (Gemma 3's 10000); GGUF has no key */
        const mxl_decoder_family *fam = mxl_decoder_family_find_gguf(arch);
        if (fam && fam->gguf_rope_local_theta > 0) out->rope_local_base_freq = fam->gguf_rope_local_theta;
    }
    if (st != MXL_OK) {
        mxl_model_config_free(out);
        mxl_model_config_init(out);
    }
    return st;
}
