/* test_json_read.c - io/json_read.c against Python's json module: every text of
 * tests/fixtures/json/py_json_cases.json (made by gen_py_json_fixtures.py with the stdlib json that
 * writes and reads checkpoint files) parses to the value Python gives, or fails where Python
 * fails. Integers past int64 are compared as the double Python's float() makes of them (what
 * mlxcel keeps), non-finite floats through mxl_json_number, lone surrogates as U+FFFD. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "io/json_read.h"
#include "test.h"

static bool same_double(double a, double b) { return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b)); }

static double want_double(const char *s) {
    if (!strcmp(s, "nan")) return NAN;
    if (!strcmp(s, "inf")) return INFINITY;
    if (!strcmp(s, "-inf")) return -INFINITY;
    return strtod(s, NULL); /* float.hex() form */
}

/* Compares our parse `got` with the typed Python value `want`; prints the first difference. */
static bool same(const json_t *got, const json_t *want, const char *where) {
    bool ok = true;
    if (json_is_boolean(want) || json_is_null(want)) {
        ok = json_typeof(got) == json_typeof(want);
    } else if (json_object_get(want, "int")) {
        const char *dec = json_string_value(json_object_get(want, "int"));
        const json_t *f = json_object_get(want, "float");
        double d;
        if (!f) ok = json_is_integer(got) && json_integer_value(got) == strtoll(dec, NULL, 10);
        else ok = !json_is_integer(got) && mxl_json_number(got, &d) && same_double(d, want_double(json_string_value(f)));
    } else if (json_object_get(want, "float")) {
        double d;
        ok = !json_is_integer(got) && mxl_json_number(got, &d) &&
             same_double(d, want_double(json_string_value(json_object_get(want, "float"))));
    } else if (json_object_get(want, "str")) {
        const json_t *s = json_object_get(want, "str");
        ok = json_is_string(got) && json_string_length(got) == json_string_length(s) &&
             !memcmp(json_string_value(got), json_string_value(s), json_string_length(s));
    } else if (json_object_get(want, "list")) {
        const json_t *l = json_object_get(want, "list");
        ok = json_is_array(got) && json_array_size(got) == json_array_size(l);
        for (size_t i = 0; ok && i < json_array_size(l); i++) ok = same(json_array_get(got, i), json_array_get(l, i), where);
        return ok;
    } else if (json_object_get(want, "obj")) {
        const json_t *o = json_object_get(want, "obj");
        ok = json_is_object(got) && json_object_size(got) == json_array_size(o);
        for (size_t i = 0; ok && i < json_array_size(o); i++) {
            const json_t *kv = json_array_get(o, i);
            const json_t *g = json_object_get(got, json_string_value(json_array_get(kv, 0)));
            ok = g && same(g, json_array_get(kv, 1), where);
        }
        return ok;
    } else {
        ok = false;
    }
    if (!ok) {
        char *g = json_dumps(got, JSON_ENCODE_ANY), *w = json_dumps(want, JSON_ENCODE_ANY);
        fprintf(stderr, "  %s: got %s, Python %s\n", where, g ? g : "(null)", w ? w : "(null)");
        mxl_free(g);
        mxl_free(w);
    }
    return ok;
}

TEST(json_read_matches_python_json) {
    json_t *fx = mxl_test_load_json("tests/fixtures/json/py_json_cases.json");
    REQUIRE(fx);
    json_t *c;
    size_t i, n_ok = 0, n_err = 0;
    json_array_foreach(json_object_get(fx, "cases"), i, c) {
        const json_t *t = json_object_get(c, "text");
        json_error_t je;
        json_t *got = mxl_json_loads_py(json_string_value(t), json_string_length(t), &je);
        char where[96];
        snprintf(where, sizeof where, "case %zu %.60s", i, json_string_value(t));
        if (json_is_true(json_object_get(c, "error"))) {
            if (got) fprintf(stderr, "  %s: parsed, Python refuses it\n", where);
            CHECK(got == NULL);
            n_err++;
        } else {
            if (!got) fprintf(stderr, "  %s: %s (line %d), Python reads it\n", where, je.text, je.line);
            CHECK(got && same(got, json_object_get(c, "value"), where));
            n_ok++;
        }
        json_decref(got);
    }
    CHECK(n_ok >= 15 && n_err >= 15);
    json_decref(fx);
}

/* The file reader: errors name the path and line; a file over the limit is refused. */
TEST(json_read_file_errors) {
    const char *bad = "{\n  \"a\": 1,\n  \"b\": 01\n}\n";
    const char *p = mxl_test_write_temp(".json", bad, strlen(bad));
    json_t *j = NULL;
    mxl_error e;
    CHECK(mxl_json_load_file_py(p, 1 << 20, &j, &e) == MXL_ERR_FORMAT);
    CHECK(j == NULL);
    CHECK(strstr(e.msg, p) != NULL && strstr(e.msg, "invalid JSON at line 3") != NULL);
    CHECK(mxl_json_load_file_py(p, 10, &j, &e) == MXL_ERR_FORMAT);
    CHECK(strstr(e.msg, "larger than") != NULL);
    CHECK(mxl_json_load_file_py("/nonexistent/x.json", 10, &j, &e) != MXL_OK);
    const char *quirks = "\xEF\xBB\xBF{\"n\": NaN, \"big\": 100000000000000000000}";
    const char *q = mxl_test_write_temp(".json", quirks, strlen(quirks));
    REQUIRE(mxl_json_load_file_py(q, 1 << 20, &j, &e) == MXL_OK);
    double d;
    CHECK(mxl_json_number(json_object_get(j, "n"), &d) && isnan(d));
    int64_t x;
    CHECK_EQ_INT(mxl_json_int(json_object_get(j, "big"), 0, INT64_MAX, &x), 2);
    CHECK_EQ_INT(mxl_json_int(json_object_get(j, "n"), 0, INT64_MAX, &x), 1);
    json_decref(j);
}

/* mxl_json_int: integers, integral reals, ranges. */
TEST(json_read_int_ranges) {
    const char *text = "[7, 2.0, 2.5, -1, 1e30, Infinity, \"3\", null]";
    json_t *j = mxl_json_loads_py(text, strlen(text), NULL);
    REQUIRE(j);
    int64_t x = -99;
    CHECK_EQ_INT(mxl_json_int(json_array_get(j, 0), 0, 10, &x), 0);
    CHECK_EQ_INT(x, 7);
    CHECK_EQ_INT(mxl_json_int(json_array_get(j, 1), 0, 10, &x), 0);
    CHECK_EQ_INT(x, 2);
    CHECK_EQ_INT(mxl_json_int(json_array_get(j, 2), 0, 10, &x), 1);
    CHECK_EQ_INT(mxl_json_int(json_array_get(j, 3), 0, 10, &x), 2);
    CHECK_EQ_INT(mxl_json_int(json_array_get(j, 4), 0, 10, &x), 2);
    CHECK_EQ_INT(mxl_json_int(json_array_get(j, 5), 0, 10, &x), 2);
    CHECK_EQ_INT(mxl_json_int(json_array_get(j, 6), 0, 10, &x), 1);
    CHECK_EQ_INT(mxl_json_int(json_array_get(j, 7), 0, 10, &x), 1);
    CHECK_EQ_INT(x, 2);
    json_decref(j);
}
