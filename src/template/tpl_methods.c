/* tpl_methods.c - Python methods on template values, with Python's semantics: str (strip family,
 * split/rsplit/splitlines, startswith/endswith, replace, case conversion, find/count, format,
 * join, is* predicates...), dict (items, keys, values, get) and list (index, count). Methods that
 * mutate a list or dict are refused as Jinja2's ImmutableSandboxedEnvironment refuses them.
 * The string helpers here (Python whitespace, case mapping, split) are shared with filters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "template/tpl_internal.h"
#include "template/tpl_strings.h"

static const char *const STR_METHODS[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith",
    "replace", "upper", "lower", "title", "capitalize", "swapcase", "find", "rfind", "index",
    "rindex", "count", "format", "join", "isdigit", "isalpha", "isspace", "isalnum", "isupper",
    "islower", "isnumeric", "isdecimal", "istitle", "zfill", "center", "ljust", "rjust",
    "partition", "rpartition", "removeprefix", "removesuffix", "casefold", "expandtabs", NULL};
static const char *const DICT_METHODS[] = {"items", "keys", "values", "get", "copy", NULL};
static const char *const DICT_UNSAFE[] = {"clear", "pop", "popitem", "setdefault", "update", NULL};
static const char *const LIST_METHODS[] = {"index", "count", "copy", NULL};
static const char *const LIST_UNSAFE[] = {"append", "clear", "pop", "reverse", "insert", "sort",
                                          "extend", "remove", NULL};

static bool in_set(const char *const *set, const char *name, size_t n) {
    for (int i = 0; set[i]; i++)
        if (strlen(set[i]) == n && memcmp(set[i], name, n) == 0) return true;
    return false;
}

bool mxl_tpl_tmethod_exists(tv self, const char *name, size_t n, bool *unsafe) {
    *unsafe = false;
    switch (self.t) {
    case TV_STR: return in_set(STR_METHODS, name, n);
    case TV_DICT:
        if (self.u.d->ns) return false;
        if (in_set(DICT_UNSAFE, name, n)) {
            *unsafe = true;
            return true;
        }
        return in_set(DICT_METHODS, name, n);
    case TV_LIST:
        if (!self.u.l->tuple && in_set(LIST_UNSAFE, name, n)) {
            *unsafe = true;
            return true;
        }
        return in_set(LIST_METHODS, name, n);
    default: return false;
    }
}

/* ---------------------------------------------------------------- shared string helpers */

bool mxl_tpl_tstr_is_space(int32_t cp) {
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f) || cp == 0x85 || cp == 0xa0)
        return true;
    if (cp < 0x80) return false;
    utf8proc_category_t cat = utf8proc_category(cp);
    return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

static bool in_chars(int32_t cp, tv chars) {
    size_t pos = 0;
    while (pos < chars.n)
        if (mxl_tpl_tutf8_next(chars.u.s, chars.n, &pos) == cp) return true;
    return false;
}

tv mxl_tpl_tstr_strip(tv s, const tv *chars, bool left, bool right) {
    size_t b = 0, e = s.n;
    if (left) {
        while (b < e) {
            size_t p = b;
            int32_t cp = mxl_tpl_tutf8_next(s.u.s, s.n, &p);
            if (chars ? !in_chars(cp, *chars) : !mxl_tpl_tstr_is_space(cp)) break;
            b = p;
        }
    }
    if (right) {
        /* find the end of the last kept code point by scanning forward */
        size_t p = b, last_keep = b;
        while (p < e) {
            int32_t cp = mxl_tpl_tutf8_next(s.u.s, s.n, &p);
            if (chars ? !in_chars(cp, *chars) : !mxl_tpl_tstr_is_space(cp)) last_keep = p;
        }
        e = last_keep;
    }
    return tv_strn(s.u.s + b, e - b);
}

typedef int32_t (*cpmap)(int32_t);
static int32_t map_upper(int32_t cp) { return cp < 0x80 ? (cp >= 'a' && cp <= 'z' ? cp - 32 : cp) : utf8proc_toupper(cp); }
static int32_t map_lower(int32_t cp) { return cp < 0x80 ? (cp >= 'A' && cp <= 'Z' ? cp + 32 : cp) : utf8proc_tolower(cp); }
static int32_t map_title(int32_t cp) { return cp < 0x80 ? map_upper(cp) : utf8proc_totitle(cp); }

