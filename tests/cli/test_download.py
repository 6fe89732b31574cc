"""test_download.py - `mlxcel download`, the shared Hugging Face cache, automatic download, rm/list
of downloads, offline mode, and the fault trials (interrupted transfers, corrupt blobs, a full disk,
concurrent downloads), against the local Hub-compatible server tests/hub/hub_server.py.

The reference is huggingface_hub from PyPI pointed at the same server: what it downloads our
download reuses without fetching a byte (and the reverse), and its scan_cache_dir() reads the cache
we write without warnings. File contents are checked against the server's source tree.
"""
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT, assert_clean_error, mlxcel_bin, real_model_path

HUB_SERVER = os.path.join(ROOT, "tests", "hub", "hub_server.py")
TOKEN = "hf_test_token_0123456789"


def det_bytes(n, seed):
    """Deterministic incompressible bytes."""
    out, i = bytearray(), 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}:{i}".encode()).digest()
        i += 1
    return bytes(out[:n])


def make_repo(root, repo_id, files, rev="main", cfg=None):
    d = Path(root) / repo_id / rev
    for rel, data in files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, Path):
            os.symlink(data, p)
        else:
            p.write_bytes(data)
    if cfg is not None:
        (Path(root) / (repo_id + ".json")).write_text(json.dumps(cfg))


TINY = {
    "config.json": b'{"model_type": "test", "hidden_size": 8}\n',
    "sub/notes.txt": b"notes\n" * 50,
    "model.safetensors": det_bytes(3_000_000, "tiny-weights"),
    "tokenizer.json": b'{"version": "1.0"}\n',
}


