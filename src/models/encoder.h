/* encoder.h - one front for the bidirectional text encoders (BERT / MiniLM, XLM-RoBERTa,
 * ModernBERT, the SigLIP text tower) chosen by config.json model_type, so the embedding and reranking engines run any
 * of them the same way: load, batch forward to last hidden states, and the facts the input side
 * needs (the usable sequence length, whether token type ids matter, the pair layout). */
#ifndef MXL_MODELS_ENCODER_H
#define MXL_MODELS_ENCODER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/threadpool.h"
#include "models/checkpoint.h"
#include "models/encoder_bert.h"
#include "models/encoder_common.h"
#include "models/encoder_modernbert.h"
#include "models/encoder_siglip.h"

typedef enum mxl_encoder_arch {
    MXL_ENCODER_BERT = 0,
    MXL_ENCODER_XLM_ROBERTA,
    MXL_ENCODER_MODERNBERT,
    MXL_ENCODER_SIGLIP_TEXT,
} mxl_encoder_arch;

typedef struct mxl_encoder {
    mxl_encoder_arch arch;
    int64_t hidden;
    int64_t max_tokens;   /* longest sequence the encoder takes (position table / max_position_embeddings) */
    bool uses_type_ids;   /* BERT: a pair's second segment gets token type 1 */
    bool pair_double_sep; /* RoBERTa-style pairs: <s> A </s></s> B </s> */
    bool pad_to_max;      /* every text padded to max_tokens and pooled at its last position, as the
                           * model was trained (SigLIP: padding="max_length") */
    int64_t pooled_dim;   /* width of mxl_encoder_pooled_head's output (hidden when no head) */
    mxl_bert bert;
    mxl_modernbert modernbert;
    mxl_siglip_text siglip;
} mxl_encoder;

/* One encoder family: its config.json model_type, the architecture the loader builds, and the
 * registry rows (registry.c) it runs: the embedding model and the cross-encoder. */
typedef struct mxl_encoder_family {
    const char *model_type;
    mxl_encoder_arch arch;
    const char *registry_ids[2];
} mxl_encoder_family;

size_t mxl_encoder_family_count(void);
const mxl_encoder_family *mxl_encoder_family_at(size_t i);

/* True for the model_types mxl_encoder_load takes. */
bool mxl_encoder_supports(const char *model_type);
mxl_status mxl_encoder_load(const mxl_checkpoint *ck, mxl_encoder *out, mxl_error *err);
void mxl_encoder_free(mxl_encoder *e);
/* hidden [n_tokens, hidden]. */
mxl_status mxl_encoder_forward(const mxl_encoder *e, const mxl_encoder_batch *batch, mxl_threadpool *pool,
                               float *hidden, mxl_error *err);
/* y[pooled_dim] = the family's head over a pooled state x[hidden] (SigLIP's text head); a copy
 * where the family has none. */
void mxl_encoder_pooled_head(const mxl_encoder *e, const float *x, float *y);
const char *mxl_encoder_arch_name(mxl_encoder_arch a);

#endif
