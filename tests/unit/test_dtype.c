/* test_dtype.c - scalar float conversions against numpy / ml_dtypes (fixture made by
 * tests/fixtures/gen_dtype_fixtures.py), and dtype block sizes against ggml-common.h. */
#include <jansson.h>
#include <math.h>

#include "core/dtype.h"
#include "core/tensor.h"
#include "test.h"

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static json_t *load_fixture(void) { return mxl_test_load_json("tests/fixtures/dtype_conversions.json"); }

/* Same value, treating all nans as equal. */
static int same_f32(float a, uint32_t ref_bits) {
    float r = bits_f32(ref_bits);
    if (isnan(r)) return isnan(a);
    uint32_t ab;
    memcpy(&ab, &a, 4);
    return ab == ref_bits;
}

TEST(dtype_f32_to_f16_and_bf16_match_numpy) {
    json_t *j = load_fixture();
    REQUIRE(j);
    json_t *in = json_object_get(j, "f32_bits");
    json_t *h = json_object_get(j, "f32_to_f16_bits");
    json_t *b = json_object_get(j, "f32_to_bf16_bits");
    REQUIRE(json_array_size(in) > 300 && json_array_size(in) == json_array_size(h));
    int bad = 0;
    for (size_t i = 0; i < json_array_size(in); i++) {
        float f = bits_f32((uint32_t)json_integer_value(json_array_get(in, i)));
        uint16_t ch = mxl_f32_to_f16(f), cb = mxl_f32_to_bf16(f);
        if (ch != (uint16_t)json_integer_value(json_array_get(h, i))) bad++;
        if (cb != (uint16_t)json_integer_value(json_array_get(b, i))) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    json_decref(j);
}

TEST(dtype_widening_conversions_match_reference) {
    json_t *j = load_fixture();
    REQUIRE(j);
    int step = (int)json_integer_value(json_object_get(j, "f16_sample_step"));
    json_t *h = json_object_get(j, "f16_to_f32_bits");
    json_t *b = json_object_get(j, "bf16_to_f32_bits");
    json_t *e = json_object_get(j, "e4m3_to_f32_bits");
    REQUIRE(step > 0 && json_array_size(e) == 256);
    int bad = 0;
    for (size_t i = 0; i < json_array_size(h); i++) {
        uint16_t v = (uint16_t)(i * (size_t)step);
        if (!same_f32(mxl_f16_to_f32(v), (uint32_t)json_integer_value(json_array_get(h, i)))) bad++;
        if (!same_f32(mxl_bf16_to_f32(v), (uint32_t)json_integer_value(json_array_get(b, i)))) bad++;
    }
    for (int i = 0; i < 256; i++)
        if (!same_f32(mxl_f8_e4m3_to_f32((uint8_t)i), (uint32_t)json_integer_value(json_array_get(e, (size_t)i)))) bad++;
    CHECK_EQ_INT(bad, 0);
    json_decref(j);
}

TEST(dtype_f16_round_trip_all_values) {
    /* every finite f16 survives f16 -> f32 -> f16 exactly */
    int bad = 0;
    for (uint32_t v = 0; v < 65536; v++) {
        if ((v & 0x7c00u) == 0x7c00u && (v & 0x3ffu)) continue; /* nan */
        if (mxl_f32_to_f16(mxl_f16_to_f32((uint16_t)v)) != v) bad++;
    }
    CHECK_EQ_INT(bad, 0);
}

TEST(dtype_block_sizes) {
    /* sizeof(block_*) in ggml-common.h */
    struct { mxl_dtype d; uint32_t elems, bytes; } k[] = {
        {MXL_DTYPE_Q4_0, 32, 18},  {MXL_DTYPE_Q4_1, 32, 20},  {MXL_DTYPE_Q5_0, 32, 22},
        {MXL_DTYPE_Q5_1, 32, 24},  {MXL_DTYPE_Q8_0, 32, 34},  {MXL_DTYPE_Q2_K, 256, 84},
        {MXL_DTYPE_Q3_K, 256, 110}, {MXL_DTYPE_Q4_K, 256, 144}, {MXL_DTYPE_Q5_K, 256, 176},
        {MXL_DTYPE_Q6_K, 256, 210}, {MXL_DTYPE_Q8_K, 256, 292}, {MXL_DTYPE_BF16, 1, 2}, {MXL_DTYPE_MXFP4, 32, 17}, {MXL_DTYPE_TQ1_0, 256, 54}, {MXL_DTYPE_TQ2_0, 256, 66},
        {MXL_DTYPE_IQ4_NL, 32, 18}, {MXL_DTYPE_IQ4_XS, 256, 136},
        {MXL_DTYPE_IQ2_XXS, 256, 66}, {MXL_DTYPE_IQ2_XS, 256, 74}, {MXL_DTYPE_IQ2_S, 256, 82}, {MXL_DTYPE_IQ3_XXS, 256, 98},
        {MXL_DTYPE_IQ3_S, 256, 110}, {MXL_DTYPE_IQ1_S, 256, 50}, {MXL_DTYPE_IQ1_M, 256, 56},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const mxl_dtype_info *info = mxl_dtype_get_info(k[i].d);
        CHECK_EQ_INT(info->block_elems, k[i].elems);
        CHECK_EQ_INT(info->block_bytes, k[i].bytes);
    }
    uint64_t n;
    CHECK(mxl_dtype_row_bytes(MXL_DTYPE_Q4_K, 512, &n) == 0 && n == 288);
    CHECK(mxl_dtype_row_bytes(MXL_DTYPE_Q4_K, 100, &n) != 0);
    CHECK(mxl_dtype_row_bytes(MXL_DTYPE_F32, UINT64_MAX / 2, &n) != 0);
    CHECK(mxl_dtype_from_safetensors("F8_E4M3") == MXL_DTYPE_F8_E4M3);
    CHECK(mxl_dtype_from_safetensors("f32") == MXL_DTYPE_INVALID);
}

TEST(tensor_expected_bytes) {
    int64_t shape[2] = {576, 1536};
    uint64_t n;
    mxl_error e;
    CHECK(mxl_tensor_expected_bytes(MXL_DTYPE_Q4_1, 2, shape, &n, &e) == MXL_OK && n == 576ull * 1536 / 32 * 20);
    int64_t odd[2] = {3, 33};
    CHECK(mxl_tensor_expected_bytes(MXL_DTYPE_Q8_0, 2, odd, &n, &e) == MXL_ERR_FORMAT);
    int64_t huge[3] = {INT64_MAX, 4, 4};
    CHECK(mxl_tensor_expected_bytes(MXL_DTYPE_F32, 3, huge, &n, &e) == MXL_ERR_OVERFLOW);
    int64_t neg[1] = {-1};
    CHECK(mxl_tensor_expected_bytes(MXL_DTYPE_F32, 1, neg, &n, &e) == MXL_ERR_OVERFLOW);
}
