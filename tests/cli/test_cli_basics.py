"""The binary's global behaviour: --help, --version, unknown commands and flags (exit 2), and
spec subcommands that are not built yet (plain message, non-zero exit)."""
import re

from conftest import run

SPEC_SUBCOMMANDS = ["run", "generate", "generate-image", "embed", "rerank", "detect", "predict", "tag",
                    "extract", "inspect", "serve", "list", "arch", "download", "rm", "tune", "split-mtp",
                    "prepare-external-ple", "prepare-expert-stream"]


def test_help_lists_every_spec_subcommand():
    p = run("--help")
    assert p.returncode == 0
    for c in SPEC_SUBCOMMANDS:
        assert re.search(r"^\s+" + re.escape(c) + r"\b", p.stdout, re.M), c
    # aliases of the spec: gen, ls, supported
    for alias in ("gen", "ls", "supported"):
        assert alias in p.stdout


def test_version():
    p = run("--version")
    assert p.returncode == 0
    assert re.fullmatch(r"mlxcel \d+\.\d+\.\d+\n", p.stdout)


def test_unknown_command_and_flag_exit_2():
    p = run("frobnicate")
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "unknown command 'frobnicate'" in p.stderr
    p = run("--frobnicate")
    assert p.returncode == 2 and "unknown flag" in p.stderr
    for cmd in ("inspect", "list", "arch", "rm"):
        p = run(cmd, "--no-such-flag")
        assert p.returncode == 2, cmd
        assert p.stderr.strip().count("\n") == 0
        assert "unknown flag '--no-such-flag'" in p.stderr


def test_each_built_subcommand_has_help():
    for cmd in ("inspect", "list", "ls", "arch", "supported", "rm", "run", "generate", "gen", "embed", "rerank", "serve",
                "download", "tune", "tokenize", "chat-template", "bench", "convert"):
        p = run(cmd, "--help")
        assert p.returncode == 0, cmd
        assert "Usage:" in p.stdout


def test_unbuilt_subcommands_say_so():
    for cmd in ("detect", "split-mtp"):
        p = run(cmd, "-m", "x")
        assert p.returncode == 1, cmd
        assert "not available in this build yet" in p.stderr, cmd


BUILT = ["run", "generate", "embed", "rerank", "inspect", "serve", "list", "arch", "rm", "download", "tune", "tokenize", "chat-template", "bench",
         "convert"]


def test_summaries_say_what_each_command_does():
    out = run("--help").stdout
    line = {l.split()[0].rstrip(","): l for l in out.splitlines() if l.startswith("  ") and not l.strip().startswith("-")}
    # run opens the chat REPL without -p (src/cli/repl.c), and says so
    assert "REPL" in line["run"] and "not yet" not in line["run"], line["run"]
    for c in BUILT:
        assert "not available" not in line[c], line[c]
    for c in ("detect", "generate-image", "split-mtp"):
        assert "(not available in this build)" in line[c], line[c]


def help_flags(cmd):
    """(flag, takes a value) for each option `mlxcel <cmd> --help` lists."""
    out = run(cmd, "--help").stdout
    flags = []
    for l in out.splitlines():
        m = re.match(r"\s+(?:-\w, )?(--[\w-]+)( \S+)?\s{2,}", l)
        if m and m.group(1) != "--help":
            flags.append((m.group(1), bool(m.group(2))))
    return flags


def test_every_flag_a_help_lists_is_accepted():
    """The parser knows every flag the command's --help lists: `cmd FLAG [VALUE] --help` is
    help (exit 0), where an unknown flag would be a usage error (exit 2)."""
    for cmd in ("run", "generate", "embed", "rerank", "inspect", "list", "rm", "download", "tokenize", "chat-template", "convert"):
        flags = help_flags(cmd)
        assert len(flags) >= 1, cmd
        for flag, has_value in flags:
            p = run(cmd, flag, *(["1"] if has_value else []), "--help")
            assert p.returncode == 0 and "Usage:" in p.stdout, (cmd, flag, p.stderr)


def test_bench_kernels_tables():
    """`mlxcel bench kernels` at a tiny size: the read-bandwidth line, a matrix-vector row per
    weight format and a GEMM row per format, each with positive figures; a bad size is one line."""
    p = run("bench", "kernels", "-t", "1", "--mb", "4", "--dim", "256", "--tokens", "16", "--reps", "1")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert re.search(r"STREAM-style read of 4 MB:\s+1 thread [0-9.]+ GB/s", out), out
    rows = {l.split()[0]: l for l in out.splitlines() if l[:1].isalnum()}
    for fmt in ("F32", "F16", "Q8_0", "Q4_0", "Q4_K", "Q6_K"):
        assert fmt in rows, (fmt, out)
    matvec = [l for l in out.splitlines() if re.match(r"^(F32|Q4_K)\s+[0-9.]+\s+[0-9.]+\s+\d+%", l)]
    assert len(matvec) == 2 and all(float(l.split()[2]) > 0 for l in matvec), matvec
    gemm = [l for l in out.splitlines() if re.match(r"^(F32|Q4_K)\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+x", l)]
    assert len(gemm) == 2 and all(float(l.split()[1]) > 0 for l in gemm), gemm
    bad = run("bench", "kernels", "--mb", "0")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--mb" in bad.stderr, bad.stderr
