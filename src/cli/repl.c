/* repl.c - the interactive chat REPL of `mlxcel run` (repl.h).
 *
 * One mxl_seq lives for the whole session. Each turn appends the user message to the transcript
 * (a jansson array of {role, content}), renders the whole transcript through the chat template
 * and starts the sequence with cache_prompt on: the KV of the prefix shared with the previous
 * request (the earlier turns) is kept, so only the new tokens are prefilled. After /clear the next
 * turn starts without the cache (a new conversation adopts nothing of the old one), so its
 * tokens are exactly those of a fresh `run -p`.
 *
 * Ctrl-C: a SIGINT handler counts presses; the decode loop polls the count per token (and the
 * prefill per 256-token chunk), drops the exchange and returns to the prompt. A second press
 * while the answer is stopping exits at once. At the prompt a press drops the current line or
 * """ block; a second press in a row at the prompt exits. */
#include "cli/repl.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/strbuf.h"
#include "engine/chat.h"
#include "engine/sequence.h"
#include "tokenizer/tokenizer.h"

/* Prompt tokens one prefill call runs: the decoder's own batch, so chunking changes no numbers. */
#define REPL_CHUNK 256

static volatile sig_atomic_t g_sigint;     /* Ctrl-C presses since the last reset */
static volatile sig_atomic_t g_generating; /* an answer is being prefilled or streamed */

static void on_sigint(int sig) {
    (void)sig;
    if (g_generating && g_sigint >= 1) {
        /* second press while the answer stops: leave now (only async-signal-safe calls) */
        if (write(STDERR_FILENO, "\n", 1) < 0) _exit(130);
        _exit(130);
    }
    g_sigint = g_sigint + 1;
}

/* One line without its line ending. Returns MXL_REPL_TEXT, EOF or INTERRUPTED. */
static mxl_repl_input read_line(FILE *in, volatile sig_atomic_t *interrupted, char **line, size_t *cap, size_t *len) {
    errno = 0;
    ssize_t n = getline(line, cap, in);
    if (n < 0) {
        bool intr = errno == EINTR || (interrupted && *interrupted);
        clearerr(in);
        if (errno == ENOMEM) return MXL_REPL_NOMEM;
        return intr ? MXL_REPL_INTERRUPTED : MXL_REPL_EOF;
    }
    size_t k = (size_t)n;
    while (k && ((*line)[k - 1] == '\n' || (*line)[k - 1] == '\r')) k--;
    (*line)[k] = '\0';
    *len = k;
    return MXL_REPL_TEXT;
}

static bool ends_with_quotes(const char *s, size_t len) { return len >= 3 && memcmp(s + len - 3, "\"\"\"", 3) == 0; }

static void show_prompt(FILE *out, const char *p) {
    if (!out) return;
    fputs(p, out);
    fflush(out);
}

mxl_repl_input mxl_repl_read_input(FILE *in, FILE *prompt_out, volatile sig_atomic_t *interrupted, char **out) {
    *out = NULL;
    char *line = NULL;
    size_t cap = 0, len = 0;
    show_prompt(prompt_out, ">>> ");
    mxl_repl_input r = read_line(in, interrupted, &line, &cap, &len);
    if (r != MXL_REPL_TEXT) {
        free(line); /* getline's buffer (libc malloc) */
        return r;
    }
    if (strncmp(line, "\"\"\"", 3) != 0) {
        *out = mxl_strndup(line, len); /* the caller mxl_frees it, as the block's joined text */
        free(line);
        return *out ? MXL_REPL_TEXT : MXL_REPL_NOMEM;
    }
    /* a """ block: the lines are the parts of one message, joined with newlines; text after the
     * opening quotes and before the closing ones are parts too when not empty */
    mxl_strbuf msg = {0};
    const char *rest = line + 3;
    size_t rest_len = len - 3;
    bool ok = true, have = false, done = false;
    if (ends_with_quotes(rest, rest_len)) { /* """one line""" */
        ok = mxl_strbuf_append(&msg, rest, rest_len - 3);
        have = done = true;
    } else if (rest_len) {
        ok = mxl_strbuf_append(&msg, rest, rest_len);
        have = true;
    }
    while (ok && !done) {
        show_prompt(prompt_out, "... ");
        r = read_line(in, interrupted, &line, &cap, &len);
        if (r != MXL_REPL_TEXT) {
            free(line); /* getline's buffer (libc malloc) */
            mxl_strbuf_free(&msg);
            return r; /* EOF inside a block drops it, as Ctrl-C does */
        }
        size_t take = len;
        if (ends_with_quotes(line, len)) {
            take = len - 3;
            done = true;
            if (!take) break;
        }
        if (have) ok = mxl_strbuf_append(&msg, "\n", 1);
        if (ok) ok = mxl_strbuf_append(&msg, line, take);
        have = true;
    }
    free(line); /* getline's buffer (libc malloc) */
    if (!ok) {
        mxl_strbuf_free(&msg);
        return MXL_REPL_NOMEM;
    }
    if (!msg.p && !(msg.p = mxl_calloc(1, 1))) return MXL_REPL_NOMEM;
    *out = msg.p;
    return MXL_REPL_TEXT;
}

