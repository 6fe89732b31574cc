/* fuzz_adapter.c - libFuzzer harness for LoRA adapter loading (src/models/lora.c: PEFT and
 * mlx-lm directories, llama.cpp GGUF adapters) against small real base models, and for running
 * and fusing what loads.
 *
 * Base models (tests/fixtures/decoders, the fixtures tests/unit/test_lora.c loads, found through
 * $MXL_REPO_ROOT or three folders above this executable) are loaded once: llama (safetensors
 * f32, the PEFT / mlx-lm fixtures' base), qwen3_mlx_q4 (MLX 4-bit weights beside the adapter),
 * qwen2_moe (MoE layers: no dense gate / up / down), deepseek_v2 (latent attention) and
 * gguf/qwen2_f32.gguf (the base of GGUF adapters). Each input is written into a scratch
 * directory and loaded with mxl_lora_load.
 *
 * Input: byte 0: bits 0-1 the layout (0 PEFT: adapter_config.json + adapter_model.safetensors;
 * 1 mlx-lm: adapter_config.json + adapters.safetensors; 2 a GGUF adapter file; 3 PEFT config with
 * no safetensors file); bits 2-4 the base (above, in that order; 5-7: llama, qwen2 GGUF, llama);
 * bit 5 fuse it into a fresh copy of the base; bit 6 run it; bit 7 run it as two adapters at once.
 * Byte 1: the user scale, (int8) / 8. Then, for layouts 0, 1, 3: a little-endian u16 length, the
 * config JSON of that length, and the rest is the safetensors file; for 2 the rest is the GGUF.
 *
 * Asserted: loading succeeds or fails with a one-line message naming the adapter; a loaded adapter
 * has its base's layer count, at least one pair, every pair complete with rank 1..1024 and A
 * [r, in] / B [out, r] equal to the base weight's [out, in], max_r the widest rank. Run (reference
 * path, 4 tokens): the forward succeeds; at scale 0 the logits are the base's bit for bit (when
 * the adapter's values are moderate, |v| <= 1e4, so B A x cannot overflow to inf and give NaN).
 * Fused at the user scale into a fresh dense f32 base: the fused model's logits match the unfused
 * run with the adapter (within 1e-3 relative, values |v| <= 1 and |scale| <= 4); a quantized base
 * refuses fusion and keeps its weights. Seeds: tests/fuzz/corpus/adapter/ (gen_adapter_seeds.py).
 *
 *   make build/fuzz/fuzz_adapter
 *   build/fuzz/fuzz_adapter -max_len=8192 tests/fuzz/corpus/adapter */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "models/checkpoint.h"
#include "models/decoder.h"
#include "models/lora.h"

#define FUZZ_ASSERT(c) ((c) ? (void)0 : fuzz_fail(#c, __LINE__))

static void fuzz_fail(const char *expr, int line) {
    fprintf(stderr, "fuzz_adapter.c:%d: invariant failed: %s\n", line, expr);
    abort();
}

static void check_msg(const mxl_error *err) {
    size_t n = strnlen(err->msg, sizeof err->msg);
    FUZZ_ASSERT(n > 0 && n < sizeof err->msg);
    FUZZ_ASSERT(memchr(err->msg, '\n', n) == NULL);
}

#define N_TOK 4

typedef struct base {
    const char *rel; /* under tests/fixtures/decoders */
    bool dense_f32;  /* all projections dense f32: fusion is exact up to rounding */
    bool quantized;  /* fusion is refused */
    mxl_checkpoint *ck;
    mxl_decoder d;
    float *logits; /* [N_TOK, vocab] of the base, reference path */
} base;

static base g_bases[] = {
    {.rel = "llama", .dense_f32 = true, .quantized = false},
    {.rel = "qwen3_mlx_q4", .dense_f32 = false, .quantized = true},
    {.rel = "qwen2_moe", .dense_f32 = false, .quantized = false},
    {.rel = "deepseek_v2", .dense_f32 = false, .quantized = false},
    {.rel = "gguf/qwen2_f32.gguf", .dense_f32 = false, .quantized = false},
};
static const int k_base_of[8] = {0, 1, 2, 3, 4, 0, 4, 0};

