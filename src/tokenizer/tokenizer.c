/* tokenizer.c - the encode/decode pipeline and accessors of mxl_tokenizer (see tok_internal.h
 * for the stages). Loading lives in loader_json.c / gguf_vocab.c / tok_config.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/tok_internal.h"

mxl_tokenizer *tok_alloc(const char *name) {
    mxl_tokenizer *t = mxl_calloc(1, sizeof(*t));
    if (!t) return NULL;
    snprintf(t->name, sizeof(t->name), "%s", name ? name : "tokenizer");
    t->model.unk_id = -1;
    for (int i = 0; i < 256; i++) t->model.byte_ids[i] = -1;
    t->bos_id = t->eos_id = t->pad_id = t->unk_id = t->sep_id = t->cls_id = t->mask_id = -1;
    for (int i = 0; i < 6; i++) t->fim_meta[i] = -1;
    return t;
}

void mxl_tokenizer_destroy(mxl_tokenizer *t) {
    if (!t) return;
    tok_map_free(&t->vocab);
    tok_map_free(&t->added_map);
    mxl_free(t->id_ent);
    mxl_free(t->id_attr);
    tok_pairmap_free(&t->model.merges);
    mxl_free(t->model.cont_prefix);
    mxl_free(t->model.eow_suffix);
    mxl_free(t->model.scores);
    mxl_free(t->model.bmp_ids);
    mxl_free(t->model.uscores);
    tok_normalizer_free(t->norm);
    tok_pretok_free(t->pre);
    tok_post_free(t->post);
    tok_decoder_free(t->dec);
    for (size_t i = 0; i < t->n_added; i++) {
        mxl_free(t->added[i].content);
        mxl_free(t->added[i].norm_content);
    }
    mxl_free(t->added);
    for (int k = 0; k < 2; k++) {
        mxl_free(t->added_order[k]);
        mxl_free(t->added_lens[k]);
        tok_map_free(&t->added_lookup[k]);
    }
    mxl_free(t->gguf_special);
    mxl_free(t->eos_ids);
    mxl_free(t->chat_template);
    mxl_free(t);
}

static bool grow_ids(mxl_tokenizer *t, uint32_t need) {
    if (need <= t->n_ids) return true;
    uint32_t cap = t->n_ids ? t->n_ids : 1024;
    while (cap < need) cap = cap > UINT32_MAX / 2 ? need : cap * 2;
    uint32_t *e = mxl_realloc(t->id_ent, (size_t)cap * sizeof(uint32_t));
    if (!e) return false;
    t->id_ent = e;
    uint8_t *a = mxl_realloc(t->id_attr, cap);
    if (!a) return false;
    t->id_attr = a;
    memset(t->id_ent + t->n_ids, 0, (size_t)(cap - t->n_ids) * sizeof(uint32_t));
    memset(t->id_attr + t->n_ids, 0, cap - t->n_ids);
    t->n_ids = cap;
    return true;
}

bool tok_vocab_set(mxl_tokenizer *t, const char *s, size_t n, int32_t id, bool added) {
    if (id < 0 || id >= (1 << 30)) return false;
    tok_map *m = added ? &t->added_map : &t->vocab;
    bool dup = false;
    size_t before = m->n_ents;
    if (!tok_map_put(m, s, n, id, &dup)) return false;
    /* a repeated string names the last id given (serde / jansson maps, HF Unigram's
     * token_to_ids); the earlier id keeps its string for decoding */
    if (dup && !tok_map_update(m, s, n, id)) return false;
    if (!grow_ids(t, (uint32_t)id + 1)) return false;
    uint32_t ent = 0;
    if (!dup && m->n_ents > before) {
        ent = (uint32_t)m->n_ents;
    } else {
        ent = tok_map_index(m, s, n); /* the existing entry also names this id */
    }
    if (ent) {
        ent |= added ? 0x80000000u : 0;
        /* added tokens name their id for decoding (HF: added vocabulary first) */
        if (added || t->id_ent[id] == 0) t->id_ent[id] = ent;
    }
    return true;
}

