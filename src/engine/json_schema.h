/* json_schema.h - JSON Schema -> GBNF grammar (engine/grammar.h), with the semantics of llama.cpp's
 * common/json-schema-to-grammar.cpp so a schema constrains output the way llama-server does:
 *
 *   type object / array / string / number / integer / boolean / null, and type lists;
 *   properties in schema order, `required` (the rest optional, still in order), additionalProperties
 *   (false by default for generation; true or a schema adds other keys after the known ones);
 *   items / prefixItems (tuples), minItems / maxItems; enum, const; anyOf / oneOf (as anyOf);
 *   allOf of objects (their properties merged); $ref to #/$defs/..., #/definitions/... (any local
 *   JSON pointer; recursion allowed); string minLength / maxLength, pattern (^...$, the regex
 *   subset llama.cpp translates), format date / time / date-time / uuid; integer minimum /
 *   maximum / exclusiveMinimum / exclusiveMaximum.
 *
 * `{}` (and a bare {"type": "object"}) is any JSON object, as in llama.cpp. Whitespace between
 * tokens is the `space` rule: nothing, one space, or one or two newlines and up to 20 blanks.
 * Errors (remote $ref, unknown type, bad pattern) are one line naming the problem. */
#ifndef MXL_ENGINE_JSON_SCHEMA_H
#define MXL_ENGINE_JSON_SCHEMA_H

#include <jansson.h>

#include "core/status.h"

/* Converts schema into GBNF text (*out, malloc'd, NUL-terminated; `root` is the schema). */
mxl_status mxl_json_schema_to_grammar(const json_t *schema, char **out, mxl_error *err);
/* The same from JSON text. */
mxl_status mxl_json_schema_text_to_grammar(const char *text, size_t len, char **out, mxl_error *err);

#endif