static char g_root[4096], g_dir[4200];
static int32_t g_tok[N_TOK];

static const char *repo_root(void) {
    const char *e = getenv("MXL_REPO_ROOT");
    if (e && *e) {
        snprintf(g_root, sizeof g_root, "%s", e);
        return g_root;
    }
    ssize_t n = readlink("/proc/self/exe", g_root, sizeof g_root - 1);
    if (n <= 0) {
        fprintf(stderr, "fuzz_adapter: cannot find the repository root; set MXL_REPO_ROOT\n");
        abort();
    }
    g_root[n] = 0;
    for (int k = 0; k < 3; k++) {
        char *s = strrchr(g_root, '/');
        if (!s) abort();
        *s = 0;
    }
    return g_root;
}

static void base_path(const base *b, char *out, size_t cap) {
    snprintf(out, cap, "%s/tests/fixtures/decoders/%s", g_root, b->rel);
}

/* Every position's logits [N_TOK, vocab] of d with the adapters `use` (n of them), reference path. */
static void run(const mxl_decoder *d, const mxl_decoder_lora *use, int n, float *out) {
    mxl_error err = {0};
    mxl_decoder_state *s = NULL;
    FUZZ_ASSERT(mxl_decoder_state_create(d, 16, N_TOK, NULL, &s, &err) == MXL_OK);
    mxl_decoder_state_set_reference(s, true);
    FUZZ_ASSERT(mxl_decoder_state_set_lora(s, use, n, &err) == MXL_OK);
    mxl_status st = mxl_decoder_forward_all(d, s, g_tok, N_TOK, out, &err);
    if (st != MXL_OK) fprintf(stderr, "fuzz_adapter: forward: %s\n", err.msg);
    FUZZ_ASSERT(st == MXL_OK);
    mxl_decoder_state_destroy(s);
}

static void cleanup(void) {
    char p[4400];
    static const char *const files[] = {"adapter_config.json", "adapter_model.safetensors", "adapters.safetensors",
                                        "adapter.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", g_dir, files[i]);
        unlink(p);
    }
    rmdir(g_dir);
}

static void init(void) {
    static int done;
    if (done) return;
    done = 1;
    repo_root();
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/mxl-adapter-scratch-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("fuzz_adapter: mkdtemp");
        abort();
    }
    atexit(cleanup);
    for (size_t i = 0; i < sizeof g_bases / sizeof g_bases[0]; i++) {
        base *b = &g_bases[i];
        char p[4400];
        base_path(b, p, sizeof p);
        mxl_error err = {0};
        if (mxl_checkpoint_open(p, &b->ck, &err) != MXL_OK || mxl_decoder_load(b->ck, &b->d, &err) != MXL_OK) {
            fprintf(stderr, "fuzz_adapter: %s: %s\n", p, err.msg);
            abort();
        }
        b->logits = mxl_malloc((size_t)(N_TOK * b->d.hp.vocab) * sizeof(float));
        FUZZ_ASSERT(b->logits != NULL);
    }
    for (size_t i = 0; i < sizeof g_bases / sizeof g_bases[0]; i++) {
        base *b = &g_bases[i];
        static const int32_t t0[N_TOK] = {1, 37, 200, 5};
        for (int k = 0; k < N_TOK; k++) g_tok[k] = t0[k] % (int32_t)b->d.hp.vocab;
        run(&b->d, NULL, 0, b->logits);
    }
}

static void write_file(const char *name, const uint8_t *data, size_t n) {
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "wb");
    FUZZ_ASSERT(f != NULL);
    FUZZ_ASSERT(n == 0 || fwrite(data, 1, n, f) == n);
    FUZZ_ASSERT(fclose(f) == 0);
}

static void remove_file(const char *name) {
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    unlink(p);
}

