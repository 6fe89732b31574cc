/* checkpoint.h - opens a resolved model path as a checkpoint: its typed config and its tensor
 * table, without reading weights. Two kinds:
 *   safetensors  a directory with config.json and model.safetensors / sharded index / *.safetensors
 *   gguf         a .gguf file, or a GGUF repo directory (no config.json, exactly one *.gguf)
 * Everything stays memory-mapped; tensors are views. */
#ifndef MXL_MODELS_CHECKPOINT_H
#define MXL_MODELS_CHECKPOINT_H

#include <stdint.h>

#include "core/status.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "models/config.h"
#include "models/detect.h"

typedef enum mxl_checkpoint_format {
    MXL_CHECKPOINT_SAFETENSORS = 0,
    MXL_CHECKPOINT_GGUF,
} mxl_checkpoint_format;

typedef struct mxl_checkpoint {
    mxl_checkpoint_format format;
    char path[4096]; /* the checkpoint file (gguf) or directory (safetensors) */
    char dir[4096];  /* directory holding config / sidecar files (sentence-transformers modules) */
    mxl_model_config config;
    mxl_st_model *st;  /* safetensors only */
    mxl_gguf *gguf;    /* gguf only */
    uint64_t n_tensors;
    uint64_t weights_bytes; /* sum of tensor sizes from the headers / tensor infos */
} mxl_checkpoint;

/* `path` is a file or directory (already resolved by io/store). */
mxl_status mxl_checkpoint_open(const char *path, mxl_checkpoint **out, mxl_error *err);
void mxl_checkpoint_close(mxl_checkpoint *ck);
/* mxl_model_detect on an open checkpoint: its typed config, and for a safetensors directory its
 * sentence-transformers files too. */
mxl_status mxl_checkpoint_detect(const mxl_checkpoint *ck, mxl_detection *out, mxl_error *err);
const char *mxl_checkpoint_format_name(mxl_checkpoint_format f);

#endif
