/* family_gguf.h - llama.cpp conventions shared by the decoder families that also load from GGUF
 * (decoder_family.h: a family's setup sees c->gguf, c->raw == NULL, hyper-parameters in c->cfg
 * from config_gguf.c and llama.cpp's tensor names in c->names). */
#ifndef MXL_MODELS_FAMILY_GGUF_H
#define MXL_MODELS_FAMILY_GGUF_H

#include <stdbool.h>

#include "models/decoder_family.h"

/* RoPE for an architecture llama.cpp converts WITHOUT permuting Q/K rows and runs in NEOX mode
 * (qwen2, qwen3, gemma*, phi3, starcoder2, ...): base rope.freq_base (default 10000), rotating the
 * first rope.dimension_count dims (config_gguf.c turns it into partial_rotary_factor), no scaling
 * (the decoder refuses rope.scaling.type before setup). Sets hp->rope and hp->rope_local. */
mxl_status mxl_family_gguf_rope_neox(mxl_family_ctx *c);

/* A number "ARCH.<suffix>" of the GGUF metadata, `dflt` when absent. */
mxl_status mxl_family_gguf_number(mxl_family_ctx *c, const char *suffix, double dflt, double *out);

/* True when the GGUF holds tensor "<layers>0.<module><suffix>" (optional tensors llama.cpp loads
 * when present: biases, fused projections). */
bool mxl_family_gguf_has_layer0(mxl_family_ctx *c, const char *module, const char *suffix);

#endif
