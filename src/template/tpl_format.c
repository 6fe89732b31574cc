/* tpl_format.c - Python string formatting for templates: printf-style `"%s" % x` and
 * `"{}".format(x)` with the common conversions (s, r, d, i, f, e, g, x, o, c, %) and format-spec
 * fields (fill, align, sign, zero padding, width, precision). Widths count code points as Python
 * does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/tpl_internal.h"

typedef struct fspec {
    char fill;
    char align; /* '<', '>', '^', '=' or 0 */
    char sign;  /* '+', '-', ' ' or 0 */
    bool alt, zero, comma;
    int width, prec; /* -1 when absent */
    char type;       /* 0 when absent */
} fspec;

static bool pad_out(tctx *c, tbuf *b, const char *s, size_t n, const fspec *sp, char dflt_align) {
    size_t len = mxl_tpl_tutf8_len(s, n);
    if (sp->width < 0 || (size_t)sp->width <= len) return mxl_tpl_tbuf_put(c, b, s, n);
    size_t padn = (size_t)sp->width - len;
    char align = sp->align ? sp->align : dflt_align;
    char fill = sp->fill ? sp->fill : ' ';
    size_t left = 0, right = 0;
    if (align == '<') right = padn;
    else if (align == '^') {
        left = padn / 2;
        right = padn - left;
    } else if (align == '=' && n && (s[0] == '-' || s[0] == '+' || s[0] == ' ')) {
        if (!mxl_tpl_tbuf_putc(c, b, s[0])) return false;
        for (size_t i = 0; i < padn; i++)
            if (!mxl_tpl_tbuf_putc(c, b, fill)) return false;
        return mxl_tpl_tbuf_put(c, b, s + 1, n - 1);
    } else left = padn;
    for (size_t i = 0; i < left; i++)
        if (!mxl_tpl_tbuf_putc(c, b, fill)) return false;
    if (!mxl_tpl_tbuf_put(c, b, s, n)) return false;
    for (size_t i = 0; i < right; i++)
        if (!mxl_tpl_tbuf_putc(c, b, fill)) return false;
    return true;
}

static bool num_value(tctx *c, tv v, bool want_int, int64_t *i, double *f, bool *is_float) {
    if (v.t == TV_INT || v.t == TV_BOOL) {
        *i = v.t == TV_INT ? v.u.i : v.u.b;
        *f = (double)*i;
        *is_float = false;
        return true;
    }
    if (v.t == TV_FLOAT) {
        *f = v.u.f;
        *is_float = true;
        if (want_int) {
            if (!isfinite(v.u.f) || fabs(v.u.f) > 9.2e18)
                return mxl_tpl_terr(c, TE_VALUE, "cannot convert float to integer") == 0;
            *i = (int64_t)v.u.f;
        }
        return true;
    }
    if (v.t == TV_UNDEF) return mxl_tpl_terr(c, TE_UNDEFINED, "undefined value in format") == 0;
    return mxl_tpl_terr(c, TE_TYPE, "a real number is required, not %s", mxl_tpl_tv_type_name(v)) == 0;
}