static bool is_cased(int32_t cp) {
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
    utf8proc_category_t cat = utf8proc_category(cp);
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

/* mode: 'u' upper, 'l' lower, 't' Python title, 'c' capitalize, 's' swapcase */
bool mxl_tpl_tstr_case(tctx *c, tv s, char mode, tv *out) {
    tbuf b = {0};
    size_t pos = 0;
    bool prev_cased = false, first = true;
    while (pos < s.n) {
        int32_t cp = mxl_tpl_tutf8_next(s.u.s, s.n, &pos);
        char op; /* 'U' upper, 'L' lower, 'T' title */
        switch (mode) {
        case 'u': op = 'U'; break;
        case 'l': op = 'L'; break;
        case 't': op = prev_cased ? 'L' : 'T'; break;
        case 'c': op = first ? 'T' : 'L'; break;
        default: op = map_upper(cp) != cp ? 'U' : 'L'; break;
        }
        prev_cased = is_cased(cp);
        first = false;
        /* Python's full case mappings that expand to several characters */
        const char *special = NULL;
        if (op != 'L') {
            bool t = op == 'T';
            switch (cp) {
            case 0xDF: special = t ? "Ss" : "SS"; break;
            case 0xFB00: special = t ? "Ff" : "FF"; break;
            case 0xFB01: special = t ? "Fi" : "FI"; break;
            case 0xFB02: special = t ? "Fl" : "FL"; break;
            case 0xFB03: special = t ? "Ffi" : "FFI"; break;
            case 0xFB04: special = t ? "Ffl" : "FFL"; break;
            case 0xFB05:
            case 0xFB06: special = t ? "St" : "ST"; break;
            default: break;
            }
        } else if (cp == 0x130) {
            special = "i\xcc\x87";
        }
        if (special) {
            if (!mxl_tpl_tbuf_put(c, &b, special, strlen(special))) return false;
            continue;
        }
        int32_t m = op == 'U' ? map_upper(cp) : op == 'L' ? map_lower(cp) : map_title(cp);
        char enc[4];
        size_t L = mxl_utf8_encode(m, enc);
        if (!mxl_tpl_tbuf_put(c, &b, enc, L)) return false;
    }
    *out = mxl_tpl_tbuf_value(&b);
    return true;
}

bool mxl_tpl_tstr_split(tctx *c, tv s, const tv *sep, int64_t maxsplit, bool from_right, tv *out) {
    tlist *l = mxl_tpl_tlist_new(c, 0);
    if (!l) return false;
    if (sep && sep->t != TV_NONE) {
        if (sep->t != TV_STR) return mxl_tpl_terr(c, TE_TYPE, "must be str or None, not %s", mxl_tpl_tv_type_name(*sep)) == 0;
        if (sep->n == 0) return mxl_tpl_terr(c, TE_VALUE, "empty separator") == 0;
        if (!from_right) {
            size_t i = 0;
            int64_t splits = 0;
            for (;;) {
                const char *hit = (maxsplit < 0 || splits < maxsplit)
                                      ? memmem(s.u.s + i, s.n - i, sep->u.s, sep->n)
                                      : NULL;
                if (!hit) {
                    if (!mxl_tpl_tlist_push(c, l, tv_strn(s.u.s + i, s.n - i))) return false;
                    break;
                }
                size_t h = (size_t)(hit - s.u.s);
                if (!mxl_tpl_tlist_push(c, l, tv_strn(s.u.s + i, h - i))) return false;
                i = h + sep->n;
                splits++;
            }
        } else {
            /* collect from the right, then reverse */
            size_t e = s.n;
            int64_t splits = 0;
            for (;;) {
                size_t found = SIZE_MAX;
                if ((maxsplit < 0 || splits < maxsplit) && e >= sep->n) {
                    for (size_t k = e - sep->n + 1; k-- > 0;)
                        if (memcmp(s.u.s + k, sep->u.s, sep->n) == 0) {
                            found = k;
                            break;
                        }
                }
                if (found == SIZE_MAX) {
                    if (!mxl_tpl_tlist_push(c, l, tv_strn(s.u.s, e))) return false;
                    break;
                }
                if (!mxl_tpl_tlist_push(c, l, tv_strn(s.u.s + found + sep->n, e - found - sep->n))) return false;
                e = found;
                splits++;
            }
            for (size_t i = 0; i < l->n / 2; i++) {
                tv t = l->items[i];
                l->items[i] = l->items[l->n - 1 - i];
                l->items[l->n - 1 - i] = t;
            }
        }
        *out = mxl_tpl_tv_list(l);
        return mxl_tpl_tfuel(c, l->n / 4);
    }
    /* whitespace split */
    size_t n = s.n;
    /* positions of code points */
    if (!from_right) {
        size_t pos = 0;
        int64_t splits = 0;
        while (pos < n) {
            size_t p = pos;
            int32_t cp = mxl_tpl_tutf8_next(s.u.s, n, &p);
            if (mxl_tpl_tstr_is_space(cp)) {
                pos = p;
                continue;
            }
            if (maxsplit >= 0 && splits >= maxsplit) {
                tv rest = mxl_tpl_tstr_strip(tv_strn(s.u.s + pos, n - pos), NULL, false, true);
                if (!mxl_tpl_tlist_push(c, l, rest)) return false;
                break;
            }
            size_t b = pos;
            while (pos < n) {
                p = pos;
                cp = mxl_tpl_tutf8_next(s.u.s, n, &p);
                if (mxl_tpl_tstr_is_space(cp)) break;
                pos = p;
            }
            if (!mxl_tpl_tlist_push(c, l, tv_strn(s.u.s + b, pos - b))) return false;
            splits++;
        }
    } else {
        /* rsplit(None, maxsplit): split all words, then merge the leftmost ones */
        tv all;
        if (!mxl_tpl_tstr_split(c, s, NULL, -1, false, &all)) return false;
        tlist *w = all.u.l;
        if (maxsplit < 0 || (size_t)maxsplit + 1 >= w->n) {
            *out = all;
            return true;
        }
        size_t keep = (size_t)maxsplit;
        /* head: everything up to the start of word (n - keep), right-stripped */
        tv firstkept = w->items[w->n - keep];
        tv head = mxl_tpl_tstr_strip(tv_strn(s.u.s, (size_t)(firstkept.u.s - s.u.s)), NULL, true, true);
        if (!mxl_tpl_tlist_push(c, l, head)) return false;
        for (size_t i = w->n - keep; i < w->n; i++)
            if (!mxl_tpl_tlist_push(c, l, w->items[i])) return false;
    }
    *out = mxl_tpl_tv_list(l);
    return mxl_tpl_tfuel(c, l->n / 4);
}

static bool is_line_break(int32_t cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d ||
           cp == 0x1e || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

bool mxl_tpl_tstr_splitlines(tctx *c, tv s, bool keepends, tlist **out) {
    tlist *l = mxl_tpl_tlist_new(c, 0);
    if (!l) return false;
    size_t pos = 0, start = 0;
    while (pos < s.n) {
        size_t p = pos;
        int32_t cp = mxl_tpl_tutf8_next(s.u.s, s.n, &p);
        if (is_line_break(cp)) {
            size_t eol = p;
            if (cp == '\r' && eol < s.n && s.u.s[eol] == '\n') eol++;
            if (!mxl_tpl_tlist_push(c, l, tv_strn(s.u.s + start, (keepends ? eol : pos) - start))) return false;
            start = pos = eol;
        } else {
            pos = p;
        }
    }
    if (start < s.n && !mxl_tpl_tlist_push(c, l, tv_strn(s.u.s + start, s.n - start))) return false;
    *out = l;
    return true;
}

bool mxl_tpl_tstr_replace(tctx *c, tv s, tv old, tv new_, int64_t count, tv *out) {
    tbuf b = {0};
    if (old.n == 0) {
        /* Python inserts `new` between every code point (and at both ends) */
        size_t pos = 0;
        int64_t done = 0;
        while (count < 0 || done < count) {
            if (!mxl_tpl_tbuf_put(c, &b, new_.u.s, new_.n)) return false;
            done++;
            if (pos >= s.n) break;
            size_t p = pos;
            mxl_tpl_tutf8_next(s.u.s, s.n, &p);
            if (!mxl_tpl_tbuf_put(c, &b, s.u.s + pos, p - pos)) return false;
            pos = p;
        }
        if (!mxl_tpl_tbuf_put(c, &b, s.u.s + pos, s.n - pos)) return false;
        *out = mxl_tpl_tbuf_value(&b);
        return true;
    }
    size_t i = 0;
    int64_t done = 0;
    for (;;) {
        const char *hit = (count < 0 || done < count) ? memmem(s.u.s + i, s.n - i, old.u.s, old.n) : NULL;
        if (!hit) break;
        size_t h = (size_t)(hit - s.u.s);
        if (!mxl_tpl_tbuf_put(c, &b, s.u.s + i, h - i) || !mxl_tpl_tbuf_put(c, &b, new_.u.s, new_.n)) return false;
        i = h + old.n;
        done++;
    }
    if (done == 0) {
        *out = s;
        return true;
    }
    if (!mxl_tpl_tbuf_put(c, &b, s.u.s + i, s.n - i)) return false;
    *out = mxl_tpl_tbuf_value(&b);
    return true;
}

/* Python str.join semantics: every item must be a str. */
static bool str_join(tctx *c, tv sep, tv iterable, tv *out) {
    tlist *l;
    if (!mxl_tpl_titer_list(c, iterable, &l)) return false;
    tbuf b = {0};
    for (size_t i = 0; i < l->n; i++) {
        if (l->items[i].t != TV_STR)
            return mxl_tpl_terr(c, TE_TYPE, "sequence item %zu: expected str instance, %s found", i,
                        mxl_tpl_tv_type_name(l->items[i])) == 0;
        if ((i && !mxl_tpl_tbuf_put(c, &b, sep.u.s, sep.n)) || !mxl_tpl_tbuf_put(c, &b, l->items[i].u.s, l->items[i].n))
            return false;
    }
    *out = mxl_tpl_tbuf_value(&b);
    return true;
}

static bool need_str(tctx *c, tv *v, const char *method) {
    if (!v) return mxl_tpl_terr(c, TE_TYPE, "%s() missing required argument", method) == 0;
    if (v->t != TV_STR) return mxl_tpl_terr(c, TE_TYPE, "%s() argument must be str, not %s", method, mxl_tpl_tv_type_name(*v)) == 0;
    return true;
}

static bool affix_match(tctx *c, tv s, tv *arg, bool suffix, const char *method, bool *out) {
    if (!arg) return mxl_tpl_terr(c, TE_TYPE, "%s() takes at least 1 argument (0 given)", method) == 0;
    if (arg->t == TV_LIST && arg->u.l->tuple) {
        *out = false;
        for (size_t i = 0; i < arg->u.l->n; i++) {
            bool r;
            if (!affix_match(c, s, &arg->u.l->items[i], suffix, method, &r)) return false;
            if (r) {
                *out = true;
                return true;
            }
        }
        return true;
    }
    if (arg->t != TV_STR)
        return mxl_tpl_terr(c, TE_TYPE, "%s first arg must be str or a tuple of str, not %s", method, mxl_tpl_tv_type_name(*arg)) == 0;
    if (arg->n > s.n) *out = false;
    else *out = memcmp(suffix ? s.u.s + s.n - arg->n : s.u.s, arg->u.s, arg->n) == 0;
    return true;
}

static int64_t count_sub(tv s, tv sub) {
    if (sub.n == 0) return (int64_t)mxl_tpl_tutf8_len(s.u.s, s.n) + 1;
    int64_t k = 0;
    size_t i = 0;
    const char *hit;
    while ((hit = memmem(s.u.s + i, s.n - i, sub.u.s, sub.n))) {
        k++;
        i = (size_t)(hit - s.u.s) + sub.n;
    }
    return k;
}

static bool all_cp(tv s, int kind) {
    if (s.n == 0) return false;
    size_t pos = 0;
    bool any_cased = false;
    while (pos < s.n) {
        int32_t cp = mxl_tpl_tutf8_next(s.u.s, s.n, &pos);
        utf8proc_category_t cat = utf8proc_category(cp);
        bool letter = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
        bool digit = cat == UTF8PROC_CATEGORY_ND || (cp >= '0' && cp <= '9');
        bool numeric = digit || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
        switch (kind) {
        case 'd': if (!digit) return false; break;
        case 'n': if (!numeric) return false; break;
        case 'a': if (!letter) return false; break;
        case 'A': if (!letter && !numeric) return false; break;
        case 's': if (!mxl_tpl_tstr_is_space(cp)) return false; break;
        case 'u':
            if (cat == UTF8PROC_CATEGORY_LL) return false;
            if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT) any_cased = true;
            break;
        case 'l':
            if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT) return false;
            if (cat == UTF8PROC_CATEGORY_LL) any_cased = true;
            break;
        }
    }
    return (kind == 'u' || kind == 'l') ? any_cased : true;
}

