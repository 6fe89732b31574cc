"""POST /infill, POST /slots/:id_slot?action=save|restore|erase, --sleep-idle-seconds and
--log-file of `mlxcel serve` (llama-server's semantics).

The /infill prompt is compared token for token with llama.cpp's own: tests/fixtures/infill/
infill_qwen3.json holds what llama-server's format_prompt_infill builds with libllama's tokenizer
and FIM detection (gen_infill_reference.cpp) on the Qwen3 vocabulary, which a tiny random-weight
Qwen3 checkpoint (tiny_checkpoint.py) carries here. The server does not report its prompt ids,
so the test reads them back through the slot's cache: after the infill request, a /completion
whose prompt is the reference ids reuses all of them but the last (which always runs) only when
the slot holds exactly those ids."""
import json
import os
from concurrent.futures import ThreadPoolExecutor
import subprocess
import time

import pytest
import requests

from conftest import ROOT, mlxcel_bin
from server_util import Server, metrics
from tiny_checkpoint import build_case_dir

FIX = os.path.join(ROOT, "tests", "fixtures", "infill")
TESTDATA = os.path.join(os.path.dirname(ROOT), "shared", "testdata")


def _qwen3_case():
    with open(os.path.join(ROOT, "tests", "fixtures", "checkpoint_json", "reference.json")) as f:
        cases = json.load(f)["cases"]
    return next(c for c in cases if c["tokenizer"] == "qwen3")


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("tiny-qwen3"))
    build_case_dir(d, _qwen3_case(), TESTDATA)
    return d


def _reference():
    with open(os.path.join(FIX, "infill_qwen3.json")) as f:
        return json.load(f)


def _infill_body(case, **kw):
    body = {"input_prefix": case["input_prefix"], "input_suffix": case["input_suffix"], "input_extra": case["input_extra"],
            "n_predict": 1, "temperature": 0, "cache_prompt": True}
    if case["prompt"]:
        body["prompt"] = case["prompt"]
    body.update(kw)
    return body


@pytest.mark.parametrize("group", [("simple", "extra_and_prompt"), ("truncated",), ("simple_spm", "extra_and_prompt_spm")])
def test_infill_prompt_ids_match_llama_server(qwen3_dir, group):
    ref = _reference()
    cases = [c for c in ref["cases"] if c["name"] in group]
    c0 = cases[0]
    srv = Server("-m", qwen3_dir, "-np", "1", "--ctx-size", str(c0["n_ctx"]), "--batch-size", str(c0["n_batch"]),
                 "-n", str(c0["n_predict"]), "--prompt-cache-min-prefix", "1000000", *(["--spm-infill"] if c0["spm"] else []))
    try:
        for case in cases:
            assert (case["n_ctx"], case["n_batch"], case["n_predict"]) == (c0["n_ctx"], c0["n_batch"], c0["n_predict"])
            r = requests.post(srv.url + "/infill", json=_infill_body(case), timeout=120)
            assert r.status_code == 200, r.text
            out = r.json()
            assert out["tokens_evaluated"] == len(case["ids"]), case["name"]
            det = requests.post(srv.url + "/detokenize", json={"tokens": case["ids"]}, timeout=30).json()["content"]
            assert out["prompt"] == det
            # the slot holds the infill prompt: the reference ids as a prompt reuse all but the last
            r = requests.post(srv.url + "/completion", json={"prompt": case["ids"], "n_predict": 1, "temperature": 0}, timeout=120)
            assert r.status_code == 200, r.text
            assert r.json()["timings"]["cache_n"] == len(case["ids"]) - 1, case["name"]
        # streaming answers too
        r = requests.post(srv.url + "/infill", json=_infill_body(cases[0], stream=True, n_predict=3), stream=True, timeout=120)
        assert r.status_code == 200
        events = [json.loads(l[6:]) for l in r.iter_lines(decode_unicode=True) if l and l.startswith("data: ")]
        assert events and events[-1]["stop"] is True
    finally:
        srv.stop()


def test_infill_validation(qwen3_dir):
    srv = Server("-m", qwen3_dir, "-np", "1", "--ctx-size", "2048")
    try:
        for body, needle in [({"input_suffix": "x"}, "input_prefix"), ({"input_prefix": "x"}, "input_suffix"),
                             ({"input_prefix": "", "input_suffix": "", "input_extra": "x"}, "input_extra"),
                             ({"input_prefix": "", "input_suffix": "", "input_extra": [{"filename": "a"}]}, "text"),
                             ({"input_prefix": "", "input_suffix": "", "prompt": 5}, "prompt")]:
            r = requests.post(srv.url + "/infill", json=body, timeout=30)
            assert r.status_code == 400 and needle in r.json()["error"]["message"], r.text
    finally:
        srv.stop()