typedef struct repl {
    mxl_gen_model *m;
    const mxl_gen_request *req;
    bool profile, tty;
    mxl_seq *seq;
    json_t *conv;   /* the transcript: [{role, content}] */
    bool fresh;     /* the next turn must not adopt the sequence's cache (start, after /clear) */
    mxl_strbuf answer; /* the text streamed this turn */
    /* images of the conversation in order (the transcript is re-rendered every turn, so each
     * image's rows from the tower are kept), the last n_pending of them attached to the next
     * message */
    mxl_vlm_input img[MXL_GEN_MAX_IMAGES];
    float *rows[MXL_GEN_MAX_IMAGES];
    int n_img, n_pending;
} repl;

static void drop_images(repl *r, int from) {
    for (int i = from; i < r->n_img; i++) {
        mxl_vlm_input_free(&r->img[i]);
        mxl_free(r->rows[i]);
        r->rows[i] = NULL;
    }
    r->n_img = from;
    if (r->n_pending > r->n_img) r->n_pending = r->n_img;
}

/* /image PATH (and --image): decoded and prepared now, attached to the next message. */
static void attach_image(repl *r, const char *path) {
    mxl_error err;
    if (!r->req->chat) {
        fprintf(stderr, "error: /image needs the chat template (raw --no-chat-template turns carry no media)\n");
        return;
    }
    if (!*path) {
        fprintf(stderr, "error: /image needs a file path\n");
        return;
    }
    if (r->n_img >= MXL_GEN_MAX_IMAGES) {
        fprintf(stderr, "error: the conversation already holds %d images, the most one request takes (/clear starts over)\n", r->n_img);
        return;
    }
    if (mxl_gen_image_load(r->m, path, &r->img[r->n_img], &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        return;
    }
    r->n_img++;
    r->n_pending++;
    if (r->tty) fprintf(stderr, "Attached %s to the next message.\n", path);
}

typedef enum turn_result { TURN_OK = 0, TURN_FAILED, TURN_CANCELLED } turn_result;

static void print_help(void) {
    printf("Available commands:\n"
           "  /bye            Exit\n"
           "  /clear          Start a new conversation (forget the transcript)\n"
           "  /image <path>   Attach an image to the next message (vision models)\n"
           "  /?, /help       Show this list\n"
           "  \"\"\" ... \"\"\"     Send a multi-line block as one message\n"
           "Ctrl-C stops the answer being streamed (the exchange is dropped); Ctrl-D exits.\n");
    fflush(stdout);
}

static void print_stats(const repl *r, int64_t n_prompt, int64_t n_cached, int64_t n_gen, double prefill_ms,
                        double decode_ms, const char *finish) {
    double dec_s = decode_ms / 1e3;
    int64_t n_new = n_prompt - n_cached;
    double pf_rate = prefill_ms > 0 ? (double)n_new * 1e3 / prefill_ms : 0.0;
    if (r->profile) {
        fprintf(stderr, "[Profile Results]\nPrompt tokens: %lld (%lld cached)\nGenerated tokens: %lld\n",
                (long long)n_prompt, (long long)n_cached, (long long)n_gen);
        fprintf(stderr, "Prefill: %.1f ms (%.1f tok/s)\n", prefill_ms, pf_rate);
        fprintf(stderr, "Decode: %.1f ms (%.1f tok/s)\n", decode_ms, dec_s > 0 ? (double)n_gen / dec_s : 0.0);
    } else {
        fprintf(stderr, "[Generated %lld tokens in %.2f s (%.1f tok/s); prompt %lld tokens (%lld cached), prefill %.1f tok/s; finish: %s]\n",
                (long long)n_gen, dec_s, dec_s > 0 ? (double)n_gen / dec_s : 0.0, (long long)n_prompt,
                (long long)n_cached, pf_rate, finish);
    }
}

/* Appends {role, content} to the transcript. */
static mxl_status append_msg(json_t *conv, const char *role, const char *text, size_t len, mxl_error *err) {
    json_t *content = json_stringn(text, len);
    if (!content) return mxl_error_set(err, MXL_ERR_ARG, "the %s message is not valid UTF-8", role);
    json_t *o = json_object();
    if (!o) {
        json_decref(content);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    if (json_object_set_new(o, "role", json_string(role)) || json_object_set_new(o, "content", content) ||
        json_array_append_new(conv, o))
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    return MXL_OK;
}

/* The prompt ids of this turn: the transcript rendered (chat; with images, each marker expanded
 * into its image's placeholders), or the message itself (raw). */
static mxl_status turn_prompt(repl *r, const char *msg, mxl_token_ids *ids, mxl_error *err) {
    if (!r->req->chat) return mxl_chat_tokenize_raw(r->m, msg, strlen(msg), ids, err);
    mxl_chat_opts o = {.add_generation_prompt = true};
    char *text = NULL;
    size_t len = 0;
    mxl_status st = mxl_chat_render(r->m, r->conv, &o, &text, &len, err);
    if (st) return st;
    if (r->n_img) {
        char *x = NULL;
        size_t xl = 0;
        st = mxl_vlm_expand_prompt(mxl_gen_model_vlm(r->m), text, len, r->img, r->n_img, &x, &xl, err);
        mxl_free(text);
        if (st) return st;
        text = x, len = xl;
    }
    st = mxl_chat_tokenize_rendered(r->m, text, len, ids, err);
    mxl_free(text);
    return st;
}

/* The user message with the pending images before its text, as chat clients send it. */
static mxl_status append_user(repl *r, const char *msg, mxl_error *err) {
    if (!r->n_pending) return append_msg(r->conv, "user", msg, strlen(msg), err);
    json_t *parts = json_array(), *text = json_string(msg);
    if (!text) {
        json_decref(parts);
        return mxl_error_set(err, MXL_ERR_ARG, "the user message is not valid UTF-8");
    }
    for (int i = 0; i < r->n_pending; i++) json_array_append_new(parts, json_pack("{s:s}", "type", "image"));
    json_array_append_new(parts, json_pack("{s:s, s:o}", "type", "text", "text", text));
    json_t *o = json_pack("{s:s, s:o}", "role", "user", "content", parts);
    if (!o || json_array_append_new(r->conv, o)) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    return MXL_OK;
}

static turn_result run_turn(repl *r, const char *msg, mxl_error *err) {
    const mxl_gen_request *req = r->req;
    if (req->chat) {
        if (append_user(r, msg, err)) return TURN_FAILED;
    }
    mxl_token_ids ids = {0};
    mxl_decoder_media media[MXL_DECODER_MAX_MEDIA];
    int n_media = 0;
    turn_result res = TURN_OK;
    mxl_seq_params p = {.sampling = req->sampling, .max_tokens = req->max_tokens, .ignore_eos = req->ignore_eos, .lora = req->lora,
                        .n_lora = req->n_lora};
    for (int i = 0; i < req->n_stop && i < MXL_SEQ_MAX_STOP; i++) p.stop[p.n_stop++] = req->stop[i];
    p.cache_prompt = !r->fresh;
    mxl_strbuf_clear(&r->answer);
    g_sigint = 0;
    g_generating = 1;
    mxl_status st = turn_prompt(r, msg, &ids, err);
    if (!st && r->n_img && !(st = mxl_gen_image_media(r->m, &ids, r->img, r->rows, r->n_img, media, &n_media, err))) {
        p.media = media;
        p.n_media = n_media;
    }
    if (!st) st = mxl_seq_start(r->seq, ids.ids, ids.n, &p, err);
    if (st) {
        res = TURN_FAILED;
        goto out;
    }
    r->fresh = false; /* the sequence now holds this conversation's tokens */
    double t0 = mxl_now_ms();
    while (mxl_seq_prefill_left(r->seq) > 0 && !g_sigint)
        if ((st = mxl_seq_prefill(r->seq, REPL_CHUNK, err))) {
            res = TURN_FAILED;
            goto out;
        }
    double t1 = mxl_now_ms();
    const char *finish = "length";
    while (!g_sigint) {
        mxl_seq_event ev;
        if ((st = mxl_seq_sample(r->seq, &ev, err))) {
            res = TURN_FAILED;
            break;
        }
        if (ev.text_len) {
            fwrite(ev.text, 1, ev.text_len, stdout);
            fflush(stdout);
            if (!mxl_strbuf_append(&r->answer, ev.text, ev.text_len)) {
                mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
                res = TURN_FAILED;
                break;
            }
        }
        if (ev.finished) {
            finish = ev.finish_reason;
            break;
        }
        if ((st = mxl_seq_feed(r->seq, err))) {
            res = TURN_FAILED;
            break;
        }
    }
    if (res == TURN_OK && g_sigint) res = TURN_CANCELLED;
    if (res != TURN_FAILED || r->answer.n) {
        printf("\n");
        fflush(stdout);
    }
    if (res == TURN_OK) {
        r->n_pending = 0; /* the images now belong to the transcript */
        print_stats(r, mxl_seq_n_prompt(r->seq), mxl_seq_n_cached(r->seq), mxl_seq_n_generated(r->seq), t1 - t0,
                    mxl_now_ms() - t1, finish);
        if (req->chat) {
            if (append_msg(r->conv, "assistant", r->answer.p ? r->answer.p : "", r->answer.n, err)) res = TURN_FAILED;
        }
    }
out:
    g_generating = 0;
    g_sigint = 0;
    mxl_token_ids_free(&ids);
    /* a failed or cancelled exchange leaves the transcript as it was before the turn */
    if (res != TURN_OK && req->chat) {
        size_t n = json_array_size(r->conv);
        if (n && strcmp(json_string_value(json_object_get(json_array_get(r->conv, n - 1), "role")), "user") == 0)
            json_array_remove(r->conv, n - 1);
    }
    return res;
}

/* Handles a /command line. Returns false when the REPL should exit. */
static bool run_command(repl *r, const char *line) {
    const char *arg = line + strcspn(line, " \t");
    size_t name_len = (size_t)(arg - line);
    while (*arg == ' ' || *arg == '\t') arg++;
#define IS(s) (name_len == strlen(s) && memcmp(line, s, name_len) == 0)
    if (IS("/bye") || IS("/exit")) return false;
    if (IS("/clear")) {
        json_array_clear(r->conv);
        drop_images(r, 0);
        r->fresh = true;
        if (r->tty) fprintf(stderr, "Cleared the conversation.\n");
    } else if (IS("/?") || IS("/help")) {
        print_help();
    } else if (IS("/image")) {
        attach_image(r, arg);
    } else {
        fprintf(stderr, "Unknown command '%.*s'. Type /? for help\n", (int)(name_len > 64 ? 64 : name_len), line);
    }
#undef IS
    return true;
}

int mxl_repl_run(mxl_gen_model *m, const mxl_gen_request *req, bool profile) {
    repl r = {.m = m, .req = req, .profile = profile, .fresh = true};
    r.tty = isatty(STDIN_FILENO) != 0;
    mxl_error err;
    int64_t ctx_len = req->max_context > 0 ? req->max_context : mxl_gen_model_default_ctx(m);
    if (mxl_seq_create(m, ctx_len, REPL_CHUNK, &r.seq, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    if (!(r.conv = json_array())) {
        mxl_seq_destroy(r.seq);
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    /* no SA_RESTART: a Ctrl-C at the prompt interrupts the blocking read */
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    if (r.tty) fprintf(stderr, "Type a message; /? for help, /bye or Ctrl-D to exit.\n");
    /* --image: attached to the first message (raw turns carry no media: ignored, with a notice) */
    if (req->n_images && !req->chat) fprintf(stderr, "notice: --image is ignored with --no-chat-template (raw turns carry no media)\n");
    for (int i = 0; req->chat && i < req->n_images; i++) attach_image(&r, req->images[i]);

    int rc = 0;
    bool last_was_interrupt = false;
    for (;;) {
        char *line = NULL;
        g_sigint = 0;
        mxl_repl_input in = mxl_repl_read_input(stdin, r.tty ? stdout : NULL, &g_sigint, &line);
        if (in == MXL_REPL_EOF) {
            if (r.tty) printf("\n");
            break;
        }
        if (in == MXL_REPL_NOMEM) {
            fprintf(stderr, "error: out of memory reading the input\n");
            rc = 1;
            break;
        }
        if (in == MXL_REPL_INTERRUPTED) {
            printf("\n");
            fflush(stdout);
            if (last_was_interrupt) break;
            last_was_interrupt = true;
            fprintf(stderr, "(Ctrl-C again, Ctrl-D or /bye to exit)\n");
            continue;
        }
        last_was_interrupt = false;
        size_t len = strlen(line);
        bool blank = strspn(line, " \t") == len;
        if (blank) {
            mxl_free(line);
            continue;
        }
        if (line[0] == '/') {
            bool go_on = run_command(&r, line);
            mxl_free(line);
            if (!go_on) break;
            continue;
        }
        turn_result tr = run_turn(&r, line, &err);
        mxl_free(line);
        if (tr == TURN_FAILED) {
            fprintf(stderr, "error: %s\n", err.msg);
            if (!r.tty) rc = 1;
        }
    }
    sigaction(SIGINT, &old, NULL);
    fflush(stdout);
    mxl_strbuf_free(&r.answer);
    drop_images(&r, 0);
    json_decref(r.conv);
    mxl_seq_destroy(r.seq);
    return rc;
}