static bool int_or(tctx *c, tv *v, int64_t dflt, int64_t *out) {
    if (!v || v->t == TV_NONE) {
        *out = dflt;
        return true;
    }
    if (v->t == TV_INT) *out = v->u.i;
    else if (v->t == TV_BOOL) *out = v->u.b;
    else return mxl_tpl_terr(c, TE_TYPE, "'%s' object cannot be interpreted as an integer", mxl_tpl_tv_type_name(*v)) == 0;
    return true;
}

static bool pad_str(tctx *c, tv s, int64_t width, tv *fillv, char align, tv *out) {
    size_t len = mxl_tpl_tutf8_len(s.u.s, s.n);
    const char *fill = " ";
    size_t fl = 1;
    if (fillv) {
        if (fillv->t != TV_STR || mxl_tpl_tutf8_len(fillv->u.s, fillv->n) != 1)
            return mxl_tpl_terr(c, TE_TYPE, "The fill character must be exactly one character long") == 0;
        fill = fillv->u.s;
        fl = fillv->n;
    }
    if (width > (int64_t)c->max_output) return mxl_tpl_terr(c, TE_BUDGET, "padding exceeds the output budget") == 0;
    if (width <= (int64_t)len) {
        *out = s;
        return true;
    }
    size_t pad = (size_t)width - len, left;
    if (align == '<') left = 0;
    else if (align == '>') left = pad;
    else left = pad / 2 + (pad & (size_t)width & 1); /* CPython's centering rule */
    tbuf b = {0};
    for (size_t i = 0; i < left; i++)
        if (!mxl_tpl_tbuf_put(c, &b, fill, fl)) return false;
    if (!mxl_tpl_tbuf_put(c, &b, s.u.s, s.n)) return false;
    for (size_t i = left; i < pad; i++)
        if (!mxl_tpl_tbuf_put(c, &b, fill, fl)) return false;
    *out = mxl_tpl_tbuf_value(&b);
    return true;
}