def test_infill_refused_without_fim_tokens():
    # llama.cpp finds no FIM tokens in SmolLM2's vocabulary either (infill_smollm2.json: -1)
    with open(os.path.join(FIX, "infill_smollm2.json")) as f:
        assert json.load(f)["fim"]["pre"] == -1
    srv = Server("-np", "1", "--ctx-size", "2048")
    try:
        r = requests.post(srv.url + "/infill", json={"input_prefix": "def f(", "input_suffix": ")"}, timeout=30)
        assert r.status_code == 501, r.text
        msg = r.json()["error"]["message"]
        assert "Infill is not supported by this model" in msg
        assert "prefix token is missing" in msg and "suffix token is missing" in msg and "middle token is missing" in msg
    finally:
        srv.stop()


PROMPT = ("The history of the printing press begins in the fifteenth century, when Johannes Gutenberg "
          "combined movable metal type, oil-based ink and a screw press adapted from wine making. "
          "Within a few decades printing shops spread across Europe, books became cheaper, and ideas "
          "travelled faster than ever before. Summarise this in one sentence:")


def _complete(srv, **kw):
    body = {"prompt": PROMPT, "n_predict": 8, "temperature": 0, "cache_prompt": True}
    body.update(kw)
    r = requests.post(srv.url + "/completion", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def _slot(srv, action, filename=None, slot=0):
    return requests.post(f"{srv.url}/slots/{slot}?action={action}", json={} if filename is None else {"filename": filename}, timeout=60)


def test_slot_save_erase_restore_round_trip(tmp_path):
    # one slot and no cross-slot prompt cache: only the slot's own tokens can be reused
    srv = Server("-np", "1", "--ctx-size", "2048", "--slot-save-path", str(tmp_path), "--prompt-cache-min-prefix", "1000000")
    try:
        first = _complete(srv)
        n_prompt = first["timings"]["prompt_n"] + first["timings"]["cache_n"]
        assert n_prompt > 50
        r = _slot(srv, "save", "slot0.bin")
        assert r.status_code == 200, r.text
        saved = r.json()
        assert saved["id_slot"] == 0 and saved["filename"] == "slot0.bin" and saved["n_saved"] >= n_prompt
        assert saved["n_written"] == os.path.getsize(tmp_path / "slot0.bin")
        r = _slot(srv, "erase")
        assert r.status_code == 200 and r.json()["n_erased"] == saved["n_saved"], r.text
        # erased: the same prompt runs whole again
        again = _complete(srv)
        assert again["timings"]["cache_n"] == 0 and again["content"] == first["content"]
        assert _slot(srv, "erase").status_code == 200
        r = _slot(srv, "restore", "slot0.bin")
        assert r.status_code == 200, r.text
        assert r.json()["n_restored"] == saved["n_saved"] and r.json()["n_read"] == saved["n_written"]
        restored = _complete(srv)
        assert restored["content"] == first["content"]
        assert restored["timings"]["prompt_n"] < first["timings"]["prompt_n"]
        assert restored["timings"]["cache_n"] == n_prompt - 1
    finally:
        srv.stop()


def test_id_slot_pins_a_request_to_its_slot(tmp_path):
    """llama-server's id_slot: the request runs in that slot (modulo the slot count), waiting while
    it is busy; a slot restored from a file serves the request pinned to it from its cache."""
    srv = Server("-np", "2", "--ctx-size", "4096", "--slot-save-path", str(tmp_path), "--prompt-cache-min-prefix", "1000000")
    try:
        first = _complete(srv, id_slot=0)
        assert first["id_slot"] == 0
        n_prompt = first["timings"]["prompt_n"] + first["timings"]["cache_n"]
        assert _slot(srv, "save", "s.bin", slot=0).status_code == 200
        assert _slot(srv, "erase", slot=0).status_code == 200
        assert _slot(srv, "restore", "s.bin", slot=1).status_code == 200
        pinned = _complete(srv, id_slot=3)  # 3 % 2: slot 1, which holds the restored prompt
        assert pinned["id_slot"] == 1 and pinned["timings"]["cache_n"] == n_prompt - 1, pinned["timings"]
        assert pinned["content"] == first["content"]
        other = _complete(srv, id_slot=0)  # slot 0 was erased: the whole prompt runs (unpinned, slot 1's cache would serve it)
        assert other["id_slot"] == 0 and other["timings"]["cache_n"] == 0
        # two requests at once for slot 0: the second waits for it instead of taking free slot 1
        with ThreadPoolExecutor(2) as ex:
            both = list(ex.map(lambda _: _complete(srv, id_slot=0, n_predict=24, prompt=PROMPT + " Then once more:"), range(2)))
        assert [b["id_slot"] for b in both] == [0, 0]
        # a request waiting for its busy slot holds up nobody behind it: an unpinned one takes free
        # slot 1 and ends while slot 0 still runs the long one
        done = {}

        def timed(name, **kw):
            r = _complete(srv, **kw)
            done[name] = time.time()
            return r
        with ThreadPoolExecutor(3) as ex:
            long = ex.submit(timed, "long", id_slot=0, n_predict=400, ignore_eos=True)
            time.sleep(0.3)
            waiting = ex.submit(timed, "waiting", id_slot=0, n_predict=4)
            time.sleep(0.3)
            free = ex.submit(timed, "free", n_predict=4, prompt="Hello")
            assert [f.result()["id_slot"] for f in (long, waiting, free)] == [0, 0, 1]
        assert done["free"] < done["long"] < done["waiting"], done
        chat = requests.post(srv.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
                                                                     "id_slot": 1}, timeout=60)
        assert chat.status_code == 200, chat.text
        for bad in ("1", -2, 1.5):
            r = requests.post(srv.url + "/completion", json={"prompt": "x", "n_predict": 1, "id_slot": bad}, timeout=30)
            assert r.status_code == 400 and "'id_slot'" in r.json()["error"]["message"], r.text
    finally:
        srv.stop()