const char *tok_id_str(const mxl_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || (uint32_t)id >= t->n_ids || !t->id_ent[id]) return NULL;
    uint32_t e = t->id_ent[id];
    const tok_map *m = (e & 0x80000000u) ? &t->added_map : &t->vocab;
    const tok_map_entry *en = &m->ents[(e & 0x7FFFFFFFu) - 1];
    if (len) *len = en->len;
    return m->pool.p + en->off;
}

/* ---- encode ---- */
static mxl_status encode_hf(const mxl_tokenizer *t, const char *text, size_t len, unsigned flags,
                            mxl_token_ids *ids) {
    tok_pieces a = {0}, b = {0};
    mxl_strbuf nb = {0};
    bool parse = (flags & MXL_TOK_PARSE_SPECIAL) != 0;
    mxl_status st = MXL_ERR_NOMEM;
    if (len && !tok_pieces_add(&a, text, len, -1, true)) goto done;
    /* 1. non-normalized added tokens on the raw text */
    if ((st = tok_added_split(t, false, parse, &a, &b)) != MXL_OK) goto done;
    /* 2. normalize each text piece */
    tok_pieces_reset(&a);
    for (size_t i = 0; i < b.n; i++) {
        const tok_piece *pc = &b.v[i];
        const char *s = b.text.p + pc->off;
        if (pc->token >= 0 || !t->norm) {
            if (!tok_pieces_add(&a, s, pc->len, pc->token, pc->at_start)) goto oom;
            continue;
        }
        if ((st = tok_normalize(t->norm, s, pc->len, &nb)) != MXL_OK) goto done;
        if (nb.n && !tok_pieces_add(&a, nb.p, nb.n, -1, pc->at_start)) goto oom;
    }
    /* 3. normalized added tokens on the normalized pieces */
    if ((st = tok_added_split(t, true, parse, &a, &b)) != MXL_OK) goto done;
    /* 4. pre-tokenize */
    tok_pieces *pieces = &b;
    if (t->pre) {
        if ((st = tok_pretokenize(t->pre, &b, &a)) != MXL_OK) goto done;
        pieces = &a;
    }
    /* 5. model */
    for (size_t i = 0; i < pieces->n; i++) {
        const tok_piece *pc = &pieces->v[i];
        if (pc->token >= 0) {
            if (!tok_ids_push(ids, pc->token)) goto oom;
            continue;
        }
        if ((st = tok_model_tokenize(t, pieces->text.p + pc->off, pc->len, ids)) != MXL_OK) goto done;
    }
    st = MXL_OK;
    goto done;
oom:
    st = MXL_ERR_NOMEM;
done:
    tok_pieces_free(&a);
    tok_pieces_free(&b);
    mxl_strbuf_free(&nb);
    return st;
}

static mxl_status encode_gguf(const mxl_tokenizer *t, const char *text, size_t len, unsigned flags,
                              mxl_token_ids *ids) {
    tok_pieces a = {0}, b = {0}, c = {0};
    mxl_strbuf nb = {0};
    mxl_status st = MXL_ERR_NOMEM;
    if (len && !tok_pieces_add(&a, text, len, -1, true)) goto done;
    if ((st = tok_gguf_partition(t, (flags & MXL_TOK_PARSE_SPECIAL) != 0, &a, &b)) != MXL_OK)
        goto done;
    st = MXL_ERR_NOMEM;
    for (size_t i = 0; i < b.n; i++) {
        const tok_piece *pc = &b.v[i];
        if (pc->token >= 0) {
            if (!tok_ids_push(ids, pc->token)) goto done;
            continue;
        }
        /* SPM: a space prefix on every text fragment (each follows a special token or starts the
         * text); whitespace escaped to U+2581 for SPM and SentencePiece-style BPE */
        nb.n = 0;
        if (t->gguf_add_space_prefix && !mxl_strbuf_putc(&nb, ' ')) goto done;
        if (!mxl_strbuf_append(&nb, b.text.p + pc->off, pc->len)) goto done;
        if (t->gguf_escape_whitespace) {
            mxl_strbuf e = {0};
            for (size_t j = 0; j < nb.n; j++) {
                bool ok = nb.p[j] == ' ' ? mxl_strbuf_append(&e, "\xE2\x96\x81", 3) : mxl_strbuf_putc(&e, nb.p[j]);
                if (!ok) {
                    mxl_strbuf_free(&e);
                    goto done;
                }
            }
            mxl_strbuf_free(&nb);
            nb = e;
        }
        if (t->pre) {
            tok_pieces_reset(&a);
            if (!tok_pieces_add(&a, nb.p ? nb.p : "", nb.n, -1, true)) goto done;
            if ((st = tok_pretokenize(t->pre, &a, &c)) != MXL_OK) goto done;
            st = MXL_ERR_NOMEM;
            for (size_t k = 0; k < c.n; k++) {
                mxl_status s2 = tok_model_tokenize(t, c.text.p + c.v[k].off, c.v[k].len, ids);
                if (s2 != MXL_OK) {
                    st = s2;
                    goto done;
                }
            }
        } else {
            mxl_status s2 = tok_model_tokenize(t, nb.p ? nb.p : "", nb.n, ids);
            if (s2 != MXL_OK) {
                st = s2;
                goto done;
            }
        }
    }
    st = MXL_OK;
done:
    tok_pieces_free(&a);
    tok_pieces_free(&b);
    tok_pieces_free(&c);
    mxl_strbuf_free(&nb);
    return st;
}

