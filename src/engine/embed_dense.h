/* embed_dense.h - sentence-transformers Dense modules: the projections a checkpoint's modules.json
 * lists after Pooling (LaBSE, EmbeddingGemma and many gte / stella exports), applied to the pooled
 * vector before Normalize.
 *
 * Each module directory holds config.json {in_features, out_features, bias, activation_function,
 * use_residual} and model.safetensors {linear.weight [out, in], linear.bias [out]} (any float
 * dtype; converted to f32 once). y = act(W x + b) (+ x with use_residual). Activations: torch's
 * Identity, Tanh, ReLU, Sigmoid, GELU (erf); any other is refused by name at load, as are
 * weights only in pytorch_model.bin and modules whose widths do not chain. */
#ifndef MXL_ENGINE_EMBED_DENSE_H
#define MXL_ENGINE_EMBED_DENSE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/status.h"
#include "models/detect.h"

#define MXL_EMBED_DENSE_MAX MXL_ST_MAX_DENSE

typedef struct mxl_embed_dense {
    int64_t in, out;
    const float *w; /* [out, in] */
    const float *b; /* [out] or NULL */
    int act;        /* private activation code (embed_dense.c) */
    bool residual;
} mxl_embed_dense;

typedef struct mxl_embed_dense_chain {
    int n;
    mxl_embed_dense mods[MXL_EMBED_DENSE_MAX];
    mxl_arena arena; /* owns the weights */
} mxl_embed_dense_chain;

/* Loads the modules dir/subdirs[i] in order; the first must take `width` inputs. An empty list
 * gives an empty chain. */
mxl_status mxl_embed_dense_load(const char *dir, const char (*subdirs)[MXL_ST_PATH_MAX], int n, int64_t width,
                                mxl_embed_dense_chain *out, mxl_error *err);
void mxl_embed_dense_free(mxl_embed_dense_chain *c);
/* Output width of the chain (width when empty). */
int64_t mxl_embed_dense_width(const mxl_embed_dense_chain *c, int64_t width);
/* x [width] -> y [mxl_embed_dense_width]; scratch holds 2 * the widest module's output floats. */
void mxl_embed_dense_apply(const mxl_embed_dense_chain *c, const float *x, float *y, float *scratch);
/* Floats of scratch mxl_embed_dense_apply needs. */
int64_t mxl_embed_dense_scratch_floats(const mxl_embed_dense_chain *c);

#endif
