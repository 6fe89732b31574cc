/* webui.c - `serve --webui`: the page at {api_prefix}/webui/ (webui.h), its security headers, and
 * the redirect of {api_prefix}/webui to it. The page is static and holds no secret, so it is
 * answered without the API key (a browser cannot send one on navigation); everything it does goes
 * through the API, which asks for the key as usual. */
#include "server/webui.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "server/request.h"
#include "server/server_state.h"

/* 'sha256-BASE64' of the text between `open` and the next `close` in the page, into out. */
static bool element_hash(const char *page, const char *open, const char *close, char *out, size_t cap) {
    const char *a = strstr(page, open);
    if (!a) return false;
    a += strlen(open);
    const char *b = strstr(a, close);
    if (!b) return false;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    if (!EVP_Digest(a, (size_t)(b - a), md, &md_len, EVP_sha256(), NULL)) return false;
    unsigned char b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
    EVP_EncodeBlock(b64, md, (int)md_len);
    return snprintf(out, cap, "'sha256-%s'", (const char *)b64) < (int)cap;
}

mxl_status mxl_webui_init(mxl_server *s, mxl_error *err) {
    const char *page = (const char *)mxl_webui_index_html;
    char style[80], script[80];
    if (!element_hash(page, "<style>", "</style>", style, sizeof style) ||
        !element_hash(page, "<script>", "</script>", script, sizeof script))
        return mxl_error_set(err, MXL_ERR_INTERNAL, "the built-in WebUI page has no <style> or <script> element");
    /* only this page's own style and script run; it connects to its own origin only; it cannot be
     * framed, post forms, load anything from elsewhere, or change its base URL */
    snprintf(s->webui_csp, sizeof s->webui_csp,
             "default-src 'none'; script-src %s; style-src %s; connect-src 'self'; img-src 'self' data:; "
             "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
             script, style);
    s->webui = true;
    return MXL_OK;
}

bool mxl_webui_route(mxl_server *s, mxl_http_req *r, const char *sub) {
    if (!s->webui || (strcmp(sub, "/webui") != 0 && strcmp(sub, "/webui/") != 0)) return false;
    const char *method = mxl_http_method(r);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        mxl_srv_error(r, MXL_API_OPENAI, 405, "invalid_request_error", "method %s is not allowed on %s", method, sub);
        return true;
    }
    if (!strcmp(sub, "/webui")) { /* the page's relative URLs (../v1/...) need the slash */
        char location[1024];
        snprintf(location, sizeof location, "%s/webui/", s->prefix);
        static const char body[] = "Moved to webui/\n";
        mxl_http_send_with_header(r, 301, "text/plain; charset=utf-8", body, sizeof body - 1, "Location", location);
        return true;
    }
    const char *headers[] = {
        "Content-Security-Policy", s->webui_csp,
        "X-Content-Type-Options", "nosniff",
        "X-Frame-Options", "DENY",
        "Referrer-Policy", "no-referrer",
        "Cross-Origin-Opener-Policy", "same-origin",
        "Cross-Origin-Resource-Policy", "same-origin",
        "Permissions-Policy", "camera=(), microphone=(), geolocation=()",
        "Cache-Control", "no-cache",
        NULL,
    };
    mxl_http_send_static(r, 200, "text/html; charset=utf-8", mxl_webui_index_html, mxl_webui_index_html_len, headers);
    return true;
}
