"""test_list_rm.py - `mlxcel list` and `mlxcel rm` against a temporary model store.

Run: /work/main/.venv/bin/python -m pytest tests/cli/test_list_rm.py
The binary comes from $MLXCEL_BIN (default build/mlxcel under the repository root). The store is a
fresh MLXCEL_MODELS_DIR holding fake model directories of known sizes and mtimes; expected sizes and
times are computed here independently with os.lstat over the fixture tree.
"""
import json
import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
NOW = int(time.time())
DAY = 86400


def _bin() -> str:
    p = Path(os.environ.get("MLXCEL_BIN", "build/mlxcel"))
    if not p.is_absolute():
        p = REPO_ROOT / p
    assert p.is_file(), f"mlxcel binary not found at {p} (build it or set MLXCEL_BIN)"
    return str(p)


def write(path: Path, size: int, mtime: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes((i * 7) % 251 for i in range(size)))
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def ref_usage(d: Path):
    """Independent reference: sum of regular-file sizes and newest mtime, symlinks not followed."""
    total, newest = 0, None
    for dirpath, dirnames, filenames in os.walk(d, followlinks=False):
        for name in filenames + dirnames:
            st = os.lstat(os.path.join(dirpath, name))
            if (st.st_mode & 0o170000) == 0o100000:  # S_ISREG
                total += st.st_size
                newest = int(st.st_mtime) if newest is None else max(newest, int(st.st_mtime))
    return total, newest


def human(n: int) -> str:
    """Decimal units with one decimal, as ollama / huggingface-cli print sizes."""
    if n < 1000:
        return f"{n} B"
    v = n / 1000
    for unit in ["KB", "MB", "GB", "TB"]:
        if round(v, 1) < 1000:
            return f"{v:.1f} {unit}"
        v /= 1000
    return f"{v:.1f} PB"


MODELS = {
    # repo id -> (expected SIZE cell, expected MODIFIED cell)
    "alpha-org/big-model": ("3.0 MB", "2 days ago"),
    "beta/Small-GGUF": ("1.5 KB", "1 week ago"),
    "Gamma/mid": ("255.0 KB", "1 hour ago"),
    "delta/links-only": ("0 B", "-"),
}


@pytest.fixture()
def env(tmp_path):
    """Environment with an isolated HOME, HF cache and model store; returns (env, store root)."""
    e = {k: v for k, v in os.environ.items()
         if k not in ("MLXCEL_MODELS_DIR", "MLXCEL_CACHE_DIR", "MLXCEL_DEFAULT_ORG", "HF_HUB_CACHE", "HF_HOME",
                      "XDG_CACHE_HOME")}
    root = tmp_path / "store"
    e["HOME"] = str(tmp_path / "home")
    e["MLXCEL_MODELS_DIR"] = str(root)
    e["HF_HUB_CACHE"] = str(tmp_path / "hub")
    return e, root


@pytest.fixture()
def store(env, tmp_path):
    e, root = env
    write(root / "alpha-org/big-model/config.json", 100, NOW - 3 * DAY)
    write(root / "alpha-org/big-model/model.safetensors", 3_000_000, NOW - 2 * DAY)
    write(root / "beta/Small-GGUF/small.Q4_0.gguf", 1_500, NOW - 10 * DAY)
    write(root / "Gamma/mid/model.safetensors", 250_000, NOW - 3600 - 60)
    write(root / "Gamma/mid/sub/extra.bin", 5_000, NOW - 5 * DAY)
    # Only a symlink: listed (it has config.json), but holds no regular file -> 0 B, mtime unknown.
    write(tmp_path / "outside/cfg.json", 4_000, NOW)
    (root / "delta/links-only").mkdir(parents=True)
    os.symlink(tmp_path / "outside/cfg.json", root / "delta/links-only/config.json")
    # Not models / not managed: no model file, hidden staging dir, symlinked snapshot.
    write(root / "beta/notes/README.md", 10)
    write(root / ".fetch-tmp.abc/x/config.json", 10)
    os.symlink(root / "Gamma/mid", root / "beta/linked")
    return e, root