def test_slot_files_confined_and_checked(tmp_path):
    srv = Server("-np", "1", "--ctx-size", "2048", "--slot-save-path", str(tmp_path))
    try:
        _complete(srv, n_predict=2)
        for bad in ["../x.bin", "/etc/passwd", "a/b.bin", "..", ".hidden", "x" * 300, "", "a\\b"]:
            r = _slot(srv, "save", bad)
            assert r.status_code == 400 and r.json()["error"]["message"] == "Invalid filename", (bad, r.text)
            r = _slot(srv, "restore", bad)
            assert r.status_code == 400, (bad, r.text)
        assert os.listdir(tmp_path) == []
        assert _slot(srv, "save").status_code == 400  # no filename
        assert _slot(srv, "frobnicate", "x.bin").status_code == 400
        assert _slot(srv, "save", "x.bin", slot=7).status_code == 400  # no such slot
        r = requests.post(srv.url + "/slots/abc?action=erase", timeout=30)
        assert r.status_code == 400 and "Invalid slot ID" in r.text
        assert _slot(srv, "save", "good.bin").status_code == 200
        data = (tmp_path / "good.bin").read_bytes()
        # another model's file (the model name in the header differs), a corrupt one, a truncated one, garbage
        name_at = 8 + 4 + 4 + 8 * 10
        (tmp_path / "other.bin").write_bytes(data[:name_at] + bytes([data[name_at] ^ 1]) + data[name_at + 1:])
        (tmp_path / "corrupt.bin").write_bytes(data[:-20] + bytes([data[-20] ^ 0xFF]) + data[-19:])
        (tmp_path / "short.bin").write_bytes(data[:-100])
        (tmp_path / "junk.bin").write_bytes(b"hello world" * 10)
        for name, needle in [("other.bin", "another model"), ("corrupt.bin", "checksum"), ("short.bin", "truncated"),
                             ("junk.bin", "not a slot file"), ("missing.bin", "cannot open")]:
            r = _slot(srv, "restore", name)
            assert r.status_code == 400 and needle in r.json()["error"]["message"], (name, r.text)
        assert _slot(srv, "restore", "good.bin").status_code == 200
        assert _complete(srv, n_predict=2)["content"]  # still serving
    finally:
        srv.stop()


def test_slot_actions_refused_without_save_path():
    srv = Server("-np", "1", "--ctx-size", "2048")
    try:
        for action in ("save", "restore", "erase"):
            r = _slot(srv, action, "x.bin")
            assert r.status_code == 501 and "--slot-save-path" in r.json()["error"]["message"], r.text
    finally:
        srv.stop()


