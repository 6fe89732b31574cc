/* sampler.h - next-token selection from logits: llama-server's sampler chain (llama.cpp
 * common/sampling.cpp, default order), semantics of llama.cpp's src/llama-sampler.cpp:
 *
 *   logit bias -> repetition/presence/frequency penalties -> DRY -> top-n-sigma -> top-k ->
 *   typical-p -> top-p -> min-p -> XTC -> temperature (dynamic temperature when
 *   dynatemp_range > 0) -> p-less (mlxcel, spec's --p-less) -> the pick
 *
 * A grammar (params.grammar, engine/grammar.h) constrains the pick as llama-server's grammar
 * sampler does: the drawn token is checked against it, and only when it does not fit is the
 * whole vocabulary masked and the chain run again (mxl_sampler_pick).
 *
 * With mirostat 1 or 2 the chain is, as in llama.cpp: logit bias -> temperature -> mirostat (v1
 * with m = 100); penalties, DRY and the truncation samplers are not applied.
 *
 * temperature <= 0 (and no dynamic temperature) is greedy: the pick is the argmax after the stages
 * that can change it. The history (prompt + generated ids, as llama-server feeds its sampler) is
 * passed on every call and only read; the sampler keeps no token history of its own. The random
 * state (xoshiro256**, seeded from `seed`) makes a run reproducible for a given seed, and
 * mirostat's mu is the only other state carried across calls.
 *
 * All buffers are allocated at creation (n_vocab-sized) and sampling does not allocate, except
 * DRY over a window longer than 4096 tokens (dry_penalty_last_n = -1, or above 65536), whose
 * per-position buffer grows with the history unless mxl_sampler_reserve() sized it first. */
#ifndef MXL_ENGINE_SAMPLER_H
#define MXL_ENGINE_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "engine/grammar.h"

/* One logit-bias entry: logit[token] += bias (bias = -INFINITY bans the token). Several entries
 * for one token add up. */
typedef struct mxl_logit_bias {
    int32_t token;
    float bias;
} mxl_logit_bias;

/* A token sequence (DRY sequence breaker: head id then tail ids). */
typedef struct mxl_token_seq {
    const int32_t *ids;
    size_t n;
} mxl_token_seq;

/* DRY sequence breakers processed for one vocabulary: (head token, tail token sequence) pairs, as
 * llama.cpp's get_overlapping_token_sequences makes them from strings. Immutable once built; a
 * server can build it once per breaker list and share it between samplers. */
typedef struct mxl_dry_breakers mxl_dry_breakers;

/* Tokenizer hooks the DRY string breakers need (the sampler does not depend on the tokenizer
 * module; engine/sampler_tok.h adapts an mxl_tokenizer). */
typedef struct mxl_sampler_vocab {
    void *ctx;
    /* The text of token `id` on its own with special tokens rendered (llama.cpp's
     * vocab.detokenize({id}, true)). *text stays valid until the next call. */
    mxl_status (*token_text)(void *ctx, int32_t id, const char **text, size_t *len, mxl_error *err);
    /* Tokenizes text without BOS/EOS and without parsing special tokens (llama.cpp's
     * vocab.tokenize(text, false, false)); writes at most cap ids to out, the full count to *n. */
    mxl_status (*tokenize)(void *ctx, const char *text, size_t len, int32_t *out, size_t cap,
                           size_t *n, mxl_error *err);
} mxl_sampler_vocab;

/* The spec's default breakers: "\n", ":", "\"", "*". */
extern const char *const mxl_sampler_default_dry_breakers[4];

typedef struct mxl_sampler_params {
    float temp;              /* 0: greedy (default 0) */
    int32_t top_k;           /* 0: off; >= vocab acts like 0 */
    float top_p;             /* 1: off */
    float min_p;             /* 0: off */
    float repeat_penalty;    /* 1: off */
    int32_t repeat_last_n;   /* window of the three penalties: -1 whole history (default), 0 off */
    float presence_penalty;  /* 0: off */
    float frequency_penalty; /* 0: off */
    uint64_t seed;
    float typical_p;         /* locally typical sampling; 1: off (default) */
    float top_n_sigma;       /* keep logits within n std of the max; <= 0: off (default 0) */
    bool p_less;             /* keep p >= sum(p^2) after temperature; skipped when greedy */
    float xtc_probability;   /* chance XTC acts on a step; 0: off (default) */
    float xtc_threshold;     /* default 0.1; > 0.5: off */
    float dynatemp_range;    /* temperature in [temp - range, temp + range] by entropy; 0: off */
    float dynatemp_exponent; /* default 1 */
    int32_t mirostat;        /* 0 off (default), 1 Mirostat, 2 Mirostat 2.0 */
    float mirostat_tau;      /* target entropy, --mirostat-ent, default 5 */
    float mirostat_eta;      /* learning rate, --mirostat-lr, default 0.1 */
    float dry_multiplier;    /* 0: off (default); >= 0 */
    float dry_base;          /* default 1.75; < 1: off */
    int32_t dry_allowed_length;  /* default 2 */
    int32_t dry_penalty_last_n;  /* -1 whole history (default), 0 off */
    /* DRY sequence breakers. When dry_breakers_built is set it is used as is; otherwise the
     * strings (default: mxl_sampler_default_dry_breakers; n_dry_breakers = 0 for none) are
     * processed against the vocabulary at creation, which needs mxl_sampler_create_with_vocab. */
    const char *const *dry_breakers;
    size_t n_dry_breakers;
    const mxl_dry_breakers *dry_breakers_built;
    /* logit bias entries (copied at creation) */
    const mxl_logit_bias *logit_bias;
    size_t n_logit_bias;
    /* Constrained output (engine/grammar.h): GBNF text the generated text must follow (NULL or
     * "": none), compiled at creation (a bad grammar is refused with the parser's message). It
     * reads the vocabulary's token texts from grammar_vocab (required with a grammar; it must
     * outlive the sampler). Applied as llama-server does: the chain runs without it, the drawn
     * token is checked, and only when the grammar rejects it is the whole vocabulary masked
     * (rejected tokens -inf, end-of-generation ids unless the grammar can end) and the chain run
     * again; the committed token then advances the grammar. */
    const char *grammar;
    const mxl_grammar_vocab *grammar_vocab;
} mxl_sampler_params;