def run(e, *args, stdin=subprocess.DEVNULL):
    return subprocess.run([_bin(), *args], env=e, stdin=stdin, capture_output=True, text=True, timeout=60)


def table(stdout: str):
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    return [re.split(r"\s{2,}", ln.strip()) for ln in lines]


# ---- list ------------------------------------------------------------------------------------

def test_list_table(store):
    e, root = store
    r = run(e, "list")
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout)
    assert rows[0] == ["REPO ID", "SIZE", "MODIFIED"]
    ids = [row[0] for row in rows[1:]]
    assert ids == sorted(MODELS, key=lambda s: (s.lower(), s))
    for row in rows[1:]:
        size_cell, age_cell = MODELS[row[0]]
        assert row[1:] == [size_cell, age_cell], row
        total, _ = ref_usage(root / row[0])
        assert row[1] == human(total)


def test_list_alias_ls(store):
    e, _ = store
    assert run(e, "ls").stdout == run(e, "list").stdout


def test_list_json(store):
    e, root = store
    r = run(e, "list", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert isinstance(data, list)
    assert [d["repo_id"] for d in data] == sorted(MODELS, key=lambda s: (s.lower(), s))
    for d in data:
        # the spec's four fields, and where the copy is (store or hf-cache, listed with the default root)
        assert set(d) == {"repo_id", "size_bytes", "path", "modified", "source"} and d["source"] == "store"
        total, newest = ref_usage(root / d["repo_id"])
        assert d["size_bytes"] == total
        assert d["modified"] == newest
        assert d["path"] == str(root / d["repo_id"])
        assert os.path.isabs(d["path"])
    by_id = {d["repo_id"]: d for d in data}
    assert by_id["alpha-org/big-model"]["size_bytes"] == 3_000_100
    assert by_id["alpha-org/big-model"]["modified"] == NOW - 2 * DAY
    assert by_id["Gamma/mid"]["size_bytes"] == 255_000
    assert by_id["delta/links-only"]["modified"] is None
    assert by_id["delta/links-only"]["size_bytes"] == 0


def test_list_quiet(store):
    e, _ = store
    r = run(e, "list", "-q")
    assert r.returncode == 0
    assert r.stdout.splitlines() == sorted(MODELS, key=lambda s: (s.lower(), s))
    assert run(e, "list", "--quiet").stdout == r.stdout


def test_list_verbose(store):
    e, root = store
    r = run(e, "list", "-v")
    assert r.returncode == 0
    rows = table(r.stdout)
    assert rows[0] == ["REPO ID", "SIZE", "MODIFIED", "PATH"]
    for row in rows[1:]:
        assert row[3] == str(root / row[0])


def test_list_sort_size(store):
    e, root = store
    want = sorted(MODELS, key=lambda s: (-ref_usage(root / s)[0], s.lower()))
    assert run(e, "list", "-q", "--sort", "size").stdout.splitlines() == want
    assert [d["repo_id"] for d in json.loads(run(e, "list", "--json", "--sort=size").stdout)] == want
    assert want[0] == "alpha-org/big-model" and want[-1] == "delta/links-only"


def test_list_sort_modified(store):
    e, _ = store
    # newest first, unknown mtime last
    want = ["Gamma/mid", "alpha-org/big-model", "beta/Small-GGUF", "delta/links-only"]
    assert run(e, "list", "-q", "--sort", "modified").stdout.splitlines() == want
    rows = table(run(e, "list", "--sort", "modified").stdout)
    assert [row[0] for row in rows[1:]] == want


@pytest.mark.parametrize("args", [["--json", "-q"], ["--json", "--verbose"], ["-q", "-v"], ["-qv"],
                                  ["--sort", "bogus"], ["--sort"], ["extra-arg"], ["--nope"]])
def test_list_usage_errors(store, args):
    e, _ = store
    r = run(e, "list", *args)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1


def test_list_empty_store(env, tmp_path):
    e, root = env
    assert not root.exists()
    r = run(e, "list")
    assert r.returncode == 0
    assert str(root) in r.stdout and "fetch-models.sh" in r.stdout
    r = run(e, "list", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == []
    r = run(e, "list", "-q")
    assert r.returncode == 0 and r.stdout == ""


def test_list_root_selection(store, tmp_path):
    e, root = store
    # --models-dir beats MLXCEL_MODELS_DIR
    e2 = dict(e, MLXCEL_MODELS_DIR=str(tmp_path / "empty"))
    assert run(e2, "list", "-q").stdout == ""
    assert run(e2, "list", "-q", "--models-dir", str(root)).stdout.splitlines() == sorted(
        MODELS, key=lambda s: (s.lower(), s))
    # without MLXCEL_MODELS_DIR: $MLXCEL_CACHE_DIR/models, then $HOME/.cache/mlxcel/models
    e3 = {k: v for k, v in e.items() if k != "MLXCEL_MODELS_DIR"}
    write(tmp_path / "cache/models/c/in-cache/config.json", 5)
    write(Path(e["HOME"]) / ".cache/mlxcel/models/h/in-home/config.json", 5)
    assert run(dict(e3, MLXCEL_CACHE_DIR=str(tmp_path / "cache")), "list", "-q").stdout == "c/in-cache\n"
    assert run(e3, "list", "-q").stdout == "h/in-home\n"


# ---- rm --------------------------------------------------------------------------------------

def test_rm_yes_deletes(store):
    e, root = store
    r = run(e, "rm", "-y", "beta/Small-GGUF")
    assert r.returncode == 0, r.stderr
    assert "Removed beta/Small-GGUF (1.5 KB)" in r.stdout
    assert not (root / "beta/Small-GGUF").exists()
    assert (root / "beta/notes/README.md").exists()  # owner dir kept: not empty
    r = run(e, "rm", "--yes", "alpha-org/big-model")
    assert r.returncode == 0, r.stderr
    assert not (root / "alpha-org").exists()  # empty owner dir removed
    assert "alpha-org/big-model" not in run(e, "list", "-q").stdout
    assert (root / "Gamma/mid/model.safetensors").exists()


def test_rm_bare_name_uses_default_org(store):
    e, root = store
    write(root / "mlx-community/Tiny-4bit/config.json", 3)
    write(root / "my-org/Tiny-4bit/config.json", 3)
    assert run(dict(e, MLXCEL_DEFAULT_ORG="my-org"), "rm", "-y", "Tiny-4bit").returncode == 0
    assert not (root / "my-org").exists()
    assert (root / "mlx-community/Tiny-4bit").exists()
    assert run(e, "rm", "-y", "Tiny-4bit").returncode == 0
    assert not (root / "mlx-community").exists()


def test_rm_non_tty_without_yes_refuses(store):
    e, root = store
    r = run(e, "rm", "Gamma/mid", stdin=subprocess.DEVNULL)
    assert r.returncode != 0
    assert "--yes" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert (root / "Gamma/mid/model.safetensors").exists()
    r = subprocess.run([_bin(), "rm", "Gamma/mid"], env=e, input="y\n", capture_output=True, text=True, timeout=60)
    assert r.returncode != 0  # a pipe is not a terminal, even when it says yes
    assert (root / "Gamma/mid").exists()


def _rm_on_tty(e, repo, answer: bytes):
    """Runs `mlxcel rm repo` with a pseudo-terminal as stdin; returns (rc, prompt text)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([_bin(), "rm", repo], env=e, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(slave)
    os.write(master, answer)
    out, err = p.communicate(timeout=60)
    os.close(master)
    return p.returncode, err.decode() + out.decode()


def test_rm_tty_confirmation(store):
    e, root = store
    rc, text = _rm_on_tty(e, "Gamma/mid", b"n\n")
    assert rc != 0
    assert f"Remove Gamma/mid (255.0 KB) from {root}? [y/N]" in text
    assert (root / "Gamma/mid").exists()
    rc, text = _rm_on_tty(e, "Gamma/mid", b"y\n")
    assert rc == 0, text
    assert not (root / "Gamma/mid").exists()


@pytest.mark.parametrize("bad", ["../etc", "a/../../b", "/etc/passwd", "..", "beta/..", "beta/notes/../..",
                                 "a/b/c", ".fetch-tmp.abc/x"])
def test_rm_traversal_refused(store, tmp_path, bad):
    e, root = store
    write(tmp_path / "etc/sentinel", 3)
    write(root.parent / "b/sentinel", 3)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    r = run(e, "rm", "-y", "--models-dir", str(root / "beta"), bad)
    assert r.returncode == 2, (bad, r.stderr)
    r = run(e, "rm", "-y", bad)
    assert r.returncode == 2, (bad, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_rm_never_follows_symlink_out_of_store(store, tmp_path):
    e, root = store
    victim = tmp_path / "victim"
    write(victim / "precious/config.json", 50)
    write(victim / "file.bin", 50)
    # 1. The snapshot itself is a symlink out of the store: refused, target untouched.
    (root / "evil").mkdir()
    os.symlink(victim / "precious", root / "evil/model")
    r = run(e, "rm", "-y", "evil/model")
    assert r.returncode == 1 and "symlink" in r.stderr
    assert (victim / "precious/config.json").exists()
    # 2. A symlinked owner directory: refused.
    os.symlink(victim, root / "evil-owner")
    r = run(e, "rm", "-y", "evil-owner/precious")
    assert r.returncode == 1
    assert (victim / "precious/config.json").exists()
    # 3. Links inside a real snapshot are unlinked, their targets stay.
    os.symlink(victim / "file.bin", root / "Gamma/mid/link-file")
    os.symlink(victim, root / "Gamma/mid/sub/link-dir")
    r = run(e, "rm", "-y", "Gamma/mid")
    assert r.returncode == 0, r.stderr
    assert not os.path.lexists(root / "Gamma/mid")
    assert (victim / "file.bin").read_bytes() == bytes((i * 7) % 251 for i in range(50))
    assert (victim / "precious/config.json").exists()


def _hf_snapshot(hub: Path, repo: str, commit: str, ref: str = "main") -> Path:
    owner, name = repo.split("/")
    base = hub / f"models--{owner}--{name}"
    snap = base / "snapshots" / commit
    write(snap / "config.json", 20)
    (base / "refs").mkdir(parents=True, exist_ok=True)
    (base / "refs" / ref).write_text(commit)
    return snap


def test_rm_hf_cache_only_is_reported_not_deleted(store):
    e, root = store
    hub = Path(e["HF_HUB_CACHE"])
    snap = _hf_snapshot(hub, "hf-org/cached", "a" * 40)
    r = run(e, "rm", "-y", "hf-org/cached")
    assert r.returncode == 1
    assert "exists only in the Hugging Face cache" in r.stderr
    assert str(snap) in r.stderr and "does not delete" in r.stderr
    assert (snap / "config.json").exists()
    # --revision picks the snapshot that is reported
    snap_v1 = _hf_snapshot(hub, "hf-org/cached", "b" * 40, ref="v1")
    r = run(e, "rm", "-y", "--revision", "v1", "hf-org/cached")
    assert r.returncode == 1 and str(snap_v1) in r.stderr
    assert snap_v1.exists() and snap.exists()
    # HF_HOME/hub when HF_HUB_CACHE is unset
    e2 = {k: v for k, v in e.items() if k != "HF_HUB_CACHE"}
    snap2 = _hf_snapshot(root.parent / "hfhome/hub", "hf-org/other", "c" * 40)
    r = run(dict(e2, HF_HOME=str(root.parent / "hfhome")), "rm", "-y", "hf-org/other")
    assert r.returncode == 1 and str(snap2) in r.stderr and snap2.exists()


def test_rm_not_found(store):
    e, root = store
    r = run(e, "rm", "-y", "nobody/nothing")
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "nobody/nothing" in lines[0] and str(root) in lines[0]
    r = run(e, "rm", "-y", "beta/notes-missing")
    assert r.returncode == 1
    r = run(e, "rm")
    assert r.returncode == 2
