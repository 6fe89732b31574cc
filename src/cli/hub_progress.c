/* hub_progress.c - stderr progress of a download (see hub_progress.h). */
#include "cli/hub_progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"

void mxl_cli_progress_init(mxl_cli_progress *p, const char *label, bool quiet) {
    memset(p, 0, sizeof *p);
    p->label = label;
    p->quiet = quiet;
    const char *term = getenv("TERM");
    p->tty = isatty(STDERR_FILENO) && !(term && strcmp(term, "dumb") == 0);
    p->t0 = (mxl_now_ms() / 1e3);
}

static void size_text(int64_t b, char *out, size_t cap) {
    if (b < 0) {
        snprintf(out, cap, "?");
        return;
    }
    mxl_store_format_size((uint64_t)b, out, cap);
}

static void clear_block(mxl_cli_progress *p) {
    for (int i = 0; i < p->drawn; i++) fputs("\033[1A\r\033[2K", stderr);
    p->drawn = 0;
}

static void bar(char *out, int width, double frac) {
    if (frac < 0) frac = 0;
    if (frac > 1) frac = 1;
    int full = (int)(frac * width + 0.5);
    for (int i = 0; i < width; i++) out[i] = i < full ? '#' : '-';
    out[width] = '\0';
}

static void draw(mxl_cli_progress *p) {
    clear_block(p);
    char a[32], b[32], br[32];
    for (int i = 0; i < MXL_CLI_PROGRESS_SLOTS; i++) {
        if (!p->slot[i].active) continue;
        size_text(p->slot[i].done, a, sizeof a);
        size_text(p->slot[i].size, b, sizeof b);
        double f = p->slot[i].size > 0 ? (double)p->slot[i].done / (double)p->slot[i].size : 0;
        bar(br, 24, f);
        fprintf(stderr, "  %-40.40s [%s] %3d%% %10s / %-10s\n", p->slot[i].name, br, (int)(f * 100), a, b);
        p->drawn++;
    }
    double el = (mxl_now_ms() / 1e3) - p->t0;
    double rate = el > 0 ? (double)p->bytes_done / el : 0;
    char r[32], eta[32] = "";
    size_text((int64_t)rate, r, sizeof r);
    if (rate > 0 && p->bytes_total > p->bytes_done) {
        double left = (double)(p->bytes_total - p->bytes_done) / rate;
        snprintf(eta, sizeof eta, ", %dm%02ds left", (int)left / 60, (int)left % 60);
    }
    size_text(p->bytes_done, a, sizeof a);
    size_text(p->bytes_total, b, sizeof b);
    double f = p->bytes_total > 0 ? (double)p->bytes_done / (double)p->bytes_total : 1;
    bar(br, 24, f);
    fprintf(stderr, "%-42.42s [%s] %3d%% %10s / %-10s %s/s, %d/%d files%s\n", p->label, br, (int)(f * 100), a, b, r,
            p->files_done, p->files_total, eta);
    p->drawn++;
    fflush(stderr);
    p->last_draw = (mxl_now_ms() / 1e3);
}

void mxl_cli_progress_event(void *ud, const mxl_hub_event *ev) {
    mxl_cli_progress *p = ud;
    if (p->quiet) return;
    p->bytes_total = ev->bytes_total;
    p->bytes_done = ev->bytes_done;
    p->files_total = ev->files_total;
    p->files_done = ev->files_done;
    int s = ev->slot >= 0 && ev->slot < MXL_CLI_PROGRESS_SLOTS ? ev->slot : 0;
    char sz[32];
    switch (ev->kind) {
    case MXL_HUB_EV_PLAN:
        if (!p->tty) {
            size_text(ev->bytes_total, sz, sizeof sz);
            int left = ev->files_total - ev->files_done;
            fprintf(stderr, "%s: %d file%s to download (%s), %d already present\n", p->label, left, left == 1 ? "" : "s", sz,
                    ev->files_done);
        }
        break;
    case MXL_HUB_EV_FILE_START:
        snprintf(p->slot[s].name, sizeof p->slot[s].name, "%s", ev->file);
        p->slot[s].size = ev->file_size;
        p->slot[s].done = ev->file_done;
        p->slot[s].active = true;
        if (p->tty) draw(p);
        break;
    case MXL_HUB_EV_FILE_BYTES:
        p->slot[s].done = ev->file_done;
        if (p->tty && (mxl_now_ms() / 1e3) - p->last_draw >= 0.1) draw(p);
        break;
    case MXL_HUB_EV_FILE_DONE:
        p->slot[s].active = false;
        size_text(ev->file_done, sz, sizeof sz);
        if (p->tty) {
            clear_block(p);
            fprintf(stderr, "  downloaded %s (%s)\n", ev->file, sz);
            draw(p);
        } else {
            fprintf(stderr, "  downloaded %s (%s)\n", ev->file, sz);
        }
        break;
    case MXL_HUB_EV_FILE_SKIP:
        break;
    }
}

void mxl_cli_progress_end(mxl_cli_progress *p) {
    if (p->tty && !p->quiet) clear_block(p);
    fflush(stderr);
}

mxl_status mxl_cli_resolve_model(const char *arg, const char *models_dir, const char *revision, bool offline,
                                 const char *token_flag, mxl_resolved *out, mxl_error *err) {
    mxl_cli_progress prog;
    mxl_cli_progress_init(&prog, arg ? arg : "", false);
    mxl_hub_resolve_opts ro = {.offline = offline || mxl_hub_offline_env(),
                               .token = mxl_hub_token(token_flag),
                               .progress = mxl_cli_progress_event,
                               .progress_ud = &prog};
    mxl_status st = mxl_hub_resolve(arg, models_dir, revision, &ro, out, err);
    mxl_cli_progress_end(&prog);
    return st;
}
