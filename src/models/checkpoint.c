/* checkpoint.c - config + tensor table of a safetensors directory or GGUF file (checkpoint.h). */
#include "models/checkpoint.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "io/store.h"
#include "models/config_gguf.h"

const char *mxl_checkpoint_format_name(mxl_checkpoint_format f) {
    return f == MXL_CHECKPOINT_GGUF ? "gguf" : "safetensors";
}

static int copy_path(char *dst, size_t cap, const char *src) {
    return (size_t)snprintf(dst, cap, "%s", src) >= cap;
}

static mxl_status open_gguf(mxl_checkpoint *ck, const char *file, mxl_error *err) {
    ck->format = MXL_CHECKPOINT_GGUF;
    if (copy_path(ck->path, sizeof ck->path, file))
        return mxl_error_set(err, MXL_ERR_ARG, "path too long: %s", file);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", file);
    snprintf(ck->dir, sizeof ck->dir, "%s", dirname(tmp));
    mxl_status st = mxl_gguf_open(file, &ck->gguf, err);
    if (st != MXL_OK) return st;
    st = mxl_model_config_from_gguf(ck->gguf, file, &ck->config, err);
    if (st != MXL_OK) return st;
    ck->n_tensors = mxl_gguf_n_tensors(ck->gguf);
    ck->weights_bytes = mxl_gguf_tensor_bytes_total(ck->gguf);
    return MXL_OK;
}

static mxl_status open_safetensors_dir(mxl_checkpoint *ck, const char *dir, mxl_error *err) {
    ck->format = MXL_CHECKPOINT_SAFETENSORS;
    if (copy_path(ck->path, sizeof ck->path, dir) || copy_path(ck->dir, sizeof ck->dir, dir))
        return mxl_error_set(err, MXL_ERR_ARG, "path too long: %s", dir);
    mxl_status st = mxl_model_config_load_dir(dir, &ck->config, err);
    if (st != MXL_OK) return st;
    st = mxl_st_model_open(dir, &ck->st, err);
    if (st != MXL_OK) return st;
    ck->n_tensors = mxl_st_model_tensor_count(ck->st);
    ck->weights_bytes = mxl_st_model_total_bytes(ck->st);
    return MXL_OK;
}

mxl_status mxl_checkpoint_open(const char *path, mxl_checkpoint **out, mxl_error *err) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return mxl_error_set(err, MXL_ERR_NOT_FOUND, "%s: no such file or directory", path);
    mxl_checkpoint *ck = mxl_calloc(1, sizeof *ck);
    if (!ck) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_model_config_init(&ck->config);
    mxl_status st;
    if (S_ISDIR(sb.st_mode)) {
        char gguf[4096];
        st = mxl_store_gguf_in_dir(path, gguf, sizeof gguf, err);
        if (st == MXL_OK) st = gguf[0] ? open_gguf(ck, gguf, err) : open_safetensors_dir(ck, path, err);
    } else {
        /* a single file: GGUF by magic; a lone .safetensors file has no config to go with it */
        FILE *f = fopen(path, "rb");
        char magic[4] = {0};
        size_t n = f ? fread(magic, 1, 4, f) : 0;
        if (f) fclose(f);
        if (n == 4 && memcmp(magic, "GGUF", 4) == 0)
            st = open_gguf(ck, path, err);
        else
            st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: not a GGUF file; pass a model directory (config.json + *.safetensors) or a .gguf file", path);
    }
    if (st != MXL_OK) {
        mxl_checkpoint_close(ck);
        return st;
    }
    *out = ck;
    return MXL_OK;
}

void mxl_checkpoint_close(mxl_checkpoint *ck) {
    if (!ck) return;
    mxl_model_config_free(&ck->config);
    mxl_st_model_close(ck->st);
    if (ck->gguf) mxl_gguf_close(ck->gguf);
    mxl_free(ck);
}

mxl_status mxl_checkpoint_detect(const mxl_checkpoint *ck, mxl_detection *out, mxl_error *err) {
    return mxl_model_detect(&ck->config, ck->format == MXL_CHECKPOINT_SAFETENSORS ? ck->dir : NULL, out, err);
}
