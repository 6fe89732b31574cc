/* constraint.h - a request's output constraint, read as llama-server reads it: `grammar` (GBNF
 * text), `json_schema` (a JSON Schema, converted to GBNF), and on the OpenAI routes
 * `response_format` {"type": "json_object"} (any JSON object), {"type": "json_object", "schema":
 * S} or {"type": "json_schema", "json_schema": {"schema": S}}. The GBNF is compiled once here so
 * a bad grammar or schema is a 400 naming the problem; the request then carries the text in
 * params.sampling.grammar, which the sequence compiles again for its sampler. A request naming
 * no constraint keeps the server's (--grammar / --json-schema ...). */
#ifndef MXL_SERVER_CONSTRAINT_H
#define MXL_SERVER_CONSTRAINT_H

#include <jansson.h>
#include <stdbool.h>

#include "engine/sequence.h"
#include "server/scheduler.h"

/* Reads the constraint fields of body (response_format only when openai is set) into
 * p->sampling.grammar: a malloc'd text owned by the request (free it with the request: the
 * scheduler's jobs take copies), NULL for "no constraint", or left as the server default when the
 * request names none. False with msg set on a wrong type, both grammar and json_schema, a schema
 * that does not convert, a grammar that does not compile, or a grammar, a schema or the grammar
 * made from it over s's --max-grammar-bytes (limits.h; s NULL: the default). */
struct mxl_server;
bool mxl_srv_parse_constraint(const struct mxl_server *s, const json_t *body, bool openai, mxl_seq_params *p, char *msg, size_t ml);

/* The request's own grammar text (not the server default), or NULL. */
char *mxl_srv_constraint_owned(const mxl_seq_params *p, const char *server_default);

/* A server-wide constraint from the serve flags (at most one of them): GBNF text or a file of it,
 * a JSON Schema or a file of it. *out: malloc'd GBNF, NULL when none is given. Errors name the
 * flag. */
mxl_status mxl_srv_constraint_from_flags(const char *grammar, const char *grammar_file, const char *json_schema,
                                         const char *json_schema_file, char **out, mxl_error *err);

#endif
