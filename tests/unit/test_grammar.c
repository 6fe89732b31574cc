/* test_grammar.c - GBNF grammars, the JSON Schema converter and constrained sampling.
 *
 * Truth: the accept / reject expectations are llama.cpp's own, copied as data from
 * tests/test-grammar-integration.cpp (ggml-org/llama.cpp, commit 072efa22a25d): test_grammar cases
 * (grammar + strings it must and must not match), test_schema cases (a schema converted by
 * json-schema-to-grammar, then the same), and the build failures (missing rule, left recursion).
 * llama.cpp's token-reference cases (<[id]>) are left out: this build does not parse that syntax.
 * The server suite's invalid grammar ("root ::= this is (not valid GBNF") comes from llama.cpp's
 * tools/server/tests/unit/test_chat_completion.py. The real-model test checks that every
 * constrained generation of SmolLM2 is accepted by the grammar it ran under, and that greedy
 * decoding under a grammar that admits the unconstrained greedy text leaves it unchanged. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/generate.h"
#include "engine/grammar.h"
#include "engine/grammar_tok.h"
#include "engine/json_schema.h"
#include "engine/sampler.h"
#include "test.h"

typedef struct gcase {
    const char *desc;
    const char *grammar; /* GBNF, or a JSON schema when schema is set */
    bool schema;
    const char *pass[24];
    const char *fail[24];
} gcase;

