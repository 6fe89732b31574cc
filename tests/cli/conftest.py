"""Shared helpers for the CLI tests: the binary under test, the model store, running mlxcel."""
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = os.path.join(os.path.dirname(ROOT), "shared", "spec")


def mlxcel_bin():
    return os.environ.get("MLXCEL_BIN", os.path.join(ROOT, "build", "mlxcel"))


def store_root():
    """Where scripts/fetch-models.sh installs the bundled real models."""
    if os.environ.get("MLXCEL_MODELS_DIR"):
        return os.environ["MLXCEL_MODELS_DIR"]
    cache = os.environ.get("MLXCEL_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "mlxcel")
    return os.path.join(cache, "models")


def real_model_path(repo_id, filename=None):
    """Path of a bundled model; fails (never skips) when it is missing."""
    p = os.path.join(store_root(), repo_id)
    if filename:
        p = os.path.join(p, filename)
    if not os.path.exists(p):
        pytest.fail(f"real model missing: {p} (run scripts/fetch-models.sh)")
    return p


def run(*args, env=None, input=None, timeout=120):
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([mlxcel_bin(), *args], capture_output=True, text=True, env=e,
                          input=input, timeout=timeout)


def assert_clean_error(proc, *needles):
    """A bad input gives a non-zero exit and exactly one 'error: ...' line naming the problem, and
    never a sanitizer report or a crash signal."""
    assert proc.returncode not in (0,), proc
    assert proc.returncode > 0, f"killed by signal {-proc.returncode}: {proc.stderr}"
    assert "Sanitizer" not in proc.stderr and "runtime error" not in proc.stderr, proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: "), lines[0]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]
