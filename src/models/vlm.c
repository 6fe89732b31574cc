/* vlm.c - picks a checkpoint's vision side by model_type and expands image markers in prompts
 * (see vlm.h). */
#include "models/vlm.h"

#include <jansson.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strbuf.h"
#include "io/safetensors.h"

/* True when the weights hold a vision tower under one of the usual prefixes. */
static bool has_tower(const mxl_checkpoint *ck) {
    if (!ck->st) return false;
    static const char *const k_probe[] = {"vision_tower.vision_model.embeddings.patch_embedding.weight",
                                          "vision_tower.embeddings.patch_embedding.weight",
                                          "model.vision_tower.vision_model.embeddings.patch_embedding.weight",
                                          "model.vision_tower.embeddings.patch_embedding.weight", NULL};
    for (int i = 0; k_probe[i]; i++)
        if (mxl_st_model_find(ck->st, k_probe[i])) return true;
    return false;
}

mxl_status mxl_vlm_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err) {
    *out = NULL;
    const mxl_model_config *c = &ck->config;
    if (ck->format != MXL_CHECKPOINT_SAFETENSORS || !c->has_vision_config || c->language_model_only == 1 || !has_tower(ck)) return MXL_OK;
    if (strcmp(c->model_type, "gemma3") == 0) return mxl_vlm_gemma3_load(ck, out, err);
    return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: the vision tower of model_type '%s' does not run in mlxcel yet", ck->path, c->model_type);
}

void mxl_vlm_free(mxl_vlm *v) {
    if (v && v->destroy) v->destroy(v);
}

mxl_status mxl_vlm_expand_prompt(const mxl_vlm *v, const char *text, size_t len, int n_images, char **out, size_t *out_len,
                                 mxl_error *err) {
    *out = NULL;
    *out_len = 0;
    const size_t ml = strlen(v->marker);
    int found = 0;
    mxl_strbuf sb = {0};
    size_t i = 0;
    bool ok = mxl_strbuf_reserve(&sb, len);
    while (i < len && ok) {
        const char *hit = ml ? memmem(text + i, len - i, v->marker, ml) : NULL;
        size_t upto = hit ? (size_t)(hit - text) : len;
        ok = mxl_strbuf_append(&sb, text + i, upto - i);
        if (!hit) break;
        found++;
        ok = ok && mxl_strbuf_append(&sb, v->before, strlen(v->before));
        for (int64_t t = 0; t < v->tokens_per_image && ok; t++) ok = mxl_strbuf_append(&sb, v->image_text, strlen(v->image_text));
        ok = ok && mxl_strbuf_append(&sb, v->after, strlen(v->after));
        i = upto + ml;
    }
    if (!ok) {
        mxl_strbuf_free(&sb);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    if (found != n_images) {
        mxl_strbuf_free(&sb);
        return mxl_error_set(err, MXL_ERR_ARG, "the prompt has %d image markers (%s) for %d images", found, v->marker, n_images);
    }
    *out_len = sb.n;
    *out = sb.p;
    return MXL_OK;
}