/* Formats a number per spec into b (sign handling, zero padding, grouping). */
static bool format_number(tctx *c, tbuf *b, tv v, fspec sp) {
    char type = sp.type;
    bool intlike = type == 'd' || type == 'i' || type == 'x' || type == 'X' || type == 'o' ||
                   type == 'b' || type == 'c';
    int64_t iv = 0;
    double fv = 0;
    bool isf = false;
    if (!num_value(c, v, intlike, &iv, &fv, &isf)) return false;
    if (type == 0 && isf) type = 'r'; /* str(float) */
    if (type == 0) type = 'd';
    char body[400];
    bool neg = false;
    int prec = sp.prec < 0 ? 6 : (sp.prec > 100 ? 100 : sp.prec);
    switch (type) {
    case 'd':
    case 'i': {
        neg = iv < 0;
        unsigned long long u = neg ? 0ull - (unsigned long long)iv : (unsigned long long)iv;
        snprintf(body, sizeof body, "%llu", u);
        if (sp.comma) {
            char tmp[64];
            size_t L = strlen(body), o = 0;
            for (size_t k = 0; k < L; k++) {
                if (k && (L - k) % 3 == 0) tmp[o++] = ',';
                tmp[o++] = body[k];
            }
            tmp[o] = 0;
            snprintf(body, sizeof body, "%s", tmp);
        }
        break;
    }
    case 'x':
    case 'X':
    case 'o': {
        neg = iv < 0;
        unsigned long long u = neg ? 0ull - (unsigned long long)iv : (unsigned long long)iv;
        snprintf(body, sizeof body, type == 'x' ? "%s%llx" : type == 'X' ? "%s%llX" : "%s%llo",
                 sp.alt ? (type == 'o' ? "0o" : type == 'x' ? "0x" : "0X") : "", u);
        break;
    }
    case 'b': {
        neg = iv < 0;
        unsigned long long u = neg ? 0ull - (unsigned long long)iv : (unsigned long long)iv;
        char tmp[80];
        int o = 0;
        do {
            tmp[o++] = (char)('0' + (u & 1));
            u >>= 1;
        } while (u);
        size_t k = 0;
        if (sp.alt) {
            body[k++] = '0';
            body[k++] = 'b';
        }
        while (o) body[k++] = tmp[--o];
        body[k] = 0;
        break;
    }
    case 'c': {
        char enc[5] = {0};
        size_t L = mxl_utf8_encode((int32_t)iv, enc);
        enc[L] = 0;
        return pad_out(c, b, enc, L, &sp, '<');
    }
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G':
    case '%': {
        double x = fv;
        if (type == '%') x *= 100.0;
        neg = signbit(x) && !isnan(x);
        double ax = fabs(x);
        if (isinf(ax)) snprintf(body, sizeof body, (type >= 'A' && type <= 'Z') ? "INF" : "inf");
        else if (isnan(ax)) snprintf(body, sizeof body, (type >= 'A' && type <= 'Z') ? "NAN" : "nan");
        else {
            char cf[16];
            char t = type == '%' ? 'f' : type;
            snprintf(cf, sizeof cf, "%%%s.%d%c", sp.alt ? "#" : "", (t == 'g' || t == 'G') && prec == 0 ? 1 : prec, t);
            snprintf(body, sizeof body, cf, ax);
        }
        if (type == '%') strncat(body, "%", sizeof body - strlen(body) - 1);
        break;
    }
    case 'r':
    case 's': {
        neg = signbit(fv) && !isnan(fv);
        mxl_tpl_tfmt_float_repr(fabs(fv), body, sizeof body);
        if (isnan(fv)) neg = false;
        break;
    }
    default:
        return mxl_tpl_terr(c, TE_VALUE, "Unknown format code '%c' for object of type '%s'", type, mxl_tpl_tv_type_name(v)) == 0;
    }
    char full[420];
    const char *sg = neg ? "-" : sp.sign == '+' ? "+" : sp.sign == ' ' ? " " : "";
    snprintf(full, sizeof full, "%s%s", sg, body);
    if (sp.zero && !sp.align) {
        sp.fill = '0';
        sp.align = '=';
    }
    return pad_out(c, b, full, strlen(full), &sp, '>');
}

static bool format_value(tctx *c, tbuf *b, tv v, const fspec *sp) {
    if (sp->type == 's' || (sp->type == 0 && !mxl_tpl_tv_is_number(v)) || sp->type == 'r' ) {
        if (sp->type == 'r' && !mxl_tpl_tv_is_number(v)) {
            tbuf tmp = {0};
            if (!mxl_tpl_tv_repr_append(c, &tmp, v)) return false;
            return pad_out(c, b, tmp.p ? tmp.p : "", tmp.n, sp, '<');
        }
        if (sp->type == 's' || !mxl_tpl_tv_is_number(v)) {
            tv s;
            if (!mxl_tpl_tv_to_str(c, v, &s)) return false;
            size_t n = s.n;
            if (sp->prec >= 0) n = mxl_tpl_tutf8_offset(s.u.s, s.n, (size_t)sp->prec);
            return pad_out(c, b, s.u.s, n, sp, mxl_tpl_tv_is_number(v) ? '>' : '<');
        }
    }
    if (v.t == TV_BOOL && sp->type == 0) {
        return pad_out(c, b, v.u.b ? "True" : "False", v.u.b ? 4 : 5, sp, '<');
    }
    return format_number(c, b, v, *sp);
}

