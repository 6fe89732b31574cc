/* fuzz_template.c - libFuzzer harness for the Jinja chat-template engine: parses the input as a
 * template and, when it parses, renders it against a small chat context (messages with string
 * and list-of-parts content, a tool call, tools, special tokens) under a tight budget, so no
 * input may crash, leak, read out of bounds or run unbounded. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "template/template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char CONTEXT[] =
    "{\"messages\": ["
    " {\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hi \\u00e9\\ud83d\\udc4b\"},"
    "                                  {\"type\": \"image\"}]},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\","
    "   \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1, \"y\": [1.5, null, true]}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"{\\\"ok\\\": 1}\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\","
    "   \"parameters\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"integer\"}}}}}],"
    " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"add_generation_prompt\": true,"
    " \"n\": 3, \"f\": 0.5, \"big\": 9223372036854775807, \"neg\": -9223372036854775807, \"s\": \"a,b,,c\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static json_t *ctx;
    if (!ctx) {
        ctx = json_loads(CONTEXT, 0, NULL);
        if (!ctx) abort();
    }
    if (size > 64 * 1024) return 0;
    mxl_template *t = NULL;
    mxl_error err;
    if (mxl_template_parse((const char *)data, size, "fuzz.jinja", &t, &err) != MXL_OK) return 0;
    mxl_template_render_opts opts = {0};
    opts.limits.max_steps = 200000;
    opts.limits.max_depth = 40;
    opts.limits.max_output = 1 << 20;
    opts.limits.max_memory = 64u << 20;
    opts.now_set = true;
    opts.now_unix = 1768480496; /* 2026-01-15T12:34:56Z */
    char *out = NULL;
    size_t n = 0;
    if (mxl_template_render(t, ctx, &opts, &out, &n, NULL, &err) == MXL_OK) {
        volatile size_t sink = n ? (size_t)(unsigned char)out[n - 1] : 0;
        (void)sink;
        mxl_free(out);
    }
    mxl_template_destroy(t);
    return 0;
}