mxl_status mxl_tokenizer_encode(const mxl_tokenizer *t, const char *text, size_t len,
                                unsigned flags, mxl_token_ids *out, mxl_error *err) {
    mxl_strbuf clean = {0};
    if (!text) len = 0;
    if (len && !tok_utf8_valid(text, len)) {
        if (!tok_utf8_lossy(text, len, &clean)) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", t->name);
        text = clean.p;
        len = clean.n;
    }
    mxl_token_ids ids = {0};
    mxl_status st;
    if (t->flavor == TOK_FLAVOR_HF) {
        st = encode_hf(t, text, len, flags, &ids);
        if (st == MXL_OK && (flags & MXL_TOK_ADD_SPECIAL) && t->post) st = tok_post_apply(t->post, &ids);
    } else {
        if ((flags & MXL_TOK_ADD_SPECIAL) && t->add_bos && t->bos_id >= 0 && !tok_ids_push(&ids, t->bos_id))
            st = MXL_ERR_NOMEM;
        else
            st = encode_gguf(t, text, len, flags, &ids);
        if (st == MXL_OK && (flags & MXL_TOK_ADD_SPECIAL)) {
            if (t->model.kind == TOK_MODEL_WPM && t->sep_id >= 0 && !tok_ids_push(&ids, t->sep_id)) st = MXL_ERR_NOMEM;
            else if (t->model.kind != TOK_MODEL_WPM && t->add_eos && t->eos_id >= 0 && !tok_ids_push(&ids, t->eos_id))
                st = MXL_ERR_NOMEM;
        }
    }
    mxl_strbuf_free(&clean);
    if (st == MXL_OK && !tok_ids_append(out, ids.ids, ids.n)) st = MXL_ERR_NOMEM;
    mxl_token_ids_free(&ids);
    if (st == MXL_ERR_NOMEM) return mxl_error_set(err, st, "%s: out of memory while encoding", t->name);
    if (st == MXL_ERR_FORMAT)
        return mxl_error_set(err, st, "%s: the model's unknown token is missing from the vocabulary", t->name);
    if (st == MXL_ERR_INTERNAL)
        return mxl_error_set(err, st, "%s: encoding failed: a pre-tokenizer regex hit a PCRE2 matching limit", t->name);
    if (st != MXL_OK) return mxl_error_set(err, st, "%s: encoding failed (%s)", t->name, mxl_status_name(st));
    return MXL_OK;
}

