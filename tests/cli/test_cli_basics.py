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
    for cmd in ("inspect", "list", "ls", "arch", "supported", "rm", "run", "generate", "gen", "embed"):
        p = run(cmd, "--help")
        assert p.returncode == 0, cmd
        assert "Usage:" in p.stdout


def test_unbuilt_subcommands_say_so():
    for cmd in ("download", "split-mtp", "detect"):
        p = run(cmd, "-m", "x")
        assert p.returncode == 1, cmd
        assert "not available in this build yet" in p.stderr, cmd
