/* tpl_strings.h - Python string helpers shared by template methods and filters (implemented in
 * tpl_methods.c): Python's notion of whitespace, strip, case mapping, split, splitlines,
 * replace and center. Not a public header. */
#ifndef MXL_TEMPLATE_TPL_STRINGS_H
#define MXL_TEMPLATE_TPL_STRINGS_H

#include "template/tpl_internal.h"

bool mxl_tpl_tstr_is_space(int32_t cp);
/* strip with Python semantics; chars NULL means whitespace. Returns a view into s. */
tv mxl_tpl_tstr_strip(tv s, const tv *chars, bool left, bool right);
/* mode: 'u' upper, 'l' lower, 't' Python str.title, 'c' capitalize, 's' swapcase */
bool mxl_tpl_tstr_case(tctx *c, tv s, char mode, tv *out);
/* str.split / str.rsplit; sep NULL or none means whitespace */
bool mxl_tpl_tstr_split(tctx *c, tv s, const tv *sep, int64_t maxsplit, bool from_right, tv *out);
bool mxl_tpl_tstr_splitlines(tctx *c, tv s, bool keepends, tlist **out);
bool mxl_tpl_tstr_replace(tctx *c, tv s, tv old, tv new_, int64_t count, tv *out);
bool mxl_tpl_tstr_center(tctx *c, tv s, int64_t width, tv *out);

#endif
