/* test_repl_input.c - the REPL's input reader (cli/repl.h): plain lines, """ blocks joined with
 * newlines (ollama's rules: text after the opening and before the closing quotes kept, empty
 * middle lines kept), EOF inside a block, prompts only when asked for. */
#include <stdlib.h>

#include "cli/repl.h"
#include "core/alloc.h"
#include "test.h"

/* Reads every input of `text`; the messages joined with '|', EOF ends. */
static char *read_all(const char *text, FILE *prompts) {
    FILE *in = fmemopen((void *)text, strlen(text), "r");
    if (!in) return NULL;
    static char acc[1024];
    acc[0] = '\0';
    char *msg;
    int n = 0;
    while (mxl_repl_read_input(in, prompts, NULL, &msg) == MXL_REPL_TEXT) {
        if (n++) strcat(acc, "|");
        strncat(acc, msg, sizeof acc - strlen(acc) - 2);
        mxl_free(msg);
    }
    fclose(in);
    return acc;
}

TEST(repl_input_lines) {
    CHECK_EQ_STR(read_all("hello\nworld\n", NULL), "hello|world");
    CHECK_EQ_STR(read_all("crlf\r\nlast without newline", NULL), "crlf|last without newline");
    CHECK_EQ_STR(read_all("/bye\n\n", NULL), "/bye|");
    CHECK_EQ_STR(read_all("", NULL), "");
}

TEST(repl_input_multiline_blocks) {
    /* quotes on their own lines add no empty parts; a blank line in the middle is kept */
    CHECK_EQ_STR(read_all("\"\"\"\na\n\nb\n\"\"\"\nnext\n", NULL), "a\n\nb|next");
    /* text after the opening and before the closing quotes are parts */
    CHECK_EQ_STR(read_all("\"\"\"first\nsecond\nthird\"\"\"\n", NULL), "first\nsecond\nthird");
    /* one-line block */
    CHECK_EQ_STR(read_all("\"\"\"just this\"\"\"\n", NULL), "just this");
    /* an empty block is an empty message; an unterminated one is dropped at EOF */
    CHECK_EQ_STR(read_all("\"\"\"\n\"\"\"\nx\n", NULL), "|x");
    CHECK_EQ_STR(read_all("before\n\"\"\"\nnever\nclosed\n", NULL), "before");
    /* quotes inside a line do not open a block */
    CHECK_EQ_STR(read_all("say \"\"\"hi\nok\n", NULL), "say \"\"\"hi|ok");
}

TEST(repl_input_prompts) {
    char buf[256] = {0};
    FILE *p = fmemopen(buf, sizeof buf - 1, "w");
    REQUIRE(p);
    CHECK_EQ_STR(read_all("one\n\"\"\"\ntwo\n\"\"\"\n", p), "one|two");
    fclose(p);
    /* ">>> " before each input (the last one meets EOF), "... " for each block continuation */
    CHECK_EQ_STR(buf, ">>> >>> ... ... >>> ");
}
