/* families.c - the table of decoder family records (families.h) and the look-ups every reader of
 * the records uses (decoder_family.h): by model_type, by GGUF architecture, in list order. */
#include <stdio.h>
#include <string.h>

#include "models/decoder_family.h"
#include "models/families.h"

#define DECLARE(n) extern const mxl_decoder_family mxl_family_##n;
MXL_DECODER_FAMILIES(DECLARE)
#undef DECLARE

static const mxl_decoder_family *const k_families[] = {
#define ENTRY(n) &mxl_family_##n,
    MXL_DECODER_FAMILIES(ENTRY)
#undef ENTRY
};
#define N_FAMILIES (sizeof k_families / sizeof k_families[0])

size_t mxl_decoder_family_count(void) { return N_FAMILIES; }

const mxl_decoder_family *mxl_decoder_family_at(size_t i) { return i < N_FAMILIES ? k_families[i] : NULL; }

const mxl_decoder_family *mxl_decoder_family_find(const char *model_type) {
    for (size_t i = 0; model_type && i < N_FAMILIES; i++)
        if (strcmp(k_families[i]->model_type, model_type) == 0) return k_families[i];
    return NULL;
}

const mxl_decoder_family *mxl_decoder_family_find_gguf(const char *gguf_arch) {
    for (size_t i = 0; gguf_arch && i < N_FAMILIES; i++)
        if (k_families[i]->gguf_arch && strcmp(k_families[i]->gguf_arch, gguf_arch) == 0) return k_families[i];
    return NULL;
}

void mxl_decoder_family_list(char *buf, size_t cap, bool gguf_only) {
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_FAMILIES; i++) {
        if (gguf_only && !k_families[i]->gguf_arch) continue;
        int w = snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", k_families[i]->model_type);
        if (w < 0 || (size_t)w >= cap - len) break;
        len += (size_t)w;
    }
}