/* ---- decode ---- */
/* llama.cpp token_to_piece(special=true) for GGUF vocabularies. */
static bool gguf_piece(const mxl_tokenizer *t, int32_t id, mxl_strbuf *out) {
    size_t n;
    const char *s = tok_id_str(t, id, &n);
    unsigned a = t->id_attr[id];
    if (a & (MXL_TOKEN_ATTR_SPECIAL | MXL_TOKEN_ATTR_UNKNOWN | MXL_TOKEN_ATTR_USER)) return mxl_strbuf_append(out, s, n);
    if (a & MXL_TOKEN_ATTR_BYTE) {
        int hi = 0;
        for (int k = 3; k < 5 && k < (int)n; k++) {
            char c = s[k];
            int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : 0;
            hi = hi * 16 + v;
        }
        return mxl_strbuf_putc(out, (char)hi);
    }
    if (t->model.kind == TOK_MODEL_BPE && !t->gguf_escape_whitespace) {
        for (size_t j = 0; j < n;) {
            uint32_t cp;
            j += tok_utf8_decode(s + j, n - j, &cp);
            int b = tok_cp_to_byte(cp);
            if (b >= 0) {
                if (!mxl_strbuf_putc(out, (char)b)) return false;
            } else if (!mxl_strbuf_put_cp(out, cp)) {
                return false;
            }
        }
        return true;
    }
    /* SPM / WPM / SentencePiece-style BPE: U+2581 -> space */
    for (size_t j = 0; j < n;) {
        if (n - j >= 3 && memcmp(s + j, "\xE2\x96\x81", 3) == 0) {
            if (!mxl_strbuf_putc(out, ' ')) return false;
            j += 3;
        } else {
            if (!mxl_strbuf_putc(out, s[j])) return false;
            j++;
        }
    }
    return true;
}

mxl_status mxl_tokenizer_decode(const mxl_tokenizer *t, const int32_t *ids, size_t n,
                                bool skip_special, char **out, size_t *out_len, mxl_error *err) {
    return tok_decode(t, ids, n, skip_special, false, out, out_len, err);
}

mxl_status tok_decode(const mxl_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                      bool cont, char **out, size_t *out_len, mxl_error *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= t->n_ids || !t->id_ent[ids[i]])
            return mxl_error_set(err, MXL_ERR_ARG, "%s: token id %d is out of range (vocabulary has %u ids)",
                                 t->name, ids[i], t->n_ids);
    mxl_strbuf text = {0};
    mxl_status st = MXL_OK;
    if (t->flavor == TOK_FLAVOR_GGUF) {
        /* llama.cpp detokenize: concatenated pieces; the SPM leading space of the first piece is
         * removed (add_space_prefix); WPM pieces are joined then the first space dropped */
        mxl_strbuf bytes = {0};
        for (size_t i = 0; i < n && st == MXL_OK; i++) {
            unsigned a = t->id_attr[ids[i]];
            if (skip_special && (a & (MXL_TOKEN_ATTR_SPECIAL | MXL_TOKEN_ATTR_UNKNOWN))) continue;
            size_t mark = bytes.n;
            if (!gguf_piece(t, ids[i], &bytes)) st = MXL_ERR_NOMEM;
            if (!cont && mark == 0 && bytes.n && (t->gguf_add_space_prefix || t->model.kind == TOK_MODEL_WPM) &&
                bytes.p[0] == ' ' && !(a & (MXL_TOKEN_ATTR_SPECIAL | MXL_TOKEN_ATTR_USER))) {
                memmove(bytes.p, bytes.p + 1, bytes.n - 1);
                bytes.n--;
            }
        }
        if (st == MXL_OK && !tok_utf8_lossy(bytes.p ? bytes.p : "", bytes.n, &text)) st = MXL_ERR_NOMEM;
        mxl_strbuf_free(&bytes);
    } else {
        tok_strs toks = {0};
        for (size_t i = 0; i < n && st == MXL_OK; i++) {
            if (skip_special && (t->id_attr[ids[i]] & MXL_TOKEN_ATTR_SPECIAL)) continue;
            size_t l;
            const char *s = tok_id_str(t, ids[i], &l);
            if (!tok_strs_push(&toks, s, l)) st = MXL_ERR_NOMEM;
        }
        if (st == MXL_OK && t->dec) st = tok_decode_chain(t->dec, cont, &toks);
        for (size_t i = 0; i < toks.n && st == MXL_OK; i++) {
            if (!t->dec && (i > 0 || cont) && !mxl_strbuf_putc(&text, ' ')) st = MXL_ERR_NOMEM;
            if (st == MXL_OK && !mxl_strbuf_append(&text, toks.v[i].p ? toks.v[i].p : "", toks.v[i].n)) st = MXL_ERR_NOMEM;
        }
        tok_strs_free(&toks);
    }
    if (st == MXL_OK && !mxl_strbuf_reserve(&text, 0)) st = MXL_ERR_NOMEM;
    if (st == MXL_OK) text.p[text.n] = 0;
    if (st != MXL_OK) {
        mxl_strbuf_free(&text);
        return mxl_error_set(err, st, "%s: decoding failed (%s)", t->name, mxl_status_name(st));
    }
    *out = text.p;
    if (out_len) *out_len = text.n;
    return MXL_OK;
}

