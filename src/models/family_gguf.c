/* family_gguf.c - llama.cpp conventions shared by the GGUF branches of the decoder families
 * (family_gguf.h). */
#include "models/family_gguf.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/config_gguf.h"

mxl_status mxl_family_gguf_rope_neox(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_rope_cfg *r = &hp->rope;
    memset(r, 0, sizeof *r);
    r->head_dim = r->rotary_dim = (int)hp->head_dim;
    r->theta = !isnan(c->cfg->rope_theta) ? c->cfg->rope_theta : 10000.0;
    r->style = MXL_ROPE_NEOX;
    r->scaling = MXL_ROPE_SCALING_NONE;
    r->factor = 1.0;
    double prf = c->cfg->partial_rotary_factor;
    /* rope.dimension_count / head_dim, back to the integer count */
    if (!isnan(prf) && prf < 1) r->rotary_dim = (int)((double)hp->head_dim * prf + 0.5);
    if (!(r->theta > 0) || r->rotary_dim < 2 || r->rotary_dim % 2)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: rope.freq_base %g / rotary dimension %d (head_dim %lld) are not usable", c->ck->path,
                             r->theta, r->rotary_dim, (long long)hp->head_dim);
    hp->rope_local = *r;
    return MXL_OK;
}

mxl_status mxl_family_gguf_number(mxl_family_ctx *c, const char *suffix, double dflt, double *out) {
    *out = dflt;
    return mxl_gguf_arch_number(c->ck->gguf, c->ck->path, suffix, out, c->err);
}

bool mxl_family_gguf_has_layer0(mxl_family_ctx *c, const char *module, const char *suffix) {
    char name[256];
    int w = snprintf(name, sizeof name, "%s0.%s%s", c->names->layers, module, suffix);
    if (w < 0 || (size_t)w >= sizeof name) return false;
    return mxl_gguf_find_tensor(c->ck->gguf, name) != NULL;
}
