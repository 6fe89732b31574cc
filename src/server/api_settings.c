/* api_settings.c - GET / PATCH /v1/settings (serve --settings): the defaults every request starts
 * from, read and changed while the server runs.
 *
 * The settings are the sampling defaults and the token budget a request inherits when it does not
 * give its own: temperature, top_k, top_p, min_p, typical_p, the penalties, the DRY / XTC /
 * mirostat / dynamic-temperature parameters, max_tokens and ignore_eos, under the request's own
 * field names. GET answers {"object": "settings", "settings": {...}}. PATCH takes an object of
 * some of those names (null leaves one as it is); each value is checked exactly as a request's
 * would be (request.c: mxl_srv_parse_params, so the same ranges and messages), a name that is not
 * a setting is a 400 and nothing is changed unless every name and value is good. The answer is
 * the settings after the change. Changes last until the server stops (they outlive
 * --sleep-idle-seconds reloads; nothing is written to disk). "model" in a PATCH body is allowed
 * and ignored (router mode routes on it).
 *
 * The endpoint needs authentication: serve refuses --settings without --api-key / --api-key-file
 * (server.c), and the API key check guards every route. */
#include <pthread.h>
#include <string.h>

#include "server/request.h"
#include "server/routes.h"

/* the settings: request field name, member of mxl_seq_params (floats, then integers) */
#define SETTINGS_FLOATS(X)                                                                                         \
    X("temperature", sampling.temp) X("top_p", sampling.top_p) X("min_p", sampling.min_p)                          \
    X("typical_p", sampling.typical_p) X("repeat_penalty", sampling.repeat_penalty)                                 \
    X("presence_penalty", sampling.presence_penalty) X("frequency_penalty", sampling.frequency_penalty)             \
    X("top_n_sigma", sampling.top_n_sigma) X("xtc_probability", sampling.xtc_probability)                           \
    X("xtc_threshold", sampling.xtc_threshold) X("dynatemp_range", sampling.dynatemp_range)                        \
    X("dynatemp_exponent", sampling.dynatemp_exponent) X("mirostat_tau", sampling.mirostat_tau)                    \
    X("mirostat_eta", sampling.mirostat_eta) X("dry_multiplier", sampling.dry_multiplier) X("dry_base", sampling.dry_base)
#define SETTINGS_INTS(X)                                                                                           \
    X("top_k", sampling.top_k) X("repeat_last_n", sampling.repeat_last_n) X("mirostat", sampling.mirostat)          \
    X("dry_allowed_length", sampling.dry_allowed_length) X("dry_penalty_last_n", sampling.dry_penalty_last_n)      \
    X("max_tokens", max_tokens)

static bool is_setting(const char *k) {
#define NAME(name, field) if (!strcmp(k, name)) return true;
    SETTINGS_FLOATS(NAME)
    SETTINGS_INTS(NAME)
#undef NAME
    return !strcmp(k, "ignore_eos");
}

static json_t *settings_json(const mxl_seq_params *p) {
    json_t *o = json_object();
#define PUT_F(name, field) json_object_set_new(o, name, json_real((double)p->field));
#define PUT_I(name, field) json_object_set_new(o, name, json_integer((json_int_t)p->field));
    SETTINGS_FLOATS(PUT_F)
    SETTINGS_INTS(PUT_I)
#undef PUT_F
#undef PUT_I
    json_object_set_new(o, "ignore_eos", json_boolean(p->ignore_eos));
    return json_pack("{s:s, s:o}", "object", "settings", "settings", o);
}

void mxl_srv_defaults_get(const mxl_server *s, mxl_seq_params *out) {
    pthread_mutex_lock((pthread_mutex_t *)&s->defaults_mu);
    *out = s->defaults;
    pthread_mutex_unlock((pthread_mutex_t *)&s->defaults_mu);
}

void mxl_api_settings(mxl_server *s, mxl_http_req *r) {
    if (!s->cfg->settings) {
        mxl_srv_error(r, MXL_API_OPENAI, 501, "not_implemented_error", "/v1/settings is off: start mlxcel serve with --settings (and --api-key)");
        return;
    }
    mxl_seq_params cur;
    if (strcmp(mxl_http_method(r), "PATCH") != 0) {
        mxl_srv_defaults_get(s, &cur);
        mxl_http_send_json(r, 200, settings_json(&cur));
        return;
    }
    json_t *body = mxl_srv_body_json(s, r, MXL_API_OPENAI);
    if (!body) return;
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v) {
        if (!is_setting(k) && strcmp(k, "model") != 0) {
            mxl_srv_error(r, MXL_API_OPENAI, 400, "invalid_request_error", "'%.100s' is not a setting (GET /v1/settings lists them)", k);
            json_decref(body);
            return;
        }
    }
    json_object_del(body, "model");
    /* one change at a time: each reads the defaults, checks the body over them and writes back */
    pthread_mutex_lock(&s->settings_mu);
    mxl_seq_params np;
    mxl_logit_bias *bias = NULL;
    char msg[512];
    if (!mxl_srv_parse_params(s, body, &np, &bias, msg, sizeof msg)) {
        pthread_mutex_unlock(&s->settings_mu);
        json_decref(body);
        mxl_srv_error(r, MXL_API_OPENAI, 400, "invalid_request_error", "%s", msg);
        return;
    }
    /* max_tokens as given (the parse caps a request's at --n-predict, which stays the cap) */
    const json_t *mt = json_object_get(body, "max_tokens");
    pthread_mutex_lock(&s->defaults_mu);
#define COPY(name, field) s->defaults.field = np.field;
    SETTINGS_FLOATS(COPY)
    SETTINGS_INTS(COPY)
#undef COPY
    if (json_is_integer(mt)) s->defaults.max_tokens = json_integer_value(mt);
    s->defaults.ignore_eos = np.ignore_eos;
    cur = s->defaults;
    pthread_mutex_unlock(&s->defaults_mu);
    pthread_mutex_unlock(&s->settings_mu);
    json_decref(body);
    mxl_http_send_json(r, 200, settings_json(&cur));
}
