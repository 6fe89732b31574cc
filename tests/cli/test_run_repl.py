"""The interactive REPL of `mlxcel run` (no -p), driven through piped stdin on the default model.

The reference for an answer is `mlxcel run -p` (itself checked against transformers in
test_generate.py): a single-turn REPL conversation must give exactly the tokens of -p, and so
must the first turn after /clear. Follow-up turns must reuse the KV cache of the earlier turns
(the stats line reports "prompt N tokens (C cached)")."""
import re
import signal
import subprocess
import time

from conftest import mlxcel_bin, real_model_path, run

DEFAULT = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
ARGS = ["--temp", "0", "-n", "16"]
STATS = re.compile(r"^\[Generated (\d+) tokens .*; prompt (\d+) tokens \((\d+) cached\), .*finish: (\w+)\]$")


def stats_lines(stderr):
    out = []
    for line in stderr.splitlines():
        m = STATS.match(line)
        if m:
            out.append(tuple(int(x) for x in m.groups()[:3]) + (m.group(4),))
    return out


def clean(proc):
    assert "Sanitizer" not in proc.stderr and "runtime error" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc


def one_shot(prompt, *extra):
    p = run("run", "-p", prompt, *ARGS, *extra)
    clean(p)
    (st,) = stats_lines_p(p.stderr)
    return p.stdout, st


def stats_lines_p(stderr):
    """The -p path's summary lines: (generated, prompt)."""
    return [(int(m.group(1)), int(m.group(2)))
            for m in re.finditer(r"\[Generated (\d+) tokens .*; prompt (\d+) tokens", stderr)]


def test_two_turns_first_equals_p_and_second_reuses_cache():
    real_model_path(DEFAULT)
    first, (gen1, prompt1) = one_shot("What is the capital of France?")
    p = run("run", *ARGS, input="What is the capital of France?\nAnd of Italy?\n")
    clean(p)
    st = stats_lines(p.stderr)
    assert len(st) == 2, p.stderr
    # turn 1 is exactly `run -p` (same prompt tokens, same answer text), nothing cached yet
    assert st[0][:3] == (gen1, prompt1, 0)
    assert p.stdout.startswith(first), (p.stdout, first)
    second = p.stdout[len(first):]
    assert second.strip() and second.endswith("\n")
    # turn 2 re-renders the whole conversation: longer than turn 1's prompt plus its answer, and
    # the prefix of turn 1 comes from the cache
    assert st[1][1] > prompt1 + 1
    assert prompt1 // 2 < st[1][2] < st[1][1], st
    # no prompt decorations when stdin is not a terminal
    assert ">>>" not in p.stdout


def test_clear_starts_a_fresh_conversation():
    real_model_path(DEFAULT)
    first, (gen1, prompt1) = one_shot("Hi")
    p = run("run", *ARGS, input="Hi\nTell me a joke.\n/clear\nHi\n")
    clean(p)
    st = stats_lines(p.stderr)
    assert len(st) == 3, p.stderr
    # after /clear the turn is a first turn again: same prompt as -p, nothing adopted from the cache
    assert st[2][:3] == (gen1, prompt1, 0)
    assert p.stdout.startswith(first) and p.stdout.endswith(first), (p.stdout, first)


def test_multiline_block_is_one_message_joined_with_newlines():
    real_model_path(DEFAULT)
    text = "Repeat these lines:\nalpha\n\nbeta"
    ref, (gen1, prompt1) = one_shot(text)
    p = run("run", *ARGS, input='"""Repeat these lines:\nalpha\n\nbeta"""\n')
    clean(p)
    st = stats_lines(p.stderr)
    assert len(st) == 1 and st[0][:3] == (gen1, prompt1, 0), p.stderr
    assert p.stdout == ref
    # the opening and closing quotes on lines of their own add no empty parts
    p = run("run", *ARGS, input='"""\nRepeat these lines:\nalpha\n\nbeta\n"""\n')
    clean(p)
    assert p.stdout == ref
    assert [s[:3] for s in stats_lines(p.stderr)] == [(gen1, prompt1, 0)]


def test_commands_help_unknown_bye():
    real_model_path(DEFAULT)
    p = run("run", *ARGS, input="/help\n/?\n/frobnicate now\n/bye\nHi\n")
    clean(p)
    listings = p.stdout.split("Available commands:")[1:]
    assert len(listings) == 2, p.stdout  # once by /help, once by /?
    for cmd in ("/bye", "/clear", "/help", "/?", '"""'):
        assert all(cmd in l for l in listings), p.stdout
    unknown = [l for l in p.stderr.splitlines() if "/frobnicate" in l]
    assert len(unknown) == 1 and "Unknown command" in unknown[0], p.stderr
    # /bye exits 0 before the turn after it runs
    assert stats_lines(p.stderr) == []


def test_unknown_command_continues_and_eof_exits_cleanly():
    real_model_path(DEFAULT)
    ref, _ = one_shot("Hi")
    p = run("run", *ARGS, input="/nope\n\n   \nHi")  # blank lines ignored, last line without newline
    clean(p)
    assert p.stdout == ref
    assert len(stats_lines(p.stderr)) == 1
    p = run("run", *ARGS, input="")
    clean(p)
    assert p.stdout == "" and stats_lines(p.stderr) == []


def test_image_command_refused():
    real_model_path(DEFAULT)
    p = run("run", *ARGS, input="/image x.png\n")
    clean(p)
    assert "was loaded without a vision tower (text-only checkpoint)" in p.stderr, p.stderr


def test_ctrl_c_cancels_the_answer_and_drops_the_exchange():
    real_model_path(DEFAULT)
    _, (_, prompt_hi) = one_shot("Hi")
    proc = subprocess.Popen([mlxcel_bin(), "run", "--temp", "0", "-n", "512", "--ignore-eos"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(b"Write a very long story about a dragon.\n")
        proc.stdin.flush()
        got = proc.stdout.read1(4096)  # the answer is streaming: the REPL and its handler are up
        assert got
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(input=b"Hi\n", timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = err.decode()
    assert proc.returncode == 0, err
    assert "Sanitizer" not in err and "runtime error" not in err, err
    st = stats_lines(err)
    # one summary (the "Hi" turn); the cancelled exchange left the transcript, so that turn's
    # prompt is exactly the single-turn prompt of "Hi" (part of it still comes from the cache)
    assert len(st) == 1, err
    assert st[0][1] == prompt_hi and st[0][2] > 0, (st, prompt_hi)


def test_raw_mode_turns_match_raw_p():
    real_model_path(DEFAULT)
    ref, (gen1, prompt1) = one_shot("The capital of France is", "--no-chat-template")
    p = run("run", *ARGS, "--no-chat-template", input="The capital of France is\nThe capital of France is\n")
    clean(p)
    # raw turns carry no transcript: each is the -p raw prompt, the second adopting its KV
    assert p.stdout == ref + ref
    st = stats_lines(p.stderr)
    assert [s[:2] for s in st] == [(gen1, prompt1), (gen1, prompt1)] and st[0][2] == 0 and st[1][2] == prompt1 - 1


def test_generate_without_prompt_is_the_repl():
    """Spec (generate): without --prompt, generate enters the same multi-turn REPL as run."""
    script = "Say hello.\n/bye\n"
    g = run("generate", "-m", real_model_path("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"), "-n", "6", "--temp", "0",
            input=script)
    r = run("run", "-n", "6", "--temp", "0", input=script)
    assert g.returncode == 0 and r.returncode == 0, (g.stderr, r.stderr)
    assert g.stdout == r.stdout and g.stdout.strip()