bool mxl_tpl_tstr_center(tctx *c, tv s, int64_t width, tv *out) { return pad_str(c, s, width, NULL, '^', out); }

static bool str_method(tctx *c, tv s, const char *m, tv *args, size_t nargs, const char **kwn, tv *kwv,
                       size_t nkw, tv *out) {
#define A(i, name) mxl_tpl_targ(args, nargs, kwn, kwv, nkw, i, name)
#define IS(x) (!strcmp(m, x))
    if (IS("strip") || IS("lstrip") || IS("rstrip")) {
        tv *ch = A(0, "chars");
        if (ch && ch->t == TV_NONE) ch = NULL;
        if (ch && ch->t != TV_STR) return need_str(c, ch, m);
        *out = mxl_tpl_tstr_strip(s, ch, m[0] != 'r', m[0] != 'l');
        return true;
    }
    if (IS("split") || IS("rsplit")) {
        int64_t mx;
        if (!int_or(c, A(1, "maxsplit"), -1, &mx)) return false;
        return mxl_tpl_tstr_split(c, s, A(0, "sep"), mx, m[0] == 'r', out);
    }
    if (IS("splitlines")) {
        tv *ke = A(0, "keepends");
        tlist *l;
        if (!mxl_tpl_tstr_splitlines(c, s, ke && mxl_tpl_tv_truthy(*ke), &l)) return false;
        *out = mxl_tpl_tv_list(l);
        return true;
    }
    if (IS("startswith") || IS("endswith")) {
        bool r;
        if (!affix_match(c, s, A(0, NULL), m[0] == 'e', m, &r)) return false;
        *out = tv_bool(r);
        return true;
    }
    if (IS("replace")) {
        tv *o = A(0, "old"), *nw = A(1, "new");
        if (!need_str(c, o, m) || !need_str(c, nw, m)) return false;
        int64_t cnt;
        if (!int_or(c, A(2, "count"), -1, &cnt)) return false;
        return mxl_tpl_tstr_replace(c, s, *o, *nw, cnt, out);
    }
    if (IS("upper")) return mxl_tpl_tstr_case(c, s, 'u', out);
    if (IS("lower") || IS("casefold")) return mxl_tpl_tstr_case(c, s, 'l', out);
    if (IS("title")) return mxl_tpl_tstr_case(c, s, 't', out);
    if (IS("capitalize")) return mxl_tpl_tstr_case(c, s, 'c', out);
    if (IS("swapcase")) return mxl_tpl_tstr_case(c, s, 's', out);
    if (IS("find") || IS("rfind") || IS("index") || IS("rindex")) {
        tv *sub = A(0, NULL);
        if (!need_str(c, sub, m)) return false;
        int64_t res = -1;
        if (m[0] != 'r') {
            const char *hit = sub->n ? memmem(s.u.s, s.n, sub->u.s, sub->n) : s.u.s;
            if (hit) res = (int64_t)mxl_tpl_tutf8_len(s.u.s, (size_t)(hit - s.u.s));
        } else if (sub->n <= s.n) {
            for (size_t k = s.n - sub->n + 1; k-- > 0;)
                if (memcmp(s.u.s + k, sub->u.s, sub->n) == 0) {
                    res = (int64_t)mxl_tpl_tutf8_len(s.u.s, k);
                    break;
                }
        }
        if (res < 0 && (IS("index") || IS("rindex"))) return mxl_tpl_terr(c, TE_VALUE, "substring not found") == 0;
        *out = tv_int(res);
        return true;
    }
    if (IS("count")) {
        tv *sub = A(0, NULL);
        if (!need_str(c, sub, m)) return false;
        *out = tv_int(count_sub(s, *sub));
        return true;
    }
    if (IS("format")) return mxl_tpl_tfmt_format(c, s, args, nargs, kwn, kwv, nkw, out);
    if (IS("join")) {
        tv *it = A(0, NULL);
        if (!it) return mxl_tpl_terr(c, TE_TYPE, "join() takes exactly one argument (0 given)") == 0;
        return str_join(c, s, *it, out);
    }
    if (IS("isdigit") || IS("isdecimal")) { *out = tv_bool(all_cp(s, 'd')); return true; }
    if (IS("isnumeric")) { *out = tv_bool(all_cp(s, 'n')); return true; }
    if (IS("isalpha")) { *out = tv_bool(all_cp(s, 'a')); return true; }
    if (IS("isalnum")) { *out = tv_bool(all_cp(s, 'A')); return true; }
    if (IS("isspace")) { *out = tv_bool(all_cp(s, 's')); return true; }
    if (IS("isupper")) { *out = tv_bool(all_cp(s, 'u')); return true; }
    if (IS("islower")) { *out = tv_bool(all_cp(s, 'l')); return true; }
    if (IS("istitle")) {
        tv t;
        if (!mxl_tpl_tstr_case(c, s, 't', &t)) return false;
        bool cased = false;
        size_t q = 0;
        while (q < s.n && !cased) cased = is_cased(mxl_tpl_tutf8_next(s.u.s, s.n, &q));
        *out = tv_bool(cased && mxl_tpl_tv_equal(t, s));
        return true;
    }
    if (IS("zfill")) {
        int64_t w;
        if (!int_or(c, A(0, "width"), 0, &w)) return false;
        size_t len = mxl_tpl_tutf8_len(s.u.s, s.n);
        if (w <= (int64_t)len) {
            *out = s;
            return true;
        }
        if (w > (int64_t)c->max_output) return mxl_tpl_terr(c, TE_BUDGET, "padding exceeds the output budget") == 0;
        tbuf b = {0};
        size_t start = 0;
        if (s.n && (s.u.s[0] == '-' || s.u.s[0] == '+')) {
            if (!mxl_tpl_tbuf_putc(c, &b, s.u.s[0])) return false;
            start = 1;
        }
        for (size_t i = len; i < (size_t)w; i++)
            if (!mxl_tpl_tbuf_putc(c, &b, '0')) return false;
        if (!mxl_tpl_tbuf_put(c, &b, s.u.s + start, s.n - start)) return false;
        *out = mxl_tpl_tbuf_value(&b);
        return true;
    }
    if (IS("center") || IS("ljust") || IS("rjust")) {
        int64_t w;
        if (!int_or(c, A(0, "width"), 0, &w)) return false;
        return pad_str(c, s, w, A(1, "fillchar"), m[0] == 'c' ? '^' : m[0] == 'l' ? '<' : '>', out);
    }
    if (IS("partition") || IS("rpartition")) {
        tv *sep = A(0, NULL);
        if (!need_str(c, sep, m)) return false;
        if (sep->n == 0) return mxl_tpl_terr(c, TE_VALUE, "empty separator") == 0;
        tlist *l = mxl_tpl_tlist_new(c, 3);
        if (!l) return false;
        l->tuple = true;
        l->n = 3;
        size_t at = SIZE_MAX;
        if (m[0] == 'p') {
            const char *hit = memmem(s.u.s, s.n, sep->u.s, sep->n);
            if (hit) at = (size_t)(hit - s.u.s);
        } else if (sep->n <= s.n) {
            for (size_t k = s.n - sep->n + 1; k-- > 0;)
                if (memcmp(s.u.s + k, sep->u.s, sep->n) == 0) {
                    at = k;
                    break;
                }
        }
        if (at == SIZE_MAX) {
            l->items[0] = m[0] == 'p' ? s : tv_strn("", 0);
            l->items[1] = tv_strn("", 0);
            l->items[2] = m[0] == 'p' ? tv_strn("", 0) : s;
        } else {
            l->items[0] = tv_strn(s.u.s, at);
            l->items[1] = *sep;
            l->items[2] = tv_strn(s.u.s + at + sep->n, s.n - at - sep->n);
        }
        *out = mxl_tpl_tv_list(l);
        return true;
    }
    if (IS("removeprefix") || IS("removesuffix")) {
        tv *a = A(0, NULL);
        if (!need_str(c, a, m)) return false;
        bool r;
        if (!affix_match(c, s, a, m[6] == 's', m, &r)) return false;
        *out = !r ? s : m[6] == 's' ? tv_strn(s.u.s, s.n - a->n) : tv_strn(s.u.s + a->n, s.n - a->n);
        return true;
    }
    if (IS("expandtabs")) {
        int64_t ts;
        if (!int_or(c, A(0, "tabsize"), 8, &ts)) return false;
        tbuf b = {0};
        int64_t col = 0;
        size_t pos = 0;
        while (pos < s.n) {
            size_t p = pos;
            int32_t cp = mxl_tpl_tutf8_next(s.u.s, s.n, &p);
            if (cp == '\t') {
                int64_t sp = ts > 0 ? ts - col % ts : 0;
                for (int64_t k = 0; k < sp; k++)
                    if (!mxl_tpl_tbuf_putc(c, &b, ' ')) return false;
                col += sp;
            } else {
                if (!mxl_tpl_tbuf_put(c, &b, s.u.s + pos, p - pos)) return false;
                col = (cp == '\n' || cp == '\r') ? 0 : col + 1;
            }
            pos = p;
        }
        *out = mxl_tpl_tbuf_value(&b);
        return true;
    }
#undef IS
#undef A
    return mxl_tpl_terr(c, TE_OTHER, "unknown str method '%s'", m) == 0;
}