/* The spec's defaults for `generate`: everything off, greedy, DRY base 1.75 / allowed length 2 /
 * windows -1, XTC threshold 0.1, dynatemp exponent 1, mirostat tau 5 / eta 0.1, seed 0. */
void mxl_sampler_params_default(mxl_sampler_params *p);

/* One candidate of the final distribution. */
typedef struct mxl_sampler_cand {
    int32_t id;
    float logit; /* after every stage (tempered) */
    float p;     /* probability the pick draws with */
} mxl_sampler_cand;

typedef struct mxl_sampler mxl_sampler;

/* Validates the parameters (errors name the parameter). DRY with string breakers needs the vocab
 * (mxl_sampler_create refuses it with a message saying so). */
mxl_status mxl_sampler_create(const mxl_sampler_params *p, int32_t n_vocab, mxl_sampler **out,
                              mxl_error *err);
mxl_status mxl_sampler_create_with_vocab(const mxl_sampler_params *p, int32_t n_vocab,
                                         const mxl_sampler_vocab *vocab, mxl_sampler **out,
                                         mxl_error *err);
void mxl_sampler_destroy(mxl_sampler *s);
/* Back to the creation state: RNG re-seeded, mirostat mu = 2 * tau, grammar at its start. */
void mxl_sampler_reset(mxl_sampler *s);
/* Sizes the DRY buffers for histories up to n tokens, so sampling never allocates. */
mxl_status mxl_sampler_reserve(mxl_sampler *s, size_t n_history, mxl_error *err);

/* NaN / +Inf detection: MXL_OK when every logit is finite or -inf and at least one is finite;
 * otherwise an error naming the first bad token (or saying all are -inf). */
mxl_status mxl_sampler_check_logits(const float *logits, int32_t n_vocab, mxl_error *err);

/* Runs the chain up to the pick (with a grammar: the whole vocabulary masked by it first, so the
 * set only holds tokens it allows): checks the logits (mxl_sampler_check_logits), applies logit
 * bias, penalties and DRY to `logits` [n_vocab] in place, then the truncation stages and the
 * temperature, and returns the final candidate set (*cands, *n_cands): the tokens the pick draws
 * from, with finite logits and probabilities summing to 1 (a far tail may underflow to p = 0 and
 * is then never drawn), in no particular order; valid until the next call on s. history
 * [n_history] is read only. A refused step (bad logits, every token banned) leaves nothing to
 * draw or commit. */
mxl_status mxl_sampler_candidates(mxl_sampler *s, float *logits, const int32_t *history,
                                  size_t n_history, const mxl_sampler_cand **cands,
                                  size_t *n_cands, mxl_error *err);
/* Draws from the last candidate set and commits the draw (advancing the grammar); -1 when there
 * is none pending. */
int32_t mxl_sampler_draw(mxl_sampler *s);
/* Commits an id chosen elsewhere from the last candidate set (speculative verification, replay):
 * updates mirostat's mu from its probability. MXL_ERR_ARG when none is pending or id is not in it. */
mxl_status mxl_sampler_commit(mxl_sampler *s, int32_t id, mxl_error *err);
/* The candidate set the last draw or commit took its token from (probabilities after every
 * stage), valid until the next candidates / pick call on s; NULL with *n = 0 before any. */
const mxl_sampler_cand *mxl_sampler_last(const mxl_sampler *s, size_t *n);
/* mxl_sampler_candidates + mxl_sampler_draw; with a grammar, llama-server's order: the chain
 * without it first, the full mask only when the drawn token does not fit. */
mxl_status mxl_sampler_pick(mxl_sampler *s, float *logits, const int32_t *history, size_t n_history,
                            int32_t *id, mxl_error *err);

/* Older entry point: mxl_sampler_pick without the report; when the logits are unusable it falls
 * back to their argmax (callers check the logits themselves). */
int32_t mxl_sampler_sample(mxl_sampler *s, float *logits, const int32_t *history, size_t n_history);

/* Parses llama-server's --logit-bias form TOKEN_ID(+/-)BIAS ("15043+1", "15043-inf" bans); the
 * token's range is checked when the sampler is created. */
mxl_status mxl_logit_bias_parse(const char *text, mxl_logit_bias *out, mxl_error *err);

/* DRY breakers from strings, processed like llama.cpp's llama_sampler_init_dry (each string cut
 * to 40 bytes, tails to 20 tokens; empty strings skipped). */
mxl_status mxl_dry_breakers_from_strings(const char *const *strs, size_t n, int32_t n_vocab,
                                         const mxl_sampler_vocab *vocab, mxl_dry_breakers **out,
                                         mxl_error *err);
/* DRY breakers from token sequences (first id = head, the rest = tail), as llama.cpp's
 * llama_sampler_init_dry_testing; empty sequences are skipped. */
mxl_status mxl_dry_breakers_from_seqs(const mxl_token_seq *seqs, size_t n, mxl_dry_breakers **out,
                                      mxl_error *err);
void mxl_dry_breakers_destroy(mxl_dry_breakers *b);

#endif
