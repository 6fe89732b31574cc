/* speculate.h - the drafts of speculative decoding: prompt lookup (n-gram matches in the
 * sequence's own tokens) and a draft model (a small checkpoint sharing the target's vocabulary,
 * run greedily on its own KV cache). A drafter proposes tokens to follow a sequence's tokens;
 * the target verifies them in one pass (sequence.h mxl_seq_verify), which keeps the output the
 * target's own, so a drafter only decides the speed. Both adapt how many tokens they propose to
 * how many were accepted lately, so text that does not repeat itself runs close to plain decoding.
 *
 * Round of a generation loop:
 *   n = mxl_drafter_propose(d, ids, n_ids, max, draft)   (ids: the sequence's tokens, the last one
 *                                                        the picked token waiting to run)
 *   mxl_seq_verify(seq, draft, n, ...) -> accepted
 *   mxl_drafter_observe(d, n, accepted) */
#ifndef MXL_ENGINE_SPECULATE_H
#define MXL_ENGINE_SPECULATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "engine/model.h"

typedef enum mxl_draft_kind {
    MXL_DRAFT_NONE = 0,
    MXL_DRAFT_PROMPT_LOOKUP, /* n-gram matches in the context */
    MXL_DRAFT_FULL_MODEL,    /* a small causal LM on its own KV cache */
} mxl_draft_kind;

/* How many tokens to propose each round. */
typedef enum mxl_draft_policy {
    MXL_DRAFT_POLICY_AUTO = 0, /* graded on the CPU */
    MXL_DRAFT_POLICY_GRADED,   /* the block follows the recent acceptance; after misses in a row
                                  proposals pause for a few rounds, longer each time */
    MXL_DRAFT_POLICY_GATED,    /* a narrow or the full block; after misses proposals stop until a
                                  lookup made without verifying would have been right */
} mxl_draft_policy;

typedef struct mxl_draft_opts {
    mxl_draft_kind kind;
    int ngram_min, ngram_max; /* prompt lookup: suffix n-grams tried, longest first (2, 3) */
    int max_draft;            /* tokens proposed at most per round (prompt lookup 7, model 4) */
    bool no_adaptive;         /* always propose max_draft (A/B measurement) */
    mxl_draft_policy policy;
    const mxl_gen_model *model; /* MXL_DRAFT_FULL_MODEL: the draft (mxl_drafter_check_model first) */
} mxl_draft_opts;

/* Defaults of the spec: n-grams 2..3, 7 tokens (prompt lookup) or 4 (draft model), graded. */
void mxl_draft_opts_default(mxl_draft_opts *o, mxl_draft_kind kind);
/* The kinds by the spec's names: "prompt-lookup", "full-model" ("dflash" and "mtp" are refused
 * by name: no family of this build ships such heads). */
mxl_status mxl_draft_kind_parse(const char *s, mxl_draft_kind *out, mxl_error *err);
mxl_status mxl_draft_policy_parse(const char *s, mxl_draft_policy *out, mxl_error *err);
/* A draft model for target: the same tokenizer for every id the draft can produce (ids past the
 * target's vocabulary, another token text at an id, or other special tokens are refused, naming
 * the first difference), no recurrent layers. */
mxl_status mxl_drafter_check_model(const mxl_gen_model *target, const mxl_gen_model *draft, mxl_error *err);

typedef struct mxl_drafter mxl_drafter;
/* ctx_len: the longest sequence the drafter will see; pool: the threads the draft model runs on
 * (the target's, so the two never compete for cores; NULL: the draft model's own). */
mxl_status mxl_drafter_create(const mxl_draft_opts *o, int64_t ctx_len, struct mxl_threadpool *pool, mxl_drafter **out,
                              mxl_error *err);
void mxl_drafter_destroy(mxl_drafter *d);
/* A new request: the block policy starts over (a draft model's cache is kept: the next request's
 * tokens reuse the prefix they share with it). */
void mxl_drafter_reset(mxl_drafter *d);
/* Up to max (and the drafter's own block) tokens likely to follow ids[0..n) to draft; 0: none
 * this round (decode plainly). */
mxl_status mxl_drafter_propose(mxl_drafter *d, const int32_t *ids, size_t n, int max, int32_t *draft, int *n_draft,
                               mxl_error *err);
/* After the verification: proposed tokens, of which accepted were kept. */
void mxl_drafter_observe(mxl_drafter *d, int proposed, int accepted);

typedef struct mxl_draft_stats {
    int64_t rounds;   /* verification passes that carried a draft */
    int64_t drafted;  /* tokens proposed */
    int64_t accepted; /* of them kept */
} mxl_draft_stats;
void mxl_drafter_stats(const mxl_drafter *d, mxl_draft_stats *out);

/* The n-gram lookup alone: the tokens that followed an earlier occurrence of the longest suffix
 * of ids (ngram_max down to ngram_min tokens) that occurred before - of several, the one whose
 * preceding tokens agree longest with the suffix's (up to 32; the latest among equals) - at most
 * max of them; returns how many (0: no match). */
int mxl_prompt_lookup(const int32_t *ids, size_t n, int ngram_min, int ngram_max, int max, int32_t *out);

#endif
