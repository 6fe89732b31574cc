/* grammar_internal.h - the compiled form of a GBNF grammar shared by grammar_parse.c (which builds
 * it) and grammar.c (which matches against it). Same element model as llama.cpp's
 * llama_grammar_element: every rule is a run of elements, its alternatives separated by ALT and
 * the rule closed by END. A character set is one CHAR or CHAR_NOT element followed by CHAR_ALT
 * elements (more characters) and CHAR_RNG_UPPER elements (the upper end of a range whose lower
 * end is the element before). */
#ifndef MXL_ENGINE_GRAMMAR_INTERNAL_H
#define MXL_ENGINE_GRAMMAR_INTERNAL_H

#include "engine/grammar.h"

typedef enum gr_type {
    GR_END = 0,      /* end of the rule */
    GR_ALT,          /* start of another alternative */
    GR_REF,          /* non-terminal: value = rule id */
    GR_CHAR,         /* terminal: value = code point (starts a positive set) */
    GR_CHAR_NOT,     /* terminal: starts a negated set [^...] */
    GR_CHAR_RNG_UPPER, /* value = inclusive upper end of a range */
    GR_CHAR_ALT,     /* value = another code point of the set */
    GR_CHAR_ANY,     /* `.`: any code point */
} gr_type;

typedef struct gr_elem {
    uint32_t type;
    uint32_t value;
} gr_elem;

struct mxl_grammar {
    gr_elem *el;          /* every rule's elements back to back */
    size_t n_el;
    uint32_t *rule_start; /* [n_rules] index of each rule's first element */
    size_t n_rules;
    uint32_t root;        /* rule id of `root` */
};

static inline bool gr_is_end_of_seq(const gr_elem *e) { return e->type == GR_END || e->type == GR_ALT; }

#endif