class Hub:
    def __init__(self, root, throttle=0.0, tls=None):
        self.root = root
        port_file = os.path.join(root, "..", f"port-{os.getpid()}-{random.random()}")
        cmd = [sys.executable, HUB_SERVER, "--root", root, "--port-file", port_file, "--token", TOKEN]
        if throttle:
            cmd += ["--throttle", str(throttle)]
        if tls:
            cmd += ["--tls-cert", tls[0], "--tls-key", tls[1]]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("PORT "), (line, self.proc.stderr.read() if self.proc.poll() is not None else "")
        self.port = int(line.split()[1])
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"

    def stats(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/_test/stats", timeout=10) as r:
            return json.loads(r.read())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hubroot") / "repos"
    root.mkdir()
    make_repo(root, "acme/tiny", TINY)
    make_repo(root, "acme/tiny", {"config.json": b'{"v": 1}\n', "model.safetensors": det_bytes(100_000, "v1")}, rev="v1")
    make_repo(root, "acme/private", TINY, cfg={"private": True})
    make_repo(root, "acme/gated", TINY, cfg={"gated": True})
    make_repo(root, "acme/limited", TINY, cfg={"rate_limited": True})
    make_repo(root, "acme/flaky", TINY, cfg={"corrupt_once": ["model.safetensors"]})
    make_repo(root, "acme/broken", TINY, cfg={"corrupt_always": ["model.safetensors"]})
    make_repo(root, "acme/liar", TINY, cfg={"understate_size": True})
    make_repo(root, "acme/many", {f"shard/{i:03d}.json": det_bytes(100 + i, f"m{i}") for i in range(40)})
    smol = Path(real_model_path("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"))
    make_repo(root, "acme/smol", {p.name: p.resolve() for p in smol.iterdir() if p.is_file() and not p.name.startswith(".")})
    h = Hub(str(root))
    yield h
    h.stop()


@pytest.fixture
def env(tmp_path, hub):
    e = {k: v for k, v in os.environ.items()
         if k not in ("MLXCEL_MODELS_DIR", "HF_HUB_OFFLINE", "LLAMA_ARG_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
                      "HF_HOME", "MLXCEL_EXTRA_CA_CERTS")}
    e.update(HF_ENDPOINT=hub.url, HF_HUB_CACHE=str(tmp_path / "hfcache"), MLXCEL_CACHE_DIR=str(tmp_path / "mx"),
             HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_DISABLE_TELEMETRY="1", HF_TOKEN_PATH=str(tmp_path / "no-token"),
             HOME=str(tmp_path / "home"))
    return e


def mx(env, *args, timeout=300, **kw):
    return subprocess.run([mlxcel_bin(), *args], capture_output=True, text=True, env=env, timeout=timeout, **kw)


def hf(env, code, timeout=300):
    """Runs huggingface_hub (the reference client) in a child with env."""
    return subprocess.run([sys.executable, "-c", "import huggingface_hub as h, json, sys\n" + code],
                          capture_output=True, text=True, env=env, timeout=timeout)


def hub_repo(env, repo_id):
    o, n = repo_id.split("/")
    return Path(env["HF_HUB_CACHE"]) / f"models--{o}--{n}"


def store_entry(env, repo_id):
    return Path(env["MLXCEL_CACHE_DIR"]) / "models" / repo_id


def assert_tree_equal(got_dir, files):
    for rel, data in files.items():
        p = Path(got_dir) / rel
        assert p.is_file(), p
        assert p.read_bytes() == (data.read_bytes() if isinstance(data, Path) else data), rel


def scan_clean(env):
    r = hf(env, "info = h.scan_cache_dir()\n"
                "print(json.dumps({'warnings': [str(w) for w in info.warnings],"
                " 'repos': {r.repo_id: [r.size_on_disk, sorted(x.commit_hash for x in r.revisions)] for r in info.repos}}))")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["warnings"] == [], out["warnings"]
    return out["repos"]


# ---- download itself ---------------------------------------------------------------------------


def test_download_layout_and_content(env):
    r = mx(env, "download", "acme/tiny")
    assert r.returncode == 0, r.stderr
    entry = store_entry(env, "acme/tiny")
    assert r.stdout.strip() == str(entry)
    assert_tree_equal(entry, TINY)
    repo = hub_repo(env, "acme/tiny")
    commit = (repo / "refs" / "main").read_text()
    assert len(commit) == 40
    snap = repo / "snapshots" / commit
    for rel, data in TINY.items():
        link = snap / rel
        assert link.is_symlink() and not os.path.isabs(os.readlink(link)), rel
        blob = (link.parent / os.readlink(link)).resolve()
        assert blob.parent == (repo / "blobs").resolve()
        if rel.endswith(".safetensors"):
            assert blob.name == hashlib.sha256(data).hexdigest()  # LFS: the blob is named by its sha256
        else:
            assert blob.name == hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git blob id
    assert not list((repo / "blobs").glob("*.incomplete"))
    marker = json.loads((entry / ".mlxcel-download.json").read_text())
    assert marker["commit"] == commit and marker["snapshot_created"] is True
    # again: nothing transferred
    r2 = mx(env, "download", "acme/tiny")
    assert r2.returncode == 0 and "up to date" in r2.stderr, r2.stderr
    assert scan_clean(env)["acme/tiny"][1] == [commit]


def test_downloaded_model_runs_and_auto_download(env, hub):
    smol = real_model_path("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF")
    args = ["-p", "The capital of France is", "-n", "8", "--temp", "0"]
    ref = mx(env, "generate", "-m", smol, *args)
    assert ref.returncode == 0, ref.stderr
    # a repo id that is not on this machine is downloaded first, then run
    got = mx(env, "generate", "-m", "acme/smol", *args)
    assert got.returncode == 0, got.stderr
    assert got.stdout == ref.stdout
    assert "downloaded" in got.stderr
    again = mx(env, "generate", "-m", "acme/smol", *args)
    assert again.returncode == 0 and again.stdout == ref.stdout and "downloaded" not in again.stderr
    # `run` too (a fresh cache), and offline mode with the copy on disk runs without a request
    e2 = dict(env, HF_HUB_CACHE=env["HF_HUB_CACHE"] + "-run", MLXCEL_CACHE_DIR=env["MLXCEL_CACHE_DIR"] + "-run")
    got = mx(e2, "run", "acme/smol", *args)  # (a chat turn: its own output)
    assert got.returncode == 0 and "downloaded" in got.stderr and got.stdout.strip(), got.stderr
    before = hub.stats()
    off = mx(dict(e2, HF_HUB_OFFLINE="1"), "generate", "-m", "acme/smol", *args)
    assert off.returncode == 0 and off.stdout == ref.stdout, off.stderr
    assert hub.stats() == before


def test_serve_downloads_a_missing_repo_id(env, hub):
    from server_util import Server
    srv = Server("-m", "acme/smol", "--hf-token", "hf_not_shown_anywhere", env=env)
    try:
        with urllib.request.urlopen(srv.url + "/v1/models", timeout=30) as r:
            models = json.loads(r.read())
        assert any("acme/smol" in m["id"] for m in models["data"]), models
    finally:
        srv.stop()
    text = "".join(srv.lines)
    assert "downloaded" in text and "hf_not_shown_anywhere" not in text
    assert store_entry(env, "acme/smol").is_dir()


def test_offline_refuses_without_requests(env, hub):
    before = hub.stats()
    for extra in ({"HF_HUB_OFFLINE": "1"},):
        r = mx(dict(env, **extra), "generate", "-m", "acme/tiny", "-p", "x", "-n", "1")
        assert_clean_error(r, "offline")
    r = mx(env, "serve", "-m", "acme/tiny", "--offline", "--port", "0")
    assert r.returncode != 0 and "offline" in r.stderr and "listening" not in r.stderr.lower()
    r = mx(dict(env, HF_HUB_OFFLINE="1"), "download", "acme/tiny")
    assert_clean_error(r, "offline")
    assert hub.stats() == before


def test_offline_download_of_a_local_copy_prints_it(env, hub):
    """As huggingface-cli download: offline, a copy already on disk is the answer (no request);
    --force or --local-dir still need the network."""
    r = mx(env, "download", "acme/tiny")
    assert r.returncode == 0, r.stderr
    before = hub.stats()
    for off in ({"HF_HUB_OFFLINE": "1"}, {"LLAMA_ARG_OFFLINE": "1"}):
        r = mx(dict(env, **off), "download", "acme/tiny")
        assert r.returncode == 0 and r.stdout.strip() == str(store_entry(env, "acme/tiny")), r.stderr
        assert "offline" in r.stderr
    assert_clean_error(mx(dict(env, HF_HUB_OFFLINE="1"), "download", "acme/tiny", "--force"), "offline")
    assert hub.stats() == before


def test_force_fetches_again_and_token_from_either_variable(env, hub):
    r = mx(env, "download", "acme/tiny")
    assert r.returncode == 0, r.stderr
    before = hub.stats().get("cdn", 0)
    r = mx(env, "download", "acme/tiny")
    assert r.returncode == 0 and "up to date" in r.stderr, r.stderr
    assert hub.stats().get("cdn", 0) == before
    r = mx(env, "download", "acme/tiny", "--force")
    assert r.returncode == 0 and "downloaded" in r.stderr, r.stderr
    assert hub.stats().get("cdn", 0) > before
    assert_tree_equal(store_entry(env, "acme/tiny"), TINY)
    # a private repository: HUGGING_FACE_HUB_TOKEN when HF_TOKEN is unset; --models-dir places the entry
    r = mx(dict(env, HUGGING_FACE_HUB_TOKEN=TOKEN), "download", "acme/private", "--models-dir", str(Path(env["HOME"]) / "store"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(Path(env["HOME"]) / "store" / "acme" / "private")
    assert_tree_equal(r.stdout.strip(), TINY)


def test_revision_tag_and_commit(env):
    r = mx(env, "download", "acme/tiny", "--revision", "v1")
    assert r.returncode == 0, r.stderr
    repo = hub_repo(env, "acme/tiny")
    commit = (repo / "refs" / "v1").read_text()
    assert r.stdout.strip() == str(repo / "snapshots" / commit)
    assert (repo / "snapshots" / commit / "config.json").read_bytes() == b'{"v": 1}\n'
    assert not store_entry(env, "acme/tiny").exists()  # the store keeps main only
    r = mx(env, "download", "acme/tiny", "--revision", commit)
    assert r.returncode == 0 and "up to date" in r.stderr, r.stderr
    assert_clean_error(mx(env, "download", "acme/tiny", "--revision", "nope"), "revision 'nope' not found")


def test_local_dir_include_exclude(env, tmp_path):
    d = tmp_path / "local"
    r = mx(env, "download", "acme/tiny", "--local-dir", str(d), "--exclude", "*.safetensors", "--include", "*.json")
    assert r.returncode == 0, r.stderr
    files = sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file() and ".cache" not in p.parts)
    assert files == ["config.json", "tokenizer.json"]
    assert not (d / "config.json").is_symlink()
    # huggingface_hub's metadata: it sees the local dir as up to date
    meta = (d / ".cache" / "huggingface" / "download" / "config.json.metadata").read_text().splitlines()
    assert len(meta[0]) == 40 and meta[1] == hashlib.sha1(b"blob %d\0" % len(TINY["config.json"]) + TINY["config.json"]).hexdigest()
    r = mx(env, "download", "acme/tiny", "--local-dir", str(d))
    assert r.returncode == 0, r.stderr
    assert_tree_equal(d, TINY)
    assert not hub_repo(env, "acme/tiny").exists()  # --local-dir bypasses the cache
    assert_clean_error(mx(env, "download", "acme/tiny", "--include", "*.nothing"), "no file")


def test_progress_bars_on_a_terminal(env):
    """On a terminal: a bar per file in flight and one in total (redrawn in place); quiet lines
    otherwise (the other tests read those)."""
    import pty
    import select
    pid, fd = pty.fork()
    if pid == 0:  # the child: stderr is the terminal, stdout too
        e = dict(env, TERM="xterm")
        os.execve(mlxcel_bin(), [mlxcel_bin(), "download", "acme/tiny"], e)
    out = b""
    deadline = time.time() + 120
    while time.time() < deadline:
        r, _, _ = select.select([fd], [], [], 1.0)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    _, status = os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    assert os.WEXITSTATUS(status) == 0, text
    assert "\x1b[2K" in text  # bars redrawn in place (erase line), not appended
    assert "100%" in text and "acme/tiny" in text and "files" in text, text[-2000:]
    assert str(store_entry(env, "acme/tiny")) in text


def test_many_files_in_parallel(env):
    r = mx(env, "download", "acme/many", "--max-workers", "8")
    assert r.returncode == 0, r.stderr
    entry = store_entry(env, "acme/many")
    assert len(list((entry / "shard").iterdir())) == 40
    assert (entry / "shard" / "007.json").read_bytes() == det_bytes(107, "m7")


# ---- one cache with huggingface_hub ------------------------------------------------------------


def test_hf_then_mlxcel_shares_the_cache(env, hub):
    r = hf(env, "print(h.snapshot_download('acme/tiny'))")
    assert r.returncode == 0, r.stderr
    blobs = sorted(p.name for p in (hub_repo(env, "acme/tiny") / "blobs").iterdir())
    before = hub.stats()
    r = mx(env, "download", "acme/tiny")
    assert r.returncode == 0, r.stderr
    after = hub.stats()
    assert after.get("resolve-GET", 0) == before.get("resolve-GET", 0) and after.get("cdn", 0) == before.get("cdn", 0)
    assert sorted(p.name for p in (hub_repo(env, "acme/tiny") / "blobs").iterdir()) == blobs
    assert_tree_equal(store_entry(env, "acme/tiny"), TINY)
    scan_clean(env)
    # rm takes the store entry but leaves huggingface_hub's snapshot
    r = mx(env, "rm", "-y", "acme/tiny")
    assert r.returncode == 0 and "stays" in r.stderr, r.stderr
    assert_tree_equal(Path(hf(env, "print(h.snapshot_download('acme/tiny', local_files_only=True))").stdout.strip()), TINY)


def test_mlxcel_then_hf_shares_the_cache(env, hub):
    r = mx(env, "download", "acme/tiny")
    assert r.returncode == 0, r.stderr
    blobs = sorted(p.name for p in (hub_repo(env, "acme/tiny") / "blobs").iterdir())
    before = hub.stats()
    r = hf(env, "print(h.snapshot_download('acme/tiny'))")
    assert r.returncode == 0, r.stderr
    after = hub.stats()
    assert after.get("resolve-GET", 0) == before.get("resolve-GET", 0) and after.get("cdn", 0) == before.get("cdn", 0)
    assert sorted(p.name for p in (hub_repo(env, "acme/tiny") / "blobs").iterdir()) == blobs
    repos = scan_clean(env)
    assert repos["acme/tiny"][0] == sum(len(v) for v in TINY.values())
    # list shows the store entry with its size; rm deletes the snapshot this download made
    r = mx(env, "list", "--json")
    rows = {x["repo_id"]: x for x in json.loads(r.stdout)}
    assert rows["acme/tiny"]["size_bytes"] == sum(len(v) for v in TINY.values()) + len(
        (store_entry(env, "acme/tiny") / ".mlxcel-download.json").read_bytes())
    r = mx(env, "rm", "-y", "acme/tiny")
    assert r.returncode == 0, r.stderr
    assert not hub_repo(env, "acme/tiny").exists() and not store_entry(env, "acme/tiny").exists()
    assert scan_clean(env) == {}


def test_list_shows_hf_cache_repos(env):
    r = hf(env, "print(h.snapshot_download('acme/many'))")
    assert r.returncode == 0, r.stderr
    r = mx(env, "list", "--json")
    rows = {x["repo_id"]: x for x in json.loads(r.stdout)}
    assert rows["acme/many"]["source"] == "hf-cache"
    assert rows["acme/many"]["size_bytes"] == sum(100 + i for i in range(40))
    r = mx(env, "list")
    assert "Hugging Face cache" in r.stdout and "acme/many" in r.stdout
    assert_clean_error(mx(env, "rm", "-y", "acme/many"), "only in the Hugging Face cache")


# ---- answers of the Hub ------------------------------------------------------------------------


def test_auth_and_error_answers(env):
    assert_clean_error(mx(env, "download", "acme/private"), "acme/private", "not found", "401", "--token")
    r = mx(env, "download", "acme/private", "--token", TOKEN)
    assert r.returncode == 0, r.stderr
    r = mx(dict(env, HF_TOKEN=TOKEN), "download", "acme/gated")
    assert r.returncode == 0, r.stderr
    assert_clean_error(mx(env, "download", "acme/gated"), "gated", "401")
    assert_clean_error(mx(env, "download", "acme/gated", "--token", "hf_wrong"), "gated", "403")
    assert_clean_error(mx(env, "download", "acme/nothing-here"), "not found", "401", "--token")
    assert_clean_error(mx(env, "download", "acme/nothing-here", "--token", TOKEN), "not found", "404")
    assert_clean_error(mx(env, "download", "acme/limited"), "rate-limited", "429", "retry after 7 s")
    assert_clean_error(mx(env, "download", "not a repo"), "repo")
    assert_clean_error(mx(dict(env, HF_ENDPOINT="http://127.0.0.1:9"), "download", "acme/tiny"), "cannot reach")
    # the token never shows
    r = mx(env, "download", "acme/private", "--token", "hf_secret_value_x")
    assert "hf_secret_value_x" not in r.stderr + r.stdout


def test_corrupt_blob_refetched_or_refused(env, hub):
    r = mx(env, "download", "acme/flaky")
    assert r.returncode == 0, r.stderr
    assert_tree_equal(store_entry(env, "acme/flaky"), TINY)
    r = mx(env, "download", "acme/broken", "--quiet")
    assert_clean_error(r, "does not match its digest")
    repo = hub_repo(env, "acme/broken")
    bad = hashlib.sha256(TINY["model.safetensors"]).hexdigest()
    assert not (repo / "blobs" / bad).exists() and not (repo / "snapshots").exists()
    assert not store_entry(env, "acme/broken").exists()


def test_tls_verified_with_extra_ca(env, tmp_path, hub):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    tls = Hub(hub.root, tls=(str(cert), str(key)))
    try:
        e = dict(env, HF_ENDPOINT=tls.url)
        assert_clean_error(mx(e, "download", "acme/tiny"), "cannot reach", "certificate")
        r = mx(dict(e, MLXCEL_EXTRA_CA_CERTS=str(cert)), "download", "acme/tiny")
        assert r.returncode == 0, r.stderr
        assert_tree_equal(store_entry(env, "acme/tiny"), TINY)
        assert_clean_error(mx(dict(e, MLXCEL_EXTRA_CA_CERTS=str(tmp_path / "none.pem")), "download", "acme/tiny"),
                           "MLXCEL_EXTRA_CA_CERTS")
    finally:
        tls.stop()


def test_server_binary_download_subcommand(env):
    server = os.path.join(os.path.dirname(mlxcel_bin()), "mlxcel-server")
    r = subprocess.run([server, "download", "acme/tiny", "--quiet"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.strip() == str(store_entry(env, "acme/tiny"))
    for flag in ("--help", "-h", "--usage"):
        r = subprocess.run([server, "download", flag], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 0 and "--local-dir" in r.stdout, (flag, r.stderr)


# ---- fault trials ------------------------------------------------------------------------------


def test_interrupted_downloads_resume_byte_identical(tmp_path, env):
    """Kills a download at random points (10 trials); each next run resumes and ends byte-identical,
    and snapshots/ never holds a file that is not complete."""
    root = tmp_path / "slowrepos"
    big = det_bytes(6_000_000, "resume")
    files = {"config.json": b"{}\n", "weights.safetensors": big, "extra.bin": det_bytes(1_500_000, "x")}
    make_repo(root, "acme/slow", files)
    slow = Hub(str(root), throttle=12_000_000)  # ~0.6 s for the whole repo
    rng = random.Random(1234)
    total_kills = 0
    try:
        e = dict(env, HF_ENDPOINT=slow.url)
        repo = hub_repo(e, "acme/slow")
        for trial in range(10):
            shutil.rmtree(e["HF_HUB_CACHE"], ignore_errors=True)
            shutil.rmtree(e["MLXCEL_CACHE_DIR"], ignore_errors=True)
            kills = 0
            for attempt in range(20):
                p = subprocess.Popen([mlxcel_bin(), "download", "acme/slow", "--quiet"], env=e,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                try:
                    p.wait(timeout=rng.uniform(0.05, 0.5) if attempt < 3 else 120)
                except subprocess.TimeoutExpired:
                    p.send_signal(signal.SIGKILL)
                    p.wait()
                    kills += 1
                    # never a partial or wrong file reachable from snapshots/
                    for snap in (repo / "snapshots").iterdir() if (repo / "snapshots").exists() else []:
                        for link in snap.rglob("*"):
                            if link.is_symlink():
                                assert link.read_bytes() == files[str(link.relative_to(snap))]
                    continue
                assert p.returncode == 0, p.stderr.read()
                break
            assert kills >= 1, "the download finished before any kill; slow the server further"
            total_kills += kills
            assert_tree_equal(store_entry(e, "acme/slow"), files)
            assert not list((repo / "blobs").glob("*.incomplete"))
        st = slow.stats()
        assert st.get("cdn", 0) > 20  # interrupted transfers were retried many times
        assert st.get("resumed-GET", 0) >= 10  # ... from where they stopped (HTTP Range), not from byte 0
        print(f"resume trials: 10, kills: {total_kills}, CDN transfers: {st.get('cdn', 0)}, resumed with a Range: {st.get('resumed-GET', 0)}")
    finally:
        slow.stop()


def test_full_disk_one_error_no_partial_snapshot(tmp_path, env):
    cache = tmp_path / "small"
    cache.mkdir()
    script = (f"mount -t tmpfs -o size=2m tmpfs {cache} && "
              f"{mlxcel_bin()} download acme/tiny; echo rc=$?; find {cache} -path '*snapshots*' | wc -l")
    r = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=dict(env, HF_HUB_CACHE=str(cache)),
                       timeout=120)
    assert "rc=1" in r.stdout, (r.stdout, r.stderr)
    err = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert len(err) == 1 and "disk space" in err[0] and "needs" in err[0], r.stderr
    assert r.stdout.strip().splitlines()[-1] == "0"  # no snapshot directory at all


def test_disk_full_while_writing(tmp_path, env):
    """The size check passes (the server understates the size) and the writes run out of space:
    one clear error, the partial blob removed, no snapshot."""
    cache = tmp_path / "small"
    cache.mkdir()
    o, n = "acme", "liar"
    script = (f"mount -t tmpfs -o size=2m tmpfs {cache} && "
              f"{mlxcel_bin()} download {o}/{n} --quiet; echo rc=$?; "
              f"find {cache} -path '*snapshots*' | wc -l; find {cache}/models--{o}--{n}/blobs -name '*.incomplete' | wc -l")
    r = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=dict(env, HF_HUB_CACHE=str(cache)),
                       timeout=120)
    assert "rc=1" in r.stdout, (r.stdout, r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "no space left" in lines[0].lower(), r.stderr
    assert r.stdout.strip().splitlines()[-2:] == ["0", "0"], r.stdout


def test_concurrent_downloads_one_consistent_copy(env, hub):
    """20 downloads of one repo at once, 10 by mlxcel and 10 by huggingface_hub, into one cache."""
    procs = []
    for i in range(10):
        procs.append(subprocess.Popen([mlxcel_bin(), "download", "acme/tiny", "--quiet"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        procs.append(subprocess.Popen([sys.executable, "-c", "import huggingface_hub as h; h.snapshot_download('acme/tiny')"],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    repo = hub_repo(env, "acme/tiny")
    blobs = [p for p in (repo / "blobs").iterdir()]
    assert len(blobs) == len(TINY), [b.name for b in blobs]
    for b in blobs:
        data = b.read_bytes()
        assert b.name in (hashlib.sha256(data).hexdigest(), hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest())
    assert_tree_equal(store_entry(env, "acme/tiny"), TINY)
    assert len(list((repo / "snapshots").iterdir())) == 1
    scan_clean(env)