static const gcase k_cases[] = {
    /* test_simple_grammar: integer ranges through the schema converter */
    {"min 0", "{\"type\": \"integer\", \"minimum\": 0}", true, {"0", "10", "12", "10000"},
     {"-1", "-10", "-10000", "-100000000000000000000000000000000", "100000000000000000000000000000000", "00", "01", "-0"}},
    {"min 2", "{\"type\": \"integer\", \"minimum\": 2}", true, {"2", "3", "4", "10", "20", "1234567890000000"},
     {"0", "1", "-1", "-100", "0", "1", "01", "02", "12345678900000000"}},
    {"min 456", "{\"type\": \"integer\", \"minimum\": 456}", true, {"456", "4560", "457", "460", "500"},
     {"455", "356", "50", "050", "-1", "-456"}},
    {"min -123", "{\"type\": \"integer\", \"minimum\": -123}", true, {"-123", "-122", "-11", "-1", "0", "1", "123", "1234", "2345"},
     {"-1234", "-124"}},
    {"max 9999", "{\"type\": \"integer\", \"maximum\": 9999}", true, {"-99999", "0", "9999"}, {"10000", "99991"}},
    {"max -9999", "{\"type\": \"integer\", \"maximum\": -9999}", true, {"-10000", "-9999"}, {"-9998", "0", "9999"}},
    {"min 5 max 30", "{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 30}", true, {"5", "10", "30"},
     {"05", "4", "-1", "31", "123", "0123"}},
    {"min 1 max 900719925474091", "{\"type\": \"integer\", \"exclusiveMinimum\": 0, \"maximum\": 900719925474091}", true,
     {"1", "2", "10", "900719925474090", "900719925474091"}, {"0", "01", "900719925474092", "9007199254740910"}},
    {"min -1 max 1", "{\"type\": \"integer\", \"minimum\": -1, \"maximum\": 1}", true, {"-1", "0", "1"},
     {"-11", "-10", "-2", "2", "10", "11"}},
    {"min -123 max 42", "{\"type\": \"integer\", \"minimum\": -123, \"maximum\": 42}", true,
     {"-123", "-122", "-13", "-11", "-2", "-1", "0", "1", "5", "10", "39", "40", "42"},
     {"-0123", "-124", "-1123", "-200", "43", "123", "0123"}},
    {"exclusive min / max", "{\"type\": \"integer\", \"exclusiveMinimum\": 0, \"exclusiveMaximum\": 10000}", true, {"1", "9999"},
     {"0", "01", "10000", "99999"}},
    {"simple grammar", "\n root ::= expr\n expr ::= term (\"+\" term)*\n term ::= number\n number ::= [0-9]+", false,
     {"42", "1+2+3+4+5", "123+456"}, {"+", "/ 3", "1+2+3+4+5+", "12a45"}},
    /* test_complex_grammar */
    {"medium complexity grammar",
     "\n root ::= expression\n"
     " expression ::= term ws ((\"+\"|\"-\") ws term)*\n"
     " term ::= factor ws ((\"*\"|\"/\") ws factor)*\n"
     " factor ::= number | variable | \"(\" expression \")\" | function-call\n"
     " number ::= [0-9]+\n"
     " variable ::= [a-zA-Z_][a-zA-Z0-9_]*\n"
     " function-call ::= variable ws \"(\" (expression (\",\" ws expression)*)? \")\"\n"
     " ws ::= [ \\t\\n\\r]?",
     false,
     {"42", "1*2*3*4*5", "x", "x+10", "x1+y2", "(a+b)*(c-d)", "func()", "func(x,y+2)", "a*(b+c)-d/e", "f(g(x),h(y,z))", "x + 10",
      "x1 + y2", "(a + b) * (c - d)", "func(x, y + 2)", "a * (b + c) - d / e", "f(g(x), h(y, z))", "123+456",
      "123*456*789-123/456+789*123", "123+456*789-123/456+789*123-456/789+123*456-789/123+456*789-123/456+789*123-456"},
     {"+", "/ 3x", "x + + y", "a * / b", "func(,)", "func(x y)", "(a + b", "x + y)", "a + b * (c - d", "42 +", "x +", "x + 10 +",
      "(a + b) * (c - d", "func(", "func(x, y + 2", "a * (b + c) - d /", "f(g(x), h(y, z)",
      "123+456*789-123/456+789*123-456/789+123*456-789/123+456*789-123/456+789*123-456/"}},
    /* test_special_chars */
    {"special characters", "\n root ::= ... \"abc\" ...\n ", false,
     {"abcabcabc", "aaaabcccc", "\xF0\x9F\x94\xB5\xF0\x9F\x9F\xA0\xE2\x9C\x85" "abc" "\xE2\x9D\x8C\xF0\x9F\x9F\xA0\xF0\x9F\x94\xB5"},
     {"aaabcccc", "aaaaabcccc", "aaaabccc", "aaaabccccc",
      "\xF0\x9F\x94\xB5\xF0\x9F\x9F\xA0\xE2\x9C\x85\xE2\x9D\x8C" "abc" "\xE2\x9D\x8C\xE2\x9C\x85\xF0\x9F\x9F\xA0\xF0\x9F\x94\xB5",
      "\xF0\x9F\x94\xB5\xF0\x9F\x9F\xA0" "abc" "\xF0\x9F\x9F\xA0\xF0\x9F\x94\xB5"}},
    /* test_quantifiers */
    {"* quantifier", "root ::= \"a\"*", false,
     {"", "a", "aaaaa", "aaaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
     {"b", "ab", "aab", "ba", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"}},
    {"+ quantifier", "root ::= \"a\"+", false,
     {"a", "aaaaa", "aaaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
     {"", "b", "ab", "aab", "ba", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"}},
    {"? quantifier", "root ::= \"a\"?", false, {"", "a"}, {"b", "ab", "aa", "ba"}},
    {"mixed quantifiers", "\n root ::= cons+ vowel* cons? (vowel cons)*\n vowel ::= [aeiouy]\n cons ::= [bcdfghjklmnpqrstvwxyz]\n", false,
     {"yes", "no", "noyes", "crwth", "four", "bryyyy"}, {"yess", "yesno", "forty", "catyyy"}},
    {"simple exact repetition", "\n root ::= [ab]{4}\n", false, {"aaaa", "bbbb", "abab"}, {"a", "b", "aaaaa"}},
    {"simple min repetition", "\n root ::= [ab]{4,}\n", false, {"aaaa", "aaaaab", "bbbb", "ababab"}, {"", "aba"}},
    {"simple max repetition", "\n root ::= [ab]{0,4}\n", false, {"", "a", "aa", "aaa", "aaab"}, {"aaaaa"}},
    {"min / max repetition", "\n root ::= (\"0x\" [A-F0-9]{2} \" \"?){3,5}\n", false,
     {"0xFF 0x12 0xAB", "0xFF 0x12 0xAB 0x00 0x00"}, {"", "0xFF", "0xFF 0x12", "0xFF 0x12 0xAB 0x00 0x00 0x00"}},
    {"segfault", "\n root ::= ( [x]* )*\n", false, {"", "x", "xx"}, {"y", "yy"}},
    /* test_json_schema */
    {"empty schema (object)", "{}", true, {"{}", "{\"foo\": \"bar\"}"}, {"", "[]", "null", "\"\"", "true"}},
    {"exotic formats (list)",
     "{\"items\": [{\"format\": \"date\"}, {\"format\": \"uuid\"}, {\"format\": \"time\"}, {\"format\": \"date-time\"}]}", true,
     {"[\"2012-04-23\", \"12345678-1234-1234-1234-1234567890ab\", \"18:25:43.511Z\", \"2012-04-23T18:25:43.511Z\"]"},
     {"[\"foo\", \"bar\"]", "[\"12345678-1234-1234-1234-1234567890ab\"]"}},
    {"string", "{\"type\": \"string\"}", true, {"\"foo\"", "\"bar\"", "\"\""}, {"{}", "\"foo\": \"bar\""}},
    {"string w/ min length 1", "{\"type\": \"string\", \"minLength\": 1}", true, {"\"foo\"", "\"bar\""}, {"\"\"", "{}", "\"foo\": \"bar\""}},
    {"string w/ min length 3", "{\"type\": \"string\", \"minLength\": 3}", true, {"\"foo\"", "\"bar\"", "\"foobar\""}, {"\"\"", "\"f\"", "\"fo\""}},
    {"string w/ max length", "{\"type\": \"string\", \"maxLength\": 3}", true, {"\"foo\"", "\"bar\"", "\"\"", "\"f\"", "\"fo\""}, {"\"foobar\""}},
    {"string w/ min & max length", "{\"type\": \"string\", \"minLength\": 1, \"maxLength\": 4}", true,
     {"\"foo\"", "\"bar\"", "\"f\"", "\"barf\""}, {"\"\"", "\"barfo\"", "\"foobar\""}},
    {"boolean", "{\"type\": \"boolean\"}", true, {"true", "false"}, {"\"\"", "\"true\"", "True", "FALSE"}},
    {"integer", "{\"type\": \"integer\"}", true, {"0", "12345", "1234567890123456"}, {"", "01", "007", "12345678901234567  "}},
    {"string const", "{\"const\": \"foo\"}", true, {"\"foo\""}, {"foo", "\"bar\""}},
    {"non-string const", "{\"const\": true}", true, {"true"}, {"", "foo", "\"true\""}},
    {"non-string enum", "{\"enum\": [\"red\", \"amber\", \"green\", null, 42, [\"foo\"]]}", true, {"\"red\"", "null", "42", "[\"foo\"]"},
     {"", "420", "true", "foo"}},
    {"simple pattern", "{\"pattern\": \"^[a-zA-Z0-9_-]*$\"}", true, {"\"\"", "\"He_llo-12\""}, {"\"!\"", "\"Hello World\""}},
    {"pattern with escapes", "{\"pattern\": \"^a\\\\^\\\\$\\\\.\\\\[\\\\]\\\\(\\\\)\\\\|\\\\{\\\\}\\\\*\\\\+\\\\?b$\"}", true,
     {"\"a^$.[]()|{}*+?b\""}, {"\"ab\""}},
    {"array or null", "{\"type\": [\"array\", \"null\"], \"items\": {\"type\": \"string\"}}", true,
     {"null", "[]", "[\"123\"]", "[\"foo\", \"bar\"]"}, {"", "[123]", "\"foo\"", "[\"foo\", 42]"}},
    {"min+max items", "{\"items\": {\"type\": [\"number\", \"integer\"]}, \"minItems\": 3, \"maxItems\": 5}", true,
     {"[1, 2, 3]", "[1, 2, 3, 4]", "[1, 2, 3, 4, 5]"}, {"[1, 2]", "[1, 2, 3, 4, 5, 6]", "1"}},
    {"object properties",
     "{\"type\": \"object\", \"properties\": {\"number\": {\"type\": \"number\"}, \"street_name\": {\"type\": \"string\"}, "
     "\"street_type\": {\"enum\": [\"Street\", \"Avenue\", \"Boulevard\"]}}}",
     true,
     {"{ \"number\": 1600, \"street_name\": \"Pennsylvania\", \"street_type\":\"Avenue\"}", "{ \"street_name\": \"Pennsylvania\" }",
      "{ \"number\": 1600, \"street_name\": \"Pennsylvania\" }", "{}",
      "{ \"number\": 1600, \"street_name\": \"Pennsylvania\", \"street_type\": \"Avenue\" }"},
     {"{ \"number\": \"1600\", \"street_name\": \"Pennsylvania\", \"street_type\":\"Avenue\"}",
      "{ \"street_name\": \"Pennsylvania\", \"number\": 1600 }",
      "{ \"number\": 1600, \"street_name\": \"Pennsylvania\", \"street_type\":\"Avenue\", \"direction\":\"NW\"}"}},
    {"additional properties can't override other properties",
     "{\"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": \"integer\"}}, \"additionalProperties\": true}", true,
     {"{\"a\": 42}", "{\"c\": \"\"}", "{\"a\": 42, \"c\": \"\"}", "{\"a_\": \"\"}"}, {"", "{\"a\": \"\"}", "{\"a\": \"\", \"b\": \"\"}"}},
    {"object properties, additionalProperties: true",
     "{\"type\": \"object\", \"properties\": {\"number\": {\"type\": \"number\"}, \"street_name\": {\"type\": \"string\"}, "
     "\"street_type\": {\"enum\": [\"Street\", \"Avenue\", \"Boulevard\"]}}, \"additionalProperties\": true}",
     true,
     {"{}", "{\"number\":1600,\"street_name\":\"Pennsylvania\",\"street_type\":\"Avenue\"}", "{ \"street_name\": \"Pennsylvania\" }",
      "{ \"number\": 1600, \"street_name\": \"Pennsylvania\" }",
      "{ \"number\": 1600, \"street_name\": \"Pennsylvania\", \"street_type\":\"Avenue\", \"direction\":\"NW\"}",
      "{ \"number\": 1600, \"street_name\": \"Pennsylvania\", \"street_type\": \"Avenue\" }"},
     {"{ \"number\": \"1600\", \"street_name\": \"Pennsylvania\", \"street_type\":\"Avenue\"}",
      "{ \"street_name\": \"Pennsylvania\", \"number\": 1600, \"street_type\":\"Avenue\"}"}},
    {"required + optional props each in original order",
     "{\"properties\": {\"b\": {\"type\": \"string\"}, \"a\": {\"type\": \"string\"}, \"d\": {\"type\": \"string\"}, \"c\": {\"type\": "
     "\"string\"}}, \"required\": [\"a\", \"b\"], \"additionalProperties\": false}",
     true, {"{\"b\": \"foo\", \"a\": \"bar\"}", "{\"b\":\"foo\",\"a\":\"bar\",\"d\":\"qux\"}", "{\"b\":\"foo\", \"a\":\"bar\", \"d\":\"qux\", \"c\":\"baz\"}"},
     {"{\"a\": \"foo\", \"b\": \"bar\"}", "{\"b\": \"bar\"}", "{\"a\": \"foo\", \"c\": \"baz\"}", "{\"a\":\"foo\", \"b\":\"bar\", \"c\":\"baz\", \"d\":\"qux\"}"}},
};

static mxl_grammar *compile_case(const gcase *c, char **gbnf_out, mxl_error *err) {
    char *gbnf = NULL;
    if (c->schema && mxl_json_schema_text_to_grammar(c->grammar, strlen(c->grammar), &gbnf, err)) return NULL;
    const char *text = c->schema ? gbnf : c->grammar;
    mxl_grammar *g = NULL;
    mxl_grammar_parse(text, strlen(text), &g, err);
    if (gbnf_out) *gbnf_out = gbnf;
    else mxl_free(gbnf);
    return g;
}

TEST(grammar_llama_integration_cases) {
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const gcase *c = &k_cases[i];
        mxl_error err = {0};
        char *gbnf = NULL;
        mxl_grammar *g = compile_case(c, &gbnf, &err);
        if (!g) {
            fprintf(stderr, "  case '%s' did not compile: %s\n%s\n", c->desc, err.msg, gbnf ? gbnf : "");
            CHECK(g != NULL);
            mxl_free(gbnf);
            continue;
        }
        for (int k = 0; k < 24 && c->pass[k]; k++)
            if (!mxl_grammar_accepts(g, c->pass[k], strlen(c->pass[k]))) {
                fprintf(stderr, "  case '%s': should accept \"%s\"\n", c->desc, c->pass[k]);
                CHECK(false);
            }
        for (int k = 0; k < 24 && c->fail[k]; k++)
            if (mxl_grammar_accepts(g, c->fail[k], strlen(c->fail[k]))) {
                fprintf(stderr, "  case '%s': should reject \"%s\"\n", c->desc, c->fail[k]);
                CHECK(false);
            }
        mxl_grammar_destroy(g);
        mxl_free(gbnf);
    }
}

static bool parses(const char *text, mxl_error *err) {
    mxl_grammar *g = NULL;
    mxl_status st = mxl_grammar_parse(text, strlen(text), &g, err);
    mxl_grammar_destroy(g);
    return st == MXL_OK;
}

TEST(grammar_parse_failures) {
    mxl_error err = {0};
    /* test_failure_missing_root */
    CHECK(!parses("\n rot ::= expr\n expr ::= term (\"+\" term)*\n term ::= number\n number ::= [0-9]+", &err));
    CHECK(strstr(err.msg, "root") != NULL);
    /* test_failure_missing_reference */
    CHECK(!parses("root ::= expr\n expr ::= term (\"+\" term)*\n term ::= numero\n number ::= [0-9]+", &err));
    CHECK(strstr(err.msg, "numero") != NULL);
    /* test_failure_left_recursion */
    CHECK(!parses("root ::= \"a\" | root \"a\"", &err));
    CHECK(strstr(err.msg, "left recursion") != NULL);
    CHECK(!parses("\n root ::= asdf\n asdf ::= \"a\" | asdf \"a\"\n", &err));
    CHECK(!parses("\n root ::= asdf\n asdf ::= \"a\" | foo \"b\"\n foo ::= \"c\" | asdf \"d\" | \"e\"", &err));
    CHECK(!parses("\n root ::= asdf\n asdf ::= \"a\" | foo \"b\"\n foo ::= \"c\" | empty asdf \"d\" | \"e\"\n empty ::= \"blah\" | ", &err));
    /* llama.cpp server suite: test_completion_with_invalid_grammar */
    CHECK(!parses("root ::= this is (not valid GBNF", &err));
    CHECK(strstr(err.msg, "line 1") != NULL);
    /* syntax errors name the position */
    CHECK(!parses("root ::= \"abc", &err));
    CHECK(!parses("root ::= [a-", &err));
    CHECK(!parses("root ::= \"\\q\"", &err));
    CHECK(strstr(err.msg, "escape") != NULL);
    CHECK(!parses("root ::= \"a\"{3,1}", &err));
    CHECK(!parses("root ::= \"a\"{99999}", &err));
    CHECK(!parses("root = \"a\"", &err));
    CHECK(strstr(err.msg, "::=") != NULL);
    CHECK(!parses("", &err));
    CHECK(!parses("root ::= *", &err));
    /* what llama.cpp's grammars/README.md shows parses */
    CHECK(parses("root ::= (\"a\" | \"b\")+ # comment\n", &err));
    CHECK(parses("root ::= [^\\x00-\\x1F\"] . \"\\u00e9\" [\\U0001F600-\\U0001F64F]", &err));
    CHECK(parses("root ::=\n  x\nx ::= \"a\" |\n  \"b\"\n", &err));
    /* a newline ends a rule outside parentheses, so a continuation line starting with | is not
     * part of it (llama.cpp's parser: "expecting name") */
    CHECK(!parses("root ::= \"a\"\n  | \"b\"\n", &err));
    /* hostile shapes end in an error, not in a stack overflow */
    {
        size_t deep = 5000;
        char *t = mxl_malloc(deep * 2 + 32);
        REQUIRE(t != NULL);
        size_t k = (size_t)sprintf(t, "root ::= ");
        for (size_t i = 0; i < deep; i++) t[k++] = '(';
        t[k++] = '"', t[k++] = 'a', t[k++] = '"';
        for (size_t i = 0; i < deep; i++) t[k++] = ')';
        t[k] = 0;
        CHECK(!parses(t, &err));
        CHECK(strstr(err.msg, "nest") != NULL);
        mxl_free(t);
        size_t n_rules = 20000;
        char *chain = mxl_malloc(n_rules * 32 + 32);
        REQUIRE(chain != NULL);
        k = (size_t)sprintf(chain, "root ::= r0\n");
        for (size_t i = 0; i + 1 < n_rules; i++) k += (size_t)sprintf(chain + k, "r%zu ::= r%zu\n", i, i + 1);
        sprintf(chain + k, "r%zu ::= \"a\"\n", n_rules - 1);
        CHECK(!parses(chain, &err));
        mxl_free(chain);
    }
    /* "hang" from test_quantifiers: deep nested repetitions parse, and building the start state
     * is refused within the stack cap instead of hanging */
    mxl_grammar *g = NULL;
    const char *hang = "root ::= (((((([^x]*){0,99}){0,99}){0,99}){0,99}){0,99}){0,99}";
    REQUIRE(mxl_grammar_parse(hang, strlen(hang), &g, &err) == MXL_OK);
    mxl_grammar_state *st = NULL;
    mxl_grammar_state_create(g, &st, &err);
    mxl_grammar_state_destroy(st);
    mxl_grammar_destroy(g);
}

TEST(grammar_partial_utf8_and_bytes) {
    /* a character split over byte pieces: each piece is accepted with the sequence left open, and
     * the grammar can end only once the character is complete */
    mxl_grammar *g = NULL;
    mxl_error err = {0};
    const char *text = "root ::= \"\xC3\xA9t\xC3\xA9\"";
    REQUIRE(mxl_grammar_parse(text, strlen(text), &g, &err) == MXL_OK);
    mxl_grammar_state *st = NULL;
    REQUIRE(mxl_grammar_state_create(g, &st, &err) == MXL_OK);
    CHECK(mxl_grammar_state_accept_bytes(st, "\xC3", 1));
    CHECK(!mxl_grammar_state_can_end(st));
    CHECK(!mxl_grammar_state_accept_bytes(st, "\xA8", 1)); /* U+00E8 is not U+00E9 */
    CHECK(mxl_grammar_state_accept_bytes(st, "\xA9t\xC3", 3));
    CHECK(!mxl_grammar_state_accept_bytes(st, "x", 1)); /* not a continuation byte */
    CHECK(mxl_grammar_state_accept_bytes(st, "\xA9", 1));
    CHECK(mxl_grammar_state_can_end(st));
    CHECK(!mxl_grammar_state_accept_bytes(st, "a", 1));
    mxl_grammar_state_destroy(st);
    mxl_grammar_destroy(g);
}

/* token texts for a toy vocabulary */
static const char *const k_toy[] = {"</s>", "{", "}", "\"", "a", "ab", "\"a", "1", "12", " ", "\xC3", "\xA9", "\xC3\xA9", "", "x"};
#define N_TOY (int32_t)(sizeof k_toy / sizeof k_toy[0])

static mxl_status toy_piece(void *ctx, int32_t id, const char **text, size_t *len, bool *is_eog, mxl_error *err) {
    (void)ctx;
    (void)err;
    *text = k_toy[id];
    *len = strlen(k_toy[id]);
    *is_eog = id == 0;
    return MXL_OK;
}

TEST(grammar_token_masks) {
    mxl_grammar_vocab *v = NULL;
    mxl_error err = {0};
    REQUIRE(mxl_grammar_vocab_create(N_TOY, toy_piece, NULL, &v, &err) == MXL_OK);
    mxl_grammar *g = NULL;
    REQUIRE(mxl_grammar_parse("root ::= \"{\" \"\\\"\" [a-b]* \"\\\"\" \"}\" | \"\xC3\xA9\"+", 0 + strlen("root ::= \"{\" \"\\\"\" [a-b]* \"\\\"\" \"}\" | \"\xC3\xA9\"+"), &g, &err) == MXL_OK);
    mxl_grammar_state *st = NULL;
    REQUIRE(mxl_grammar_state_create(g, &st, &err) == MXL_OK);
    float logits[N_TOY];
    for (int i = 0; i < N_TOY; i++) logits[i] = 0.0f;
    size_t allowed = 0;
    REQUIRE(mxl_grammar_state_mask(st, v, logits, NULL, N_TOY, &allowed, &err) == MXL_OK);
    /* at the start: "{", the lead byte of é, or é */
    for (int i = 0; i < N_TOY; i++) {
        bool want = i == 1 || i == 10 || i == 12;
        CHECK((logits[i] == 0.0f) == want);
        CHECK(mxl_grammar_state_allows(st, v, i) == want);
    }
    CHECK_EQ_INT(allowed, 3);
    REQUIRE(mxl_grammar_state_accept_token(st, v, 1, &err) == MXL_OK);
    CHECK(mxl_grammar_state_allows(st, v, 6));  /* "\"a" */
    CHECK(!mxl_grammar_state_allows(st, v, 4)); /* "a" before the quote */
    CHECK(!mxl_grammar_state_allows(st, v, 0)); /* EOS before the grammar can end */
    CHECK(mxl_grammar_state_accept_token(st, v, 0, &err) != MXL_OK);
    REQUIRE(mxl_grammar_state_accept_token(st, v, 6, &err) == MXL_OK);
    REQUIRE(mxl_grammar_state_accept_token(st, v, 5, &err) == MXL_OK);
    REQUIRE(mxl_grammar_state_accept_token(st, v, 3, &err) == MXL_OK);
    REQUIRE(mxl_grammar_state_accept_token(st, v, 2, &err) == MXL_OK);
    /* complete: only EOS */
    for (int i = 0; i < N_TOY; i++) logits[i] = 0.0f;
    REQUIRE(mxl_grammar_state_mask(st, v, logits, NULL, N_TOY, &allowed, &err) == MXL_OK);
    CHECK_EQ_INT(allowed, 1);
    CHECK(logits[0] == 0.0f);
    CHECK(mxl_grammar_state_accept_token(st, v, 0, &err) == MXL_OK);
    /* the partial-UTF-8 path: lead byte, then only its continuation (or nothing else) fits */
    mxl_grammar_state_reset(st);
    REQUIRE(mxl_grammar_state_accept_token(st, v, 10, &err) == MXL_OK);
    for (int i = 0; i < N_TOY; i++) logits[i] = 0.0f;
    REQUIRE(mxl_grammar_state_mask(st, v, logits, NULL, N_TOY, &allowed, &err) == MXL_OK);
    for (int i = 0; i < N_TOY; i++) CHECK((logits[i] == 0.0f) == (i == 11));
    REQUIRE(mxl_grammar_state_accept_token(st, v, 11, &err) == MXL_OK);
    CHECK(mxl_grammar_state_allows(st, v, 0));
    CHECK(mxl_grammar_state_allows(st, v, 12));
    mxl_grammar_state_destroy(st);
    mxl_grammar_destroy(g);
    mxl_grammar_vocab_destroy(v);
}

/* Cases found by tests/fuzz/fuzz_grammar.c (its corpus keeps the inputs). */
static const char *const k_odd[] = {"</s>", "a", "a\0b", "\xC0\x80", "\xC3", "\xA8", "\xC3" "A", "b"};
static const size_t k_odd_len[] = {4, 1, 3, 2, 1, 1, 2, 1};
#define N_ODD (int32_t)(sizeof k_odd / sizeof k_odd[0])

static mxl_status odd_piece(void *ctx, int32_t id, const char **text, size_t *len, bool *is_eog, mxl_error *err) {
    (void)ctx;
    (void)err;
    *text = k_odd[id];
    *len = k_odd_len[id];
    *is_eog = id == 0;
    return MXL_OK;
}

static mxl_grammar *compile(const char *text) {
    mxl_grammar *g = NULL;
    mxl_error err = {0};
    if (mxl_grammar_parse(text, strlen(text), &g, &err) != MXL_OK) fprintf(stderr, "  %s: %s\n", text, err.msg);
    return g;
}

/* Whether the state takes bytes one at a time (and ends up able to end). */
static bool accepts_bytewise(const mxl_grammar *g, const char *text, size_t len) {
    mxl_grammar_state *st = NULL;
    if (mxl_grammar_state_create(g, &st, NULL) != MXL_OK) return false;
    bool ok = true;
    for (size_t i = 0; i < len && ok; i++) ok = mxl_grammar_state_accept_bytes(st, text + i, 1);
    ok = ok && mxl_grammar_state_can_end(st);
    mxl_grammar_state_destroy(st);
    return ok;
}

TEST(grammar_fuzz_findings) {
    mxl_grammar_vocab *v = NULL;
    mxl_error err = {0};
    REQUIRE(mxl_grammar_vocab_create(N_ODD, odd_piece, NULL, &v, &err) == MXL_OK);
    mxl_grammar_state *st = NULL;

    /* a token whose code points include U+0000 (a NUL byte inside it, or the overlong C0 80) was
     * matched only up to it (the code point lists were 0-terminated): "a\0b" and C0 80 were
     * allowed where only "a" fits, and the sampler's commit then refused them */
    mxl_grammar *g = compile("root ::= \"a\" \"b\"?");
    REQUIRE(g != NULL);
    REQUIRE(mxl_grammar_state_create(g, &st, &err) == MXL_OK);
    CHECK(mxl_grammar_state_allows(st, v, 1));
    CHECK(!mxl_grammar_state_allows(st, v, 2));
    CHECK(!mxl_grammar_state_allows(st, v, 3));
    float logits[N_ODD] = {0};
    size_t n_allowed = 0;
    REQUIRE(mxl_grammar_state_mask(st, v, logits, NULL, N_ODD, &n_allowed, &err) == MXL_OK);
    CHECK_EQ_INT(n_allowed, 1);
    CHECK(logits[1] == 0.0f && logits[2] == -INFINITY && logits[3] == -INFINITY);
    CHECK(mxl_grammar_state_accept_token(st, v, 2, &err) != MXL_OK);
    mxl_grammar_state_destroy(st);
    mxl_grammar_destroy(g);
    /* where the grammar does allow U+0000 the NUL byte is matched like any character */
    g = compile("root ::= \"a\" [\\x00] \"b\"");
    REQUIRE(g != NULL);
    REQUIRE(mxl_grammar_state_create(g, &st, &err) == MXL_OK);
    CHECK(mxl_grammar_state_allows(st, v, 2));
    CHECK(mxl_grammar_state_accept_token(st, v, 2, &err) == MXL_OK);
    CHECK(mxl_grammar_state_can_end(st));
    mxl_grammar_state_destroy(st);
    /* ... but the overlong C0 80 is not U+0000: invalid UTF-8 never matches */
    CHECK(!mxl_grammar_accepts(g, "a\xC0\x80" "b", 4));
    CHECK(mxl_grammar_accepts(g, "a\0b", 3));
    mxl_grammar_destroy(g);

    /* UTF-8 is strict: a lead byte followed by a non-continuation byte was decoded within one
     * token as if it were one ("\xC3" "A" as U+00C1), but refused when split over two */
    g = compile("root ::= \"\\u00C1\" | \"\\u00C3A\" | . .");
    REQUIRE(g != NULL);
    CHECK(!mxl_grammar_accepts(g, "\xC3" "A", 2));
    CHECK(!accepts_bytewise(g, "\xC3" "A", 2));
    REQUIRE(mxl_grammar_state_create(g, &st, &err) == MXL_OK);
    CHECK(!mxl_grammar_state_allows(st, v, 6));
    mxl_grammar_state_destroy(st);
    mxl_grammar_destroy(g);

    /* a lead byte against a negated class: [^é] refused the first byte of è (C3 A8), since some
     * completion of C3 (U+00C0..U+00FF) is é; it must be refused only when every completion is */
    g = compile("root ::= [^\\u00e9]");
    REQUIRE(g != NULL);
    CHECK(mxl_grammar_accepts(g, "\xC3\xA8", 2));
    CHECK(accepts_bytewise(g, "\xC3\xA8", 2));
    REQUIRE(mxl_grammar_state_create(g, &st, &err) == MXL_OK);
    CHECK(mxl_grammar_state_allows(st, v, 4));
    REQUIRE(mxl_grammar_state_accept_token(st, v, 4, &err) == MXL_OK);
    CHECK(mxl_grammar_state_allows(st, v, 5));
    mxl_grammar_state_destroy(st);
    mxl_grammar_destroy(g);
    g = compile("root ::= [^\\u00c0-\\u00e8\\u00e9-\\u00ff]"); /* covered by two ranges: C3 cannot start it */
    REQUIRE(g != NULL);
    CHECK(!accepts_bytewise(g, "\xC3\xA8", 2));
    REQUIRE(mxl_grammar_state_create(g, &st, &err) == MXL_OK);
    CHECK(!mxl_grammar_state_allows(st, v, 4));
    mxl_grammar_state_destroy(st);
    mxl_grammar_destroy(g);

    /* an ambiguous grammar doubles its stacks with every "a": masks went from milliseconds to
     * minutes per token over a real vocabulary; the state now refuses past its stack limit with
     * an error that says why */
    g = compile("root ::= \"a\" root \"b\" | \"a\" root \"c\" | \"a\" root | \"\"");
    REQUIRE(g != NULL);
    REQUIRE(mxl_grammar_state_create(g, &st, &err) == MXL_OK);
    mxl_status s = MXL_OK;
    int steps = 0;
    for (; steps < 64 && s == MXL_OK; steps++) {
        for (int i = 0; i < N_ODD; i++) logits[i] = 0.0f;
        s = mxl_grammar_state_mask(st, v, logits, NULL, N_ODD, &n_allowed, &err);
        if (s == MXL_OK) s = mxl_grammar_state_accept_token(st, v, 1, &err);
    }
    CHECK(s != MXL_OK);
    CHECK(steps < 20);
    CHECK(strstr(err.msg, "too ambiguous") != NULL);
    mxl_grammar_state_destroy(st);
    mxl_grammar_destroy(g);

    /* an optional item leaves an empty stack, pushed onto an empty set (UB under UBSan: a zero
     * offset applied to a NULL pointer) */
    g = compile("root ::= \"a\"?");
    REQUIRE(g != NULL);
    CHECK(mxl_grammar_accepts(g, "a", 1));
    CHECK(mxl_grammar_accepts(g, "", 0));
    mxl_grammar_destroy(g);
    mxl_grammar_vocab_destroy(v);
}

TEST(grammar_sampler_toy_vocab) {
    /* the sampler with a grammar over the toy vocabulary: whatever the logits favour, seeded
     * draws only ever produce sentences of the grammar, ending with EOS */
    mxl_grammar_vocab *v = NULL;
    mxl_error err = {0};
    REQUIRE(mxl_grammar_vocab_create(N_TOY, toy_piece, NULL, &v, &err) == MXL_OK);
    const char *gbnf = "root ::= \"{\" \"\\\"\" [a-b]{1,3} \"\\\"\" \"}\"";
    mxl_grammar *g = NULL;
    REQUIRE(mxl_grammar_parse(gbnf, strlen(gbnf), &g, &err) == MXL_OK);
    for (int trial = 0; trial < 20; trial++) {
        mxl_sampler_params p;
        mxl_sampler_params_default(&p);
        p.temp = trial % 2 ? 1.0f : 0.0f;
        p.seed = (uint64_t)trial;
        p.grammar = gbnf;
        p.grammar_vocab = v;
        mxl_sampler *s = NULL;
        REQUIRE(mxl_sampler_create(&p, N_TOY, &s, &err) == MXL_OK);
        char out[64];
        size_t n = 0;
        int32_t hist[64];
        size_t nh = 0;
        bool ended = false;
        for (int step = 0; step < 16 && !ended; step++) {
            float logits[N_TOY];
            for (int i = 0; i < N_TOY; i++) logits[i] = (float)((i * 7 + trial * 3 + step) % 11) - 5.0f;
            int32_t id = -1;
            REQUIRE(mxl_sampler_pick(s, logits, hist, nh, &id, &err) == MXL_OK);
            if (id == 0) {
                ended = true;
                break;
            }
            hist[nh++] = id;
            size_t l = strlen(k_toy[id]);
            REQUIRE(n + l < sizeof out);
            memcpy(out + n, k_toy[id], l);
            n += l;
        }
        out[n] = 0;
        CHECK(ended);
        if (!mxl_grammar_accepts(g, out, n)) {
            fprintf(stderr, "  trial %d produced \"%s\"\n", trial, out);
            CHECK(false);
        }
        mxl_sampler_destroy(s);
    }
    /* a grammar without its vocabulary, and a bad grammar, are refused at creation */
    mxl_sampler_params p;
    mxl_sampler_params_default(&p);
    p.grammar = gbnf;
    mxl_sampler *s = NULL;
    CHECK(mxl_sampler_create(&p, N_TOY, &s, &err) != MXL_OK);
    p.grammar_vocab = v;
    p.grammar = "root ::= (";
    CHECK(mxl_sampler_create(&p, N_TOY, &s, &err) != MXL_OK);
    CHECK(strstr(err.msg, "grammar") != NULL);
    mxl_grammar_destroy(g);
    mxl_grammar_vocab_destroy(v);
}

TEST(json_schema_conversion_errors) {
    char *out = NULL;
    mxl_error err = {0};
    CHECK(mxl_json_schema_text_to_grammar("{\"type\": \"hiccup\"}", 18, &out, &err) != MXL_OK);
    CHECK(strstr(err.msg, "unrecognized") != NULL);
    CHECK(mxl_json_schema_text_to_grammar("{\"type\": 123}", 13, &out, &err) != MXL_OK);
    CHECK(mxl_json_schema_text_to_grammar("123", 3, &out, &err) != MXL_OK);
    CHECK(mxl_json_schema_text_to_grammar("{\"$ref\": \"https://x/y.json\"}", 28, &out, &err) != MXL_OK);
    CHECK(strstr(err.msg, "$ref") != NULL);
    CHECK(mxl_json_schema_text_to_grammar("{\"pattern\": \"abc\"}", 18, &out, &err) != MXL_OK);
    CHECK(mxl_json_schema_text_to_grammar("{not json", 9, &out, &err) != MXL_OK);
    CHECK(out == NULL);
    /* hostile shapes: deep nesting and a huge property name end in errors */
    {
        size_t levels = 300;
        char *t = mxl_malloc(levels * 40 + 64);
        REQUIRE(t != NULL);
        size_t k = 0;
        for (size_t i = 0; i < levels; i++) k += (size_t)sprintf(t + k, "{\"properties\": {\"a\": ");
        k += (size_t)sprintf(t + k, "{}");
        for (size_t i = 0; i < levels; i++) k += (size_t)sprintf(t + k, "}}");
        CHECK(mxl_json_schema_text_to_grammar(t, k, &out, &err) != MXL_OK);
        CHECK(strstr(err.msg, "deep") != NULL);
        mxl_free(t);
        size_t name_len = 100000;
        char *big = mxl_malloc(name_len + 128);
        REQUIRE(big != NULL);
        k = (size_t)sprintf(big, "{\"properties\": {\"");
        memset(big + k, 'x', name_len);
        k += name_len;
        k += (size_t)sprintf(big + k, "\": {}}, \"additionalProperties\": true}");
        CHECK(mxl_json_schema_text_to_grammar(big, k, &out, &err) != MXL_OK);
        /* a name short enough for the trie's node cap but nesting its key rule deeper than the
         * grammar parser takes (found by fuzz_json_schema) is refused; a shorter one parses */
        static const size_t lens[] = {1200, 400};
        for (size_t li = 0; li < 2; li++) {
            k = (size_t)sprintf(big, "{\"properties\": {\"");
            memset(big + k, 'x', lens[li]);
            k += lens[li];
            k += (size_t)sprintf(big + k, "\": {}}, \"additionalProperties\": true}");
            out = NULL;
            mxl_status cs = mxl_json_schema_text_to_grammar(big, k, &out, &err);
            if (li == 0) CHECK(cs != MXL_OK && strstr(err.msg, "too long") != NULL);
            else CHECK(cs == MXL_OK && out && parses(out, &err));
            mxl_free(out);
            out = NULL;
        }
        /* 1000 optional properties: the converter rebuilt every suffix chain of optional keys
         * with a linear rule lookup each time (8 s; found by fuzz_json_schema) */
        k = (size_t)sprintf(big, "{\"properties\": {");
        for (int i = 0; i < 1000; i++) k += (size_t)sprintf(big + k, "%s\"p%d\": {}", i ? ", " : "", i);
        k += (size_t)sprintf(big + k, "}}");
        out = NULL;
        REQUIRE(mxl_json_schema_text_to_grammar(big, k, &out, &err) == MXL_OK);
        mxl_grammar *gp = NULL;
        REQUIRE(mxl_grammar_parse(out, strlen(out), &gp, &err) == MXL_OK);
        /* ({} is any object, as in llama.cpp) */
        const char *in_order = "{\"p3\": {}, \"p999\": {\"x\": 1}}", *reordered = "{\"p999\": {}, \"p3\": {}}";
        CHECK(mxl_grammar_accepts(gp, in_order, strlen(in_order)));
        CHECK(!mxl_grammar_accepts(gp, reordered, strlen(reordered)));
        mxl_grammar_destroy(gp);
        mxl_free(out);
        out = NULL;
        mxl_free(big);
    }
    /* repetition bounds the grammar cannot hold (found by fuzz_json_schema: the converter
     * returned grammars its parser refused): minimum above maximum and minimum over 2000 are
     * errors, a maximum over 2000 is unbounded (as in llama.cpp) */
    static const char *const bad_bounds[] = {
        "{\"items\": {\"type\": \"integer\"}, \"minItems\": 6, \"maxItems\": 5}",
        "{\"type\": \"string\", \"minLength\": 4, \"maxLength\": 3}",
        "{\"type\": \"string\", \"minLength\": 3000}",
        "{\"pattern\": \"^a{2,1}$\"}",
        "{\"pattern\": \"^a{-3}$\"}",
        "{\"pattern\": \"^a{2001,}$\"}",
        /* pattern escapes GBNF has no spelling for (the regex escape was copied into the
         * grammar, which the parser then refused) */
        "{\"pattern\": \"^\\\\d{3}$\"}",
        "{\"pattern\": \"^[a-z\\\\w]$\"}",
        "{\"pattern\": \"^ab\\\\$\"}",
        "{\"pattern\": \"^a\\\\x4$\"}",
        "{\"pattern\": \"^[]$\"}",
        /* a bad property before additionalProperties (found by fuzz_json_schema: the key rule
         * read the names of the properties after it, never filled: a NULL dereference) */
        "{\"properties\": {\"a\": {}, \"b\": {\"type\": \"integer8\"}, \"c\": {}}, \"additionalProperties\": true}",
        /* stacked quantifiers (found by fuzz_json_schema: "Y"?+ is left recursion to the
         * grammar parser) and a quantifier after '|' */
        "{\"pattern\": \"^Y?+$\"}",
        "{\"pattern\": \"^a{2}*$\"}",
        "{\"pattern\": \"^a???$\"}",
        "{\"pattern\": \"^a|*$\"}",
        /* an unbounded repetition of a group with an empty branch (found by fuzz_json_schema:
         * "()*" reached the grammar parser as left recursion) */
        "{\"pattern\": \"^x()*$\"}",
        "{\"pattern\": \"^(a|)+$\"}",
        "{\"pattern\": \"^(|b){2,}$\"}",
    };
    for (size_t i = 0; i < sizeof bad_bounds / sizeof bad_bounds[0]; i++) {
        CHECK(mxl_json_schema_text_to_grammar(bad_bounds[i], strlen(bad_bounds[i]), &out, &err) != MXL_OK);
        CHECK(out == NULL && err.msg[0]);
    }
    static const char *const long_bounds[] = {
        "{\"type\": \"string\", \"maxLength\": 65536}",
        "{\"items\": {\"type\": \"integer\"}, \"minItems\": 2, \"maxItems\": 2001}",
        "{\"pattern\": \"^(ab){1,5000}$\"}",
        "{\"type\": \"string\", \"minLength\": 2000, \"maxLength\": 2000}",
        "{\"pattern\": \"^a??b*?c+?d{2,3}?(e?)+$\"}", /* lazy quantifiers match the same strings */
    };
    for (size_t i = 0; i < sizeof long_bounds / sizeof long_bounds[0]; i++) {
        out = NULL;
        CHECK(mxl_json_schema_text_to_grammar(long_bounds[i], strlen(long_bounds[i]), &out, &err) == MXL_OK);
        CHECK(out && parses(out, &err));
        mxl_free(out);
    }
    /* integer bounds of 16 digits and more (found by fuzz_json_schema: [0-9]{16,15}) */
    const char *big = "{\"type\": \"integer\", \"exclusiveMinimum\": 4503599627370455}";
    out = NULL;
    REQUIRE(mxl_json_schema_text_to_grammar(big, strlen(big), &out, &err) == MXL_OK);
    mxl_grammar *gb = NULL;
    REQUIRE(mxl_grammar_parse(out, strlen(out), &gb, &err) == MXL_OK);
    CHECK(mxl_grammar_accepts(gb, "4503599627370456", 16));
    CHECK(mxl_grammar_accepts(gb, "45035996273704550", 17));
    CHECK(mxl_grammar_accepts(gb, "9000000000000000", 16));
    CHECK(!mxl_grammar_accepts(gb, "4503599627370455", 16));
    CHECK(!mxl_grammar_accepts(gb, "999999999999999", 15));
    mxl_grammar_destroy(gb);
    mxl_free(out);
    /* identity escapes of punctuation become the character (found by fuzz_json_schema: \\/
     * reached the grammar as an unknown escape) */
    const char *esc = "{\"pattern\": \"^a\\\\/b\\\\-[\\\\^\\\\]x]\\\\x41\\\\u00e9$\"}";
    out = NULL;
    REQUIRE(mxl_json_schema_text_to_grammar(esc, strlen(esc), &out, &err) == MXL_OK);
    mxl_grammar *ge = NULL;
    REQUIRE(mxl_grammar_parse(out, strlen(out), &ge, &err) == MXL_OK);
    CHECK(mxl_grammar_accepts(ge, "\"a/b-^A\xC3\xA9\"", 10));
    CHECK(mxl_grammar_accepts(ge, "\"a/b-]A\xC3\xA9\"", 10));
    CHECK(!mxl_grammar_accepts(ge, "\"a/b-yA\xC3\xA9\"", 10));
    mxl_grammar_destroy(ge);
    mxl_free(out);
    /* class characters of the additionalProperties key rule (found by fuzz_json_schema: a
     * property named "i]:d" gave the class "[]]") */
    const char *odd = "{\"properties\": {\"i]:^-d\": {\"type\": \"integer\", \"maximum\": 9}}, "
                      "\"additionalProperties\": {\"type\": \"integer\"}}";
    out = NULL;
    REQUIRE(mxl_json_schema_text_to_grammar(odd, strlen(odd), &out, &err) == MXL_OK);
    mxl_grammar *go = NULL;
    REQUIRE(mxl_grammar_parse(out, strlen(out), &go, &err) == MXL_OK);
    CHECK(mxl_grammar_accepts(go, "{\"i]:^-d\": 5, \"x\": 100}", strlen("{\"i]:^-d\": 5, \"x\": 100}")));
    CHECK(mxl_grammar_accepts(go, "{\"i]:^-e\": 100}", strlen("{\"i]:^-e\": 100}")));
    CHECK(!mxl_grammar_accepts(go, "{\"i]:^-d\": 100}", strlen("{\"i]:^-d\": 100}")));
    mxl_grammar_destroy(go);
    mxl_free(out);
    out = NULL;
    REQUIRE(mxl_json_schema_text_to_grammar(long_bounds[1], strlen(long_bounds[1]), &out, &err) == MXL_OK);
    mxl_grammar *gl = NULL;
    REQUIRE(mxl_grammar_parse(out, strlen(out), &gl, &err) == MXL_OK);
    CHECK(mxl_grammar_accepts(gl, "[1, 2, 3]", 9));
    CHECK(!mxl_grammar_accepts(gl, "[1]", 3));
    mxl_grammar_destroy(gl);
    mxl_free(out);

    /* $defs with recursion compiles and matches nested values */
    const char *rec = "{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"v\": {\"type\": \"integer\"}, "
                      "\"next\": {\"anyOf\": [{\"$ref\": \"#/$defs/node\"}, {\"type\": \"null\"}]}}, \"required\": [\"v\", \"next\"]}}, "
                      "\"$ref\": \"#/$defs/node\"}";
    REQUIRE(mxl_json_schema_text_to_grammar(rec, strlen(rec), &out, &err) == MXL_OK);
    mxl_grammar *g = NULL;
    REQUIRE(mxl_grammar_parse(out, strlen(out), &g, &err) == MXL_OK);
    const char *ok1 = "{\"v\": 1, \"next\": {\"v\": 2, \"next\": null}}", *bad1 = "{\"v\": 1, \"next\": {\"v\": \"x\", \"next\": null}}";
    CHECK(mxl_grammar_accepts(g, ok1, strlen(ok1)));
    CHECK(!mxl_grammar_accepts(g, bad1, strlen(bad1)));
    mxl_grammar_destroy(g);
    mxl_free(out);
}

/* The fixture of tests/fixtures/grammar/gen_schema_fixtures.py: jsonschema's verdicts on instance
 * texts. An instance jsonschema rejects must be rejected by the converted grammar; a canonical
 * valid one (schema key order, no extra keys) must be accepted. */
TEST(json_schema_fixture_matches_jsonschema) {
    json_t *fx = mxl_test_load_json("tests/fixtures/grammar/schemas.json");
    REQUIRE(fx != NULL);
    const json_t *cases = json_object_get(fx, "cases");
    REQUIRE(json_array_size(cases) >= 10);
    size_t i, checked = 0;
    const json_t *c;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        char *gbnf = NULL;
        mxl_error err = {0};
        if (mxl_json_schema_to_grammar(json_object_get(c, "schema"), &gbnf, &err)) {
            fprintf(stderr, "  schema '%s': %s\n", name, err.msg);
            CHECK(false);
            continue;
        }
        mxl_grammar *g = NULL;
        if (mxl_grammar_parse(gbnf, strlen(gbnf), &g, &err)) {
            fprintf(stderr, "  schema '%s' grammar: %s\n%s\n", name, err.msg, gbnf);
            CHECK(false);
            mxl_free(gbnf);
            continue;
        }
        size_t k;
        const json_t *inst;
        json_array_foreach(json_object_get(c, "instances"), k, inst) {
            const char *text = json_string_value(json_object_get(inst, "text"));
            bool valid = json_is_true(json_object_get(inst, "valid")), canonical = json_is_true(json_object_get(inst, "canonical"));
            bool acc = mxl_grammar_accepts(g, text, strlen(text));
            if ((!valid && acc) || (canonical && !acc)) {
                fprintf(stderr, "  schema '%s': grammar %s %s (jsonschema: %s)\n", name, acc ? "accepts" : "rejects", text,
                        valid ? "valid" : "invalid");
                CHECK(false);
            }
            checked++;
        }
        mxl_grammar_destroy(g);
        mxl_free(gbnf);
    }
    CHECK(checked >= 80);
    json_decref(fx);
}

/* ---- the real model ------------------------------------------------------------------------ */

typedef struct collect {
    char buf[4096];
    size_t n;
} collect;

static int on_text(void *ctx, const char *text, size_t len) {
    collect *c = ctx;
    if (c->n + len < sizeof c->buf) {
        memcpy(c->buf + c->n, text, len);
        c->n += len;
    }
    return 0;
}

TEST(slow_grammar_smollm2_constrained_generation) {
    const char *path = mxl_test_model_path("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1.gguf");
    mxl_gen_model *m = NULL;
    mxl_error err = {0};
    if (mxl_gen_model_load(path, 2, &m, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        REQUIRE(false);
    }
    static const struct {
        const char *prompt, *gbnf;
        float temp;
    } runs[] = {
        {"Give me a JSON object describing a cat.", NULL, 0.0f}, /* schema below */
        {"Count to five.", "root ::= [0-9]+ (\", \" [0-9]+){2,4}", 0.0f},
        {"Say yes or no.", "root ::= (\"yes\" | \"no\") \".\"", 0.8f},
        {"Write a short word.", "root ::= [a-z]{3,8}", 1.0f},
        {"Write an email address.", "root ::= [a-z]+ \"@\" [a-z]+ \".\" (\"com\" | \"org\")", 0.7f},
    };
    char *schema_gbnf = NULL;
    const char *schema = "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 12}, "
                         "\"age\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 30}}, \"required\": [\"name\", \"age\"]}";
    REQUIRE(mxl_json_schema_text_to_grammar(schema, strlen(schema), &schema_gbnf, &err) == MXL_OK);
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        const char *gbnf = runs[r].gbnf ? runs[r].gbnf : schema_gbnf;
        mxl_gen_request req = {.prompt = runs[r].prompt, .chat = true, .max_tokens = 48, .max_context = 512};
        mxl_sampler_params_default(&req.sampling);
        req.sampling.temp = runs[r].temp;
        req.sampling.seed = 1234 + r;
        req.sampling.grammar = gbnf;
        collect c = {.n = 0};
        mxl_gen_stats stats = {0};
        mxl_status st = mxl_gen_run(m, &req, on_text, &c, &stats, &err);
        if (st) fprintf(stderr, "  run %zu: %s\n", r, err.msg);
        CHECK(st == MXL_OK);
        c.buf[c.n] = 0;
        mxl_grammar *g = NULL;
        REQUIRE(mxl_grammar_parse(gbnf, strlen(gbnf), &g, &err) == MXL_OK);
        /* stopped by EOS: the text is a whole sentence; by length: a prefix the grammar took */
        bool ok;
        if (!strcmp(stats.finish_reason, "stop")) ok = mxl_grammar_accepts(g, c.buf, c.n);
        else {
            mxl_grammar_state *gs = NULL;
            REQUIRE(mxl_grammar_state_create(g, &gs, &err) == MXL_OK);
            ok = mxl_grammar_state_accept_bytes(gs, c.buf, c.n);
            mxl_grammar_state_destroy(gs);
        }
        if (!ok || getenv("MXL_TEST_VERBOSE")) fprintf(stderr, "  run %zu (%s) produced \"%s\"\n", r, stats.finish_reason, c.buf);
        CHECK(ok);
        CHECK(c.n > 0);
        mxl_grammar_destroy(g);
    }
    mxl_free(schema_gbnf);
    /* a grammar that admits the unconstrained greedy answer does not change it */
    mxl_gen_request req = {.prompt = "What is 2+2?", .chat = true, .max_tokens = 12, .max_context = 512};
    mxl_sampler_params_default(&req.sampling);
    collect free_run = {.n = 0}, any_run = {.n = 0};
    mxl_gen_stats stats = {0};
    REQUIRE(mxl_gen_run(m, &req, on_text, &free_run, &stats, &err) == MXL_OK);
    req.sampling.grammar = "root ::= [^\\x00]*";
    REQUIRE(mxl_gen_run(m, &req, on_text, &any_run, &stats, &err) == MXL_OK);
    CHECK(free_run.n == any_run.n && !memcmp(free_run.buf, any_run.buf, free_run.n));
    mxl_gen_model_destroy(m);
}