bool mxl_tpl_tmethod_call(tctx *c, tv self, const char *name, tv *args, size_t nargs, const char **kwn,
                  tv *kwv, size_t nkw, tv *out) {
    if (!mxl_tpl_tfuel(c, 1)) return false;
    bool unsafe = false;
    if (!mxl_tpl_tmethod_exists(self, name, strlen(name), &unsafe))
        return mxl_tpl_terr(c, TE_TYPE, "'%s' object has no method '%s'", mxl_tpl_tv_type_name(self), name) == 0;
    if (unsafe)
        return mxl_tpl_terr(c, TE_SECURITY, "access to attribute '%s' of '%s' object is unsafe.", name,
                    mxl_tpl_tv_type_name(self)) == 0;
    if (self.t == TV_STR) return str_method(c, self, name, args, nargs, kwn, kwv, nkw, out);
    if (self.t == TV_DICT) {
        tdict *d = self.u.d;
        if (!strcmp(name, "get")) {
            tv *k = mxl_tpl_targ(args, nargs, kwn, kwv, nkw, 0, NULL);
            if (!k) return mxl_tpl_terr(c, TE_TYPE, "get expected at least 1 argument, got 0") == 0;
            tv *dflt = mxl_tpl_targ(args, nargs, kwn, kwv, nkw, 1, NULL);
            tv *v = mxl_tpl_tdict_get(d, *k);
            *out = v ? *v : dflt ? *dflt : tv_none();
            return true;
        }
        if (!strcmp(name, "copy")) {
            tdict *nd = mxl_tpl_tdict_new(c, d->n);
            if (!nd) return false;
            for (size_t i = 0; i < d->n; i++) {
                nd->keys[i] = d->keys[i];
                nd->vals[i] = d->vals[i];
            }
            nd->n = d->n;
            *out = mxl_tpl_tv_dict(nd);
            return true;
        }
        tlist *l = mxl_tpl_tlist_new(c, d->n);
        if (!l) return false;
        for (size_t i = 0; i < d->n; i++) {
            if (name[0] == 'k') l->items[i] = d->keys[i];
            else if (name[0] == 'v') l->items[i] = d->vals[i];
            else {
                tlist *pair = mxl_tpl_tlist_new(c, 2);
                if (!pair) return false;
                pair->tuple = true;
                pair->items[0] = d->keys[i];
                pair->items[1] = d->vals[i];
                pair->n = 2;
                l->items[i] = mxl_tpl_tv_list(pair);
            }
        }
        l->n = d->n;
        *out = mxl_tpl_tv_list(l);
        return mxl_tpl_tfuel(c, d->n / 4);
    }
    if (self.t == TV_LIST) {
        tlist *l = self.u.l;
        if (!strcmp(name, "copy")) {
            tlist *nl = mxl_tpl_tlist_new(c, l->n);
            if (!nl) return false;
            if (l->n) memcpy(nl->items, l->items, l->n * sizeof(tv));
            nl->n = l->n;
            *out = mxl_tpl_tv_list(nl);
            return true;
        }
        tv *x = mxl_tpl_targ(args, nargs, kwn, kwv, nkw, 0, NULL);
        if (!x) return mxl_tpl_terr(c, TE_TYPE, "%s() takes exactly one argument (0 given)", name) == 0;
        int64_t cnt = 0;
        for (size_t i = 0; i < l->n; i++) {
            if (mxl_tpl_tv_equal(l->items[i], *x)) {
                if (name[0] == 'i') {
                    *out = tv_int((int64_t)i);
                    return true;
                }
                cnt++;
            }
        }
        if (name[0] == 'i') return mxl_tpl_terr(c, TE_VALUE, "value is not in list") == 0;
        *out = tv_int(cnt);
        return true;
    }
    return mxl_tpl_terr(c, TE_TYPE, "no method '%s'", name) == 0;
}