def test_slot_save_path_must_be_a_directory(tmp_path):
    p = subprocess.run([mlxcel_bin(), "serve", "-m", "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", "--port", "0", "--slot-save-path",
                        str(tmp_path / "nope")], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode != 0 and "--slot-save-path: not a directory" in p.stderr


def _rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_sleep_idle_releases_and_reloads():
    srv = Server("-np", "1", "--ctx-size", "2048", "--sleep-idle-seconds", "1", "--kv-cache-budget", "64000000")
    try:
        first = _complete(srv)
        stored = requests.post(srv.url + "/v1/responses", json={"input": "Hi", "max_output_tokens": 3, "temperature": 0}, timeout=120).json()
        props = requests.get(srv.url + "/props", timeout=30).json()
        assert props["is_sleeping"] is False
        rss_awake = _rss_kb(srv.proc.pid)
        deadline = time.time() + 120  # (a loaded machine under ASan: the engine thread may take a while to notice)
        while time.time() < deadline and not requests.get(srv.url + "/props", timeout=30).json()["is_sleeping"]:
            time.sleep(0.25)
        props = requests.get(srv.url + "/props", timeout=30).json()
        if props["is_sleeping"] is not True:  # (what kept it awake, for the report)
            slots = requests.get(srv.url + "/slots", timeout=30).text
            metrics = requests.get(srv.url + "/metrics", timeout=30).text
            raise AssertionError(f"not asleep after 120 s: slots {slots[:2000]} metrics {metrics[:2000]} log {''.join(srv.lines)[-3000:]}")
        assert props["total_slots"] == 1
        rss_asleep = _rss_kb(srv.proc.pid)
        # the ~90 MB of weights went (AddressSanitizer keeps freed memory in its quarantine)
        if "asan" not in mlxcel_bin():
            assert rss_asleep < rss_awake - 30000, (rss_awake, rss_asleep)
        assert requests.get(srv.url + "/health", timeout=30).status_code == 200
        # a stored response is read without waking the model
        got = requests.get(srv.url + "/v1/responses/" + stored["id"], timeout=30)
        assert got.status_code == 200 and got.json()["output"][0]["content"][0]["text"] == stored["output"][0]["content"][0]["text"]
        assert requests.get(srv.url + "/props", timeout=30).json()["is_sleeping"] is True
        # counting tokens wakes it (it needs the tokenizer), as llama-server's token-counting routes do
        n = requests.post(srv.url + "/v1/responses/input_tokens", json={"input": "Hello world"}, timeout=120)
        assert n.status_code == 200 and n.json()["input_tokens"] > 0, n.text
        assert requests.get(srv.url + "/props", timeout=30).json()["is_sleeping"] is False
        # the next request waits for the reload and answers as before
        again = _complete(srv)
        assert again["content"] == first["content"]
        assert requests.get(srv.url + "/props", timeout=30).json()["is_sleeping"] is False
    finally:
        srv.stop()
    log = "".join(srv.lines)
    assert "server is sleeping" in log and "reloaded after sleeping" in log


def test_metrics_go_on_across_sleep():
    """/metrics' counters are not reset when the model sleeps and reloads, a scrape does not wake
    it, and the throughput gauges cover the time since the previous scrape (llama-server's buckets)."""
    srv = Server("-np", "1", "--ctx-size", "2048", "--sleep-idle-seconds", "1", "--metrics")
    try:
        _complete(srv)
        m1 = metrics(srv)
        assert m1["tokens_predicted_total"] == 8 and m1["predicted_tokens_seconds"] > 0 and m1["prompt_tokens_seconds"] > 0, m1
        m2 = metrics(srv)  # nothing ran since the last scrape
        assert m2["predicted_tokens_seconds"] == 0 and m2["prompt_tokens_seconds"] == 0
        assert {k: v for k, v in m2.items() if k.endswith("_total")} == {k: v for k, v in m1.items() if k.endswith("_total")}
        deadline = time.time() + 120
        while time.time() < deadline and not requests.get(srv.url + "/props", timeout=30).json()["is_sleeping"]:
            time.sleep(0.25)
        asleep = metrics(srv)
        assert requests.get(srv.url + "/props", timeout=30).json()["is_sleeping"] is True  # the scrape did not wake it
        assert asleep == m2, (asleep, m2)
        _complete(srv, prompt="Once more:")  # reloads the model; the counters go on
        m3 = metrics(srv)
        assert m3["tokens_predicted_total"] == 16 and m3["prompt_tokens_total"] > m2["prompt_tokens_total"], m3
        assert m3["n_decode_total"] > m2["n_decode_total"] and m3["predicted_tokens_seconds"] > 0
    finally:
        srv.stop()


def test_log_file_receives_the_log(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("earlier line\n")
    proc = subprocess.Popen([mlxcel_bin(), "serve", "-m", "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", "--port", "0", "-np", "1",
                             "--ctx-size", "2048", "--log-file", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and "ready:" not in log.read_text():
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.2)
        text = log.read_text()
        assert text.startswith("earlier line\n")  # appended
        assert "listening on" in text and "ready:" in text
        url = text.split("listening on ")[1].split()[0]
        assert requests.get(url + "/health", timeout=30).status_code == 200
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "listening on" not in err  # the log went to the file instead of stderr
    assert "shutting down" in log.read_text()
