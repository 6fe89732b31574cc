/* webui.h - the WebUI `serve --webui` answers at {api_prefix}/webui/ (webui.c): the page is
 * src/server/webui/index.html, compiled into the binary by the Makefile (build/gen/webui_page.c) as
 * NUL-terminated bytes. */
#ifndef MXL_SERVER_WEBUI_H
#define MXL_SERVER_WEBUI_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"
#include "server/http.h"

extern const unsigned char mxl_webui_index_html[];
extern const size_t mxl_webui_index_html_len; /* without the NUL */

struct mxl_server;
/* Turns the WebUI on: its Content-Security-Policy, from the page's <style> and <script>. */
mxl_status mxl_webui_init(struct mxl_server *s, mxl_error *err);
/* Answers `sub` (a path below the API prefix) when it is the WebUI's (/webui, /webui/) and the
 * WebUI is on; false otherwise. */
bool mxl_webui_route(struct mxl_server *s, mxl_http_req *r, const char *sub);

#endif