/* ---------------------------------------------------------------- `%` */

static bool parse_int(const char *s, size_t n, size_t *i, int *out) {
    if (*i >= n || s[*i] < '0' || s[*i] > '9') return false;
    long v = 0;
    while (*i < n && s[*i] >= '0' && s[*i] <= '9') {
        v = v * 10 + (s[*i] - '0');
        if (v > 10000) v = 10000;
        (*i)++;
    }
    *out = (int)v;
    return true;
}

bool mxl_tpl_tfmt_percent(tctx *c, tv fmt, tv args, tv *out) {
    const char *s = fmt.u.s;
    size_t n = fmt.n;
    tv *argv;
    size_t argc, next = 0;
    tdict *map = NULL;
    if (args.t == TV_LIST && args.u.l->tuple) {
        argv = args.u.l->items;
        argc = args.u.l->n;
    } else {
        argv = &args;
        argc = 1;
        if (args.t == TV_DICT && !args.u.d->ns) map = args.u.d;
    }
    tbuf b = {0};
    bool used_map = false;
    size_t i = 0;
    while (i < n) {
        const char *pct = memchr(s + i, '%', n - i);
        size_t end = pct ? (size_t)(pct - s) : n;
        if (!mxl_tpl_tbuf_put(c, &b, s + i, end - i)) return false;
        if (!pct) break;
        i = end + 1;
        if (i >= n) return mxl_tpl_terr(c, TE_VALUE, "incomplete format") == 0;
        if (s[i] == '%') {
            if (!mxl_tpl_tbuf_putc(c, &b, '%')) return false;
            i++;
            continue;
        }
        tv arg;
        bool have = false;
        if (s[i] == '(') {
            size_t k = i + 1;
            while (k < n && s[k] != ')') k++;
            if (k >= n) return mxl_tpl_terr(c, TE_VALUE, "incomplete format key") == 0;
            if (!map) return mxl_tpl_terr(c, TE_TYPE, "format requires a mapping") == 0;
            tv *v = mxl_tpl_tdict_get_str(map, s + i + 1, k - i - 1);
            if (!v) return mxl_tpl_terr(c, TE_VALUE, "KeyError: '%.*s'", (int)(k - i - 1), s + i + 1) == 0;
            arg = *v;
            have = true;
            used_map = true;
            i = k + 1;
        }
        fspec sp = {.width = -1, .prec = -1};
        while (i < n && strchr("-+ #0", s[i])) {
            if (s[i] == '-') sp.align = '<';
            else if (s[i] == '+') sp.sign = '+';
            else if (s[i] == ' ') { if (!sp.sign) sp.sign = ' '; }
            else if (s[i] == '#') sp.alt = true;
            else sp.zero = true;
            i++;
        }
        if (i < n && s[i] == '*') return mxl_tpl_terr(c, TE_VALUE, "'*' width is not supported") == 0;
        parse_int(s, n, &i, &sp.width);
        if (i < n && s[i] == '.') {
            i++;
            sp.prec = 0;
            parse_int(s, n, &i, &sp.prec);
        }
        if (i >= n) return mxl_tpl_terr(c, TE_VALUE, "incomplete format") == 0;
        char t = s[i++];
        if (!have) {
            if (next >= argc) return mxl_tpl_terr(c, TE_TYPE, "not enough arguments for format string") == 0;
            arg = argv[next++];
        }
        if (sp.align == '<') sp.zero = false;
        switch (t) {
        case 's': case 'r': case 'a':
            sp.type = t == 'a' ? 'r' : t;
            if (sp.type == 'r' || !mxl_tpl_tv_is_number(arg) || arg.t == TV_BOOL) {
                fspec s2 = sp;
                s2.align = sp.align ? '<' : '>';
                if (!format_value(c, &b, arg, &s2)) return false;
            } else {
                fspec s2 = sp;
                s2.type = 0;
                s2.align = sp.align ? '<' : '>';
                s2.zero = false;
                if (arg.t == TV_FLOAT) s2.type = 'r';
                s2.prec = -1;
                tbuf tmp = {0};
                if (!format_number(c, &tmp, arg, s2)) return false;
                size_t L = tmp.n;
                if (sp.prec >= 0 && (size_t)sp.prec < L) L = (size_t)sp.prec;
                fspec s3 = {.width = sp.width, .prec = -1, .align = s2.align};
                if (!pad_out(c, &b, tmp.p, L, &s3, '>')) return false;
            }
            break;
        case 'd': case 'i': case 'u': case 'x': case 'X': case 'o': case 'e': case 'E': case 'f':
        case 'F': case 'g': case 'G': case 'c':
            if (arg.t == TV_STR && t != 'c')
                return mxl_tpl_terr(c, TE_TYPE, "%%%c format: a real number is required, not str", t) == 0;
            sp.type = t == 'u' ? 'd' : t;
            if (!sp.align) sp.align = 0;
            if (!format_number(c, &b, arg, sp)) return false;
            break;
        default:
            return mxl_tpl_terr(c, TE_VALUE, "unsupported format character '%c'", t) == 0;
        }
    }
    if (!used_map && next < argc && !(argc == 1 && map))
        return mxl_tpl_terr(c, TE_TYPE, "not all arguments converted during string formatting") == 0;
    *out = mxl_tpl_tbuf_value(&b);
    return true;
}