static float elem(const void *p, mxl_dtype t, int64_t i) {
    return t == MXL_DTYPE_F32   ? ((const float *)p)[i]
           : t == MXL_DTYPE_F16 ? mxl_f16_to_f32(((const uint16_t *)p)[i])
                                : mxl_bf16_to_f32(((const uint16_t *)p)[i]);
}

/* The largest |value| of every A and B (NaN counts as infinite). */
static double max_abs(const mxl_lora *l) {
    double m = 0;
    for (int64_t i = 0; i < l->n_layers * MXL_LORA_N_MODULES; i++) {
        const mxl_lora_pair *p = &l->pairs[i];
        if (!p->a) continue;
        for (int64_t k = 0; k < p->r * p->in; k++) {
            double v = fabs((double)elem(p->a, p->wa.dtype, k));
            m = v == v && v > m ? v : v == v ? m : INFINITY;
        }
        for (int64_t k = 0; k < p->r * p->out; k++) {
            double v = fabs((double)elem(p->bt, p->bt_dtype, k));
            m = v == v && v > m ? v : v == v ? m : INFINITY;
        }
    }
    return m;
}

static const mxl_weight *base_weight(const mxl_decoder_layer *L, int m) {
    switch (m) {
    case MXL_LORA_Q: return &L->wq;
    case MXL_LORA_K: return &L->wk;
    case MXL_LORA_V: return &L->wv;
    case MXL_LORA_O: return &L->wo;
    case MXL_LORA_GATE: return &L->w_gate;
    case MXL_LORA_UP: return &L->w_up;
    default: return &L->w_down;
    }
}

