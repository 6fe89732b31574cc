/* fuzz_json_schema.c - libFuzzer harness for the JSON Schema -> GBNF converter
 * (engine/json_schema.h): the input is parsed as JSON (any value, as a request's response_format
 * or tool parameters may hold) and converted, both from the parsed value
 * (mxl_json_schema_to_grammar, as the server calls it) and from the text
 * (mxl_json_schema_text_to_grammar).
 *
 * Asserts (abort()), besides no crash / leak / UB:
 *   - when the converter returns MXL_OK, its grammar parses with the grammar parser
 *     (mxl_grammar_parse), so a schema the converter accepts never fails later as a bad grammar;
 *   - a refusal comes with a message;
 *   - the value and text entry points agree (same status, same grammar);
 *   - the parse state starts (or is refused as too large), and matching a few JSON texts against
 *     the grammar stays in bounds. */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const PROBES[] = {
    "{}", "[]", "\"\"", "\"abc\"", "0", "-12.5e3", "null", "true", "false", "{\"a\": 1, \"b\": [\"x\", null]}", "[1, 2, 3]",
    "\"2012-04-23T18:25:43.511Z\"", "{ \"name\": \"Ann\", \"age\": 31 }", "\"12345678-1234-1234-1234-1234567890ab\"",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 64 * 1024) return 0;
    json_t *schema = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!schema) return 0;
    char *gbnf = NULL, *gbnf2 = NULL;
    mxl_error err = {0}, err2 = {0};
    mxl_status st = mxl_json_schema_to_grammar(schema, &gbnf, &err);
    mxl_status st2 = mxl_json_schema_text_to_grammar((const char *)data, size, &gbnf2, &err2);
    json_decref(schema);
    if (st != st2) abort();
    if (st != MXL_OK) {
        if (!err.msg[0] || !err2.msg[0]) abort();
        if (strcmp(err.msg, err2.msg)) abort();
        mxl_free(gbnf);
        mxl_free(gbnf2);
        return 0;
    }
    if (!gbnf || !gbnf2 || strcmp(gbnf, gbnf2)) abort();
    mxl_free(gbnf2);

    mxl_grammar *g = NULL;
    if (mxl_grammar_parse(gbnf, strlen(gbnf), &g, &err) != MXL_OK) { /* the converter's grammar must parse */
        fprintf(stderr, "the converter's grammar does not parse: %s\n%s\n", err.msg, gbnf);
        abort();
    }
    mxl_free(gbnf);
    mxl_grammar_state *st_ = NULL;
    if (mxl_grammar_state_create(g, &st_, &err) == MXL_OK) {
        for (size_t i = 0; i < sizeof PROBES / sizeof PROBES[0]; i++) {
            mxl_grammar_state_reset(st_);
            volatile bool ok = mxl_grammar_state_accept_bytes(st_, PROBES[i], strlen(PROBES[i]));
            (void)ok;
        }
        mxl_grammar_state_destroy(st_);
    } else if (err.status != MXL_ERR_NOMEM) {
        abort();
    }
    mxl_grammar_destroy(g);
    return 0;
}
