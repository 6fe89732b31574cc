/* fuzz_config.c - libFuzzer harness for config.json parsing (mxl_model_config_parse_json). */
#include <stddef.h>
#include <stdint.h>

#include "models/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mxl_model_config cfg;
    mxl_error err;
    if (mxl_model_config_parse_json((const char *)data, size, "fuzz/config.json", &cfg, &err) == MXL_OK) {
        /* touch what consumers read */
        volatile int64_t sink = cfg.hidden_size + cfg.num_hidden_layers + cfg.quant.n_overrides;
        for (int i = 0; i < cfg.quant.n_overrides; i++) sink += (int64_t)cfg.quant.overrides[i].prefix[0];
        for (int i = 0; i < cfg.n_layer_types; i++) sink += cfg.layer_is_sliding[i];
        (void)sink;
        mxl_model_config_free(&cfg);
    }
    return 0;
}