static void check_loaded(const mxl_lora *l, const base *b) {
    FUZZ_ASSERT(l->n_layers == b->d.hp.n_layers);
    FUZZ_ASSERT(l->n_pairs >= 1);
    int n = 0;
    int64_t max_r = 0;
    for (int64_t i = 0; i < l->n_layers; i++)
        for (int m = 0; m < MXL_LORA_N_MODULES; m++) {
            const mxl_lora_pair *p = &l->pairs[i * MXL_LORA_N_MODULES + m];
            FUZZ_ASSERT((p->a == NULL) == (p->bt == NULL));
            if (!p->a) continue;
            n++;
            FUZZ_ASSERT(mxl_lora_at(l, i, (mxl_lora_module)m) == p);
            FUZZ_ASSERT(p->r >= 1 && p->r <= MXL_LORA_MAX_RANK);
            const mxl_weight *w = base_weight(&b->d.layers[i], m);
            FUZZ_ASSERT(p->out == w->rows && p->in == w->cols);
            FUZZ_ASSERT(p->wa.data == p->a && p->wa.rows == p->r && p->wa.cols == p->in);
            FUZZ_ASSERT(p->bt_dtype == MXL_DTYPE_F32 || p->bt_dtype == MXL_DTYPE_F16 || p->bt_dtype == MXL_DTYPE_BF16);
            if (p->r > max_r) max_r = p->r;
        }
    FUZZ_ASSERT(n == l->n_pairs && max_r == l->max_r);
    FUZZ_ASSERT(!mxl_lora_at(l, -1, MXL_LORA_Q) && !mxl_lora_at(l, l->n_layers, MXL_LORA_Q));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    init();
    const unsigned layout = data[0] & 3;
    base *b = &g_bases[k_base_of[(data[0] >> 2) & 7]];
    const bool fuse = (data[0] >> 5) & 1, fwd = (data[0] >> 6) & 1, twice = (data[0] >> 7) & 1;
    const float scale = (float)(int8_t)data[1] / 8.0f;
    for (int k = 0; k < N_TOK; k++) g_tok[k] = (int32_t)((const int32_t[]){1, 37, 200, 5}[k] % b->d.hp.vocab);
    size_t i = 2;
    char path[4400];
    if (layout == 2) {
        remove_file("adapter_config.json");
        write_file("adapter.gguf", data + i, size - i);
        snprintf(path, sizeof path, "%s/adapter.gguf", g_dir);
    } else {
        size_t cl = 0;
        if (i + 2 <= size) cl = (size_t)data[i] | (size_t)data[i + 1] << 8;
        i = i + 2 <= size ? i + 2 : size;
        if (cl > size - i) cl = size - i;
        write_file("adapter_config.json", data + i, cl);
        i += cl;
        remove_file("adapter_model.safetensors");
        remove_file("adapters.safetensors");
        if (layout == 0) write_file("adapter_model.safetensors", data + i, size - i);
        if (layout == 1) write_file("adapters.safetensors", data + i, size - i);
        snprintf(path, sizeof path, "%s", g_dir);
    }
    mxl_lora *l = NULL;
    mxl_error err = {0};
    mxl_status st = mxl_lora_load(path, b->ck, &b->d, &l, &err);
    if (getenv("FUZZ_ADAPTER_DEBUG")) fprintf(stderr, "%s: %s\n", b->rel, st == MXL_OK ? "loaded" : err.msg);
    if (st != MXL_OK) {
        check_msg(&err);
        FUZZ_ASSERT(l == NULL);
        FUZZ_ASSERT(strstr(err.msg, g_dir) != NULL); /* the adapter is named */
        return 0;
    }
    check_loaded(l, b);
    FUZZ_ASSERT(strcmp(l->path, path) == 0);
    const double mx = max_abs(l);
    if (fwd || fuse) {
        const int64_t nv = N_TOK * b->d.hp.vocab;
        float *got = mxl_malloc((size_t)nv * sizeof(float));
        FUZZ_ASSERT(got != NULL);
        const mxl_decoder_lora use[2] = {{l, twice ? 0.0f : scale}, {l, scale}};
        if (fwd) {
            run(&b->d, use, twice ? 2 : 1, got);
            const mxl_decoder_lora zero[2] = {{l, 0.0f}, {l, 0.0f}};
            if (mx <= 1e4) {
                run(&b->d, zero, twice ? 2 : 1, got);
                FUZZ_ASSERT(memcmp(got, b->logits, (size_t)nv * sizeof(float)) == 0);
            }
        }
        if (fuse) {
            /* a fresh copy of the base: fusion rewrites its weights */
            mxl_checkpoint *ck = NULL;
            mxl_decoder d;
            char p[4400];
            base_path(b, p, sizeof p);
            FUZZ_ASSERT(mxl_checkpoint_open(p, &ck, &err) == MXL_OK && mxl_decoder_load(ck, &d, &err) == MXL_OK);
            const void *before = d.layers[0].wq.data;
            st = mxl_lora_fuse(l, &d, scale, &err);
            if (b->quantized) {
                FUZZ_ASSERT(st == MXL_ERR_UNSUPPORTED);
                check_msg(&err);
                FUZZ_ASSERT(d.layers[0].wq.data == before);
            } else if (st != MXL_OK) {
                check_msg(&err);
                FUZZ_ASSERT(!b->dense_f32);
            } else if (b->dense_f32 && mx <= 1.0 && fabsf(scale) <= 4.0f) {
                float *fused = mxl_malloc((size_t)nv * sizeof(float));
                FUZZ_ASSERT(fused != NULL);
                run(&d, NULL, 0, fused);
                run(&b->d, &use[1], 1, got);
                double worst = 0, big = 1;
                for (int64_t k = 0; k < nv; k++) {
                    worst = fmax(worst, fabs((double)fused[k] - got[k]));
                    big = fmax(big, fabs((double)got[k]));
                }
                if (worst > 1e-3 * big) fprintf(stderr, "fuzz_adapter: fused vs unfused: %g (of %g)\n", worst, big);
                FUZZ_ASSERT(worst <= 1e-3 * big);
                mxl_free(fused);
            }
            mxl_decoder_free(&d);
            mxl_checkpoint_close(ck);
        }
        mxl_free(got);
    }
    mxl_lora_free(l);
    return 0;
}