/* ---- accessors ---- */
uint32_t mxl_tokenizer_n_vocab(const mxl_tokenizer *t) {
    uint32_t n = t->n_ids;
    while (n > 0 && !t->id_ent[n - 1]) n--;
    return n;
}
const char *mxl_tokenizer_token(const mxl_tokenizer *t, int32_t id, size_t *len) {
    return tok_id_str(t, id, len);
}
int32_t mxl_tokenizer_token_id(const mxl_tokenizer *t, const char *s, size_t len) {
    int32_t id = tok_map_get(&t->added_map, s, len);
    return id >= 0 ? id : tok_map_get(&t->vocab, s, len);
}
unsigned mxl_tokenizer_token_attr(const mxl_tokenizer *t, int32_t id) {
    if (id < 0 || (uint32_t)id >= t->n_ids) return 0;
    return t->id_attr[id];
}
/* llama.cpp's llama_vocab::impl::load: the GGUF keys first, then the token texts it recognises
 * (src/llama-vocab.cpp, "auto-detect special tokens by text"), in its order of names. */
int32_t mxl_tokenizer_fim_id(const mxl_tokenizer *t, int which) {
    static const char *const names[6][9] = {
        [MXL_TOK_FIM_PRE] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>", "\xe2\x96\x81<PRE>",
                             "<|code_prefix|>", "<|prefix|>", NULL},
        [MXL_TOK_FIM_SUF] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>", "<SUF>", "\xe2\x96\x81<SUF>",
                             "<|code_suffix|>", "<|suffix|>", NULL},
        [MXL_TOK_FIM_MID] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>", "\xe2\x96\x81<MID>",
                             "<|code_middle|>", "<|middle|>", NULL},
        [MXL_TOK_FIM_PAD] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL},
        [MXL_TOK_FIM_REP] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL},
        [MXL_TOK_FIM_SEP] = {"<|file_sep|>", NULL},
    };
    if (which < 0 || which >= 6) return -1;
    if (tok_id_str(t, t->fim_meta[which], NULL)) return t->fim_meta[which];
    for (int i = 0; names[which][i]; i++) {
        int32_t id = mxl_tokenizer_token_id(t, names[which][i], strlen(names[which][i]));
        if (id >= 0) return id;
    }
    return -1;
}

int32_t mxl_tokenizer_bos_id(const mxl_tokenizer *t) { return t->bos_id; }
int32_t mxl_tokenizer_eos_id(const mxl_tokenizer *t) { return t->eos_id; }
int32_t mxl_tokenizer_pad_id(const mxl_tokenizer *t) { return t->pad_id; }
int32_t mxl_tokenizer_unk_id(const mxl_tokenizer *t) { return t->unk_id; }
bool mxl_tokenizer_add_bos(const mxl_tokenizer *t) { return t->add_bos; }
bool mxl_tokenizer_add_eos(const mxl_tokenizer *t) { return t->add_eos; }
const int32_t *mxl_tokenizer_eos_ids(const mxl_tokenizer *t, size_t *n) {
    *n = t->n_eos_ids;
    return t->eos_ids;
}
const char *mxl_tokenizer_chat_template(const mxl_tokenizer *t) { return t->chat_template; }