/* ---------------------------------------------------------------- str.format */

static bool parse_spec(tctx *c, const char *s, size_t n, fspec *sp) {
    size_t i = 0;
    *sp = (fspec){.width = -1, .prec = -1};
    if (n >= 2 && strchr("<>^=", s[1])) {
        sp->fill = s[0];
        sp->align = s[1];
        i = 2;
    } else if (n >= 1 && strchr("<>^=", s[0])) {
        sp->align = s[0];
        i = 1;
    }
    if (i < n && strchr("+- ", s[i])) sp->sign = s[i++];
    if (i < n && s[i] == '#') {
        sp->alt = true;
        i++;
    }
    if (i < n && s[i] == '0') {
        sp->zero = true;
        i++;
    }
    parse_int(s, n, &i, &sp->width);
    if (i < n && s[i] == ',') {
        sp->comma = true;
        i++;
    }
    if (i < n && s[i] == '.') {
        i++;
        if (!parse_int(s, n, &i, &sp->prec)) return mxl_tpl_terr(c, TE_VALUE, "Format specifier missing precision") == 0;
    }
    if (i < n) sp->type = s[i++];
    if (i < n) return mxl_tpl_terr(c, TE_VALUE, "Invalid format specifier") == 0;
    return true;
}

bool mxl_tpl_tfmt_format(tctx *c, tv fmt, tv *args, size_t nargs, const char **kwn, tv *kwv, size_t nkw,
                 tv *out) {
    const char *s = fmt.u.s;
    size_t n = fmt.n, i = 0, autoidx = 0;
    tbuf b = {0};
    while (i < n) {
        char ch = s[i];
        if (ch == '}') {
            if (i + 1 < n && s[i + 1] == '}') {
                if (!mxl_tpl_tbuf_putc(c, &b, '}')) return false;
                i += 2;
                continue;
            }
            return mxl_tpl_terr(c, TE_VALUE, "Single '}' encountered in format string") == 0;
        }
        if (ch != '{') {
            size_t k = i;
            while (k < n && s[k] != '{' && s[k] != '}') k++;
            if (!mxl_tpl_tbuf_put(c, &b, s + i, k - i)) return false;
            i = k;
            continue;
        }
        if (i + 1 < n && s[i + 1] == '{') {
            if (!mxl_tpl_tbuf_putc(c, &b, '{')) return false;
            i += 2;
            continue;
        }
        size_t k = i + 1;
        int nest = 0;
        while (k < n && (s[k] != '}' || nest)) {
            if (s[k] == '{') nest++;
            else if (s[k] == '}') nest--;
            k++;
        }
        if (k >= n) return mxl_tpl_terr(c, TE_VALUE, "expected '}' before end of string") == 0;
        const char *field = s + i + 1;
        size_t flen = k - i - 1;
        i = k + 1;
        /* split name ! conv : spec */
        size_t nl = 0;
        while (nl < flen && field[nl] != '!' && field[nl] != ':' && field[nl] != '.' && field[nl] != '[') nl++;
        size_t rest = nl;
        tv v;
        if (nl == 0) {
            if (autoidx >= nargs) return mxl_tpl_terr(c, TE_VALUE, "Replacement index %zu out of range for positional args tuple", autoidx) == 0;
            v = args[autoidx++];
        } else if (field[0] >= '0' && field[0] <= '9') {
            size_t idx = 0;
            for (size_t q = 0; q < nl; q++) {
                if (field[q] < '0' || field[q] > '9') return mxl_tpl_terr(c, TE_VALUE, "bad format field") == 0;
                idx = idx * 10 + (size_t)(field[q] - '0');
                if (idx > 1000000) break;
            }
            if (idx >= nargs) return mxl_tpl_terr(c, TE_VALUE, "Replacement index %zu out of range for positional args tuple", idx) == 0;
            v = args[idx];
        } else {
            bool found = false;
            for (size_t q = 0; q < nkw; q++)
                if (strlen(kwn[q]) == nl && memcmp(kwn[q], field, nl) == 0) {
                    v = kwv[q];
                    found = true;
                }
            if (!found) return mxl_tpl_terr(c, TE_VALUE, "KeyError: '%.*s'", (int)nl, field) == 0;
        }
        /* attribute / item chain */
        while (rest < flen && (field[rest] == '.' || field[rest] == '[')) {
            if (field[rest] == '.') {
                size_t e = rest + 1;
                while (e < flen && field[e] != '.' && field[e] != '[' && field[e] != '!' && field[e] != ':') e++;
                if (!mxl_tpl_tgetattr(c, v, field + rest + 1, e - rest - 1, &v)) return false;
                rest = e;
            } else {
                size_t e = rest + 1;
                while (e < flen && field[e] != ']') e++;
                if (e >= flen) return mxl_tpl_terr(c, TE_VALUE, "Missing ']' in format string") == 0;
                tv key = tv_strn(field + rest + 1, e - rest - 1);
                bool digits = e > rest + 1;
                int64_t iv = 0;
                for (size_t q = rest + 1; q < e; q++) {
                    if (field[q] < '0' || field[q] > '9') digits = false;
                    else if (iv < 100000000) iv = iv * 10 + (field[q] - '0');
                }
                if (digits) key = tv_int(iv);
                if (!mxl_tpl_tgetitem(c, v, key, &v)) return false;
                rest = e + 1;
            }
        }
        char conv = 0;
        if (rest < flen && field[rest] == '!') {
            if (rest + 1 >= flen) return mxl_tpl_terr(c, TE_VALUE, "end of string while looking for conversion specifier") == 0;
            conv = field[rest + 1];
            rest += 2;
        }
        fspec sp = {.width = -1, .prec = -1};
        if (rest < flen && field[rest] == ':') {
            if (!parse_spec(c, field + rest + 1, flen - rest - 1, &sp)) return false;
        } else if (rest < flen) {
            return mxl_tpl_terr(c, TE_VALUE, "expected ':' after conversion specifier") == 0;
        }
        if (conv == 'r' || conv == 'a') {
            tbuf tmp = {0};
            if (!mxl_tpl_tv_repr_append(c, &tmp, v)) return false;
            v = mxl_tpl_tbuf_value(&tmp);
        } else if (conv == 's') {
            if (!mxl_tpl_tv_to_str(c, v, &v)) return false;
        } else if (conv) {
            return mxl_tpl_terr(c, TE_VALUE, "Unknown conversion specifier %c", conv) == 0;
        }
        if (!format_value(c, &b, v, &sp)) return false;
    }
    *out = mxl_tpl_tbuf_value(&b);
    return true;
}
