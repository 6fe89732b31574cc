"""`mlxcel serve` with the recurrent families (models/recurrent.h) against a live process: the
tiny transformers fixtures (tests/fixtures/decoders/{mamba2,lfm2}) with a 256-word WordLevel
tokenizer ("t0" .. "t255", so a text is its token ids) written here.

Truth: the fixtures' "decode" record (gen_decoder_fixtures.py record_decode): the 16 tokens
transformers' cached greedy generate() picks after the 40-token prompt. The server must answer
them for the prompt alone, for two requests decoded together in one batched step (each slot with
its own state), for a follow-up whose prompt extends the first turn (the slot keeps its state and
runs only the new tokens), for the same follow-up with nothing cached, and for the same prompt
again on another slot (the prompt cache's blocks with the state snapshot at their end); /slots
and /metrics report the state's bytes."""
import json
import os
import shutil
import threading

import pytest
import requests

from conftest import ROOT
from server_util import Server

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "decoders")


def fixture_with_tokenizer(tmp_path, name):
    d = tmp_path / name
    shutil.copytree(os.path.join(FIXTURES, name), d)
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": False},
        "model": {"type": "WordLevel", "vocab": {f"t{i}": i for i in range(256)}, "unk_token": "t0"},
    }
    (d / "tokenizer.json").write_text(json.dumps(tok))
    (d / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "t2"}))
    case = json.load(open(os.path.join(FIXTURES, name, "case.json")))["cases"][0]["decode"]
    return str(d), case


def text(ids):
    return " ".join(f"t{i}" for i in ids)


def completion(s, prompt, n=16, **kw):
    body = {"prompt": prompt, "n_predict": n, "temperature": 0}
    body.update(kw)
    r = requests.post(s.url + "/completion", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()


def ids_of(s, content):
    r = requests.post(s.url + "/tokenize", json={"content": content}, timeout=60)
    return r.json()["tokens"]


@pytest.mark.parametrize("name", ["mamba2", "lfm2"])
def test_recurrent_model_serves_transformers_greedy_tokens(tmp_path, name):
    model, case = fixture_with_tokenizer(tmp_path, name)
    prompt, want = case["prompt"], case["generated"]
    # (transformers' record runs past EOS, id 2; the server stops there and does not show it)
    shown = want[:want.index(2)] if 2 in want else want
    s = Server("-m", model, "--parallel", "2", "--ctx-size", "1024", "--slots", "--metrics")
    try:
        a = completion(s, text(prompt))
        assert ids_of(s, a["content"]) == shown
        # two together: one batched decode step over both slots, each on its own state
        out = [None, None]

        def go(i):
            out[i] = completion(s, text(prompt), cache_prompt=False)

        ts = [threading.Thread(target=go, args=(i,)) for i in range(2)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        assert [ids_of(s, o["content"]) for o in out] == [shown, shown]
        # a follow-up extending the first turn: the slot that ran it goes on from its state
        # (62 positions: the LFM2 fixture's context is 64)
        follow = prompt + want + [5, 99]
        b = completion(s, text(follow), n=4, id_slot=a["id_slot"])
        c = completion(s, text(follow), n=4, cache_prompt=False)
        assert b["content"] == c["content"]
        assert b["timings"]["cache_n"] > 0 and c["timings"]["cache_n"] == 0
        # the state's size: conv + scan state of every recurrent layer, f32, per slot
        slots = requests.get(s.url + "/slots").json()
        assert len(slots) == 2 and all(sl["recurrent_state_bytes"] > 0 for sl in slots)
        metrics = requests.get(s.url + "/metrics").text
        line = [ln for ln in metrics.splitlines() if ln.startswith("llamacpp:recurrent_state_bytes ")]
        assert line and float(line[0].split()[1]) == 2 * slots[0]["recurrent_state_bytes"]
    finally:
        assert s.stop() == 0


def test_kv_budget_counts_the_recurrent_state(tmp_path):
    """--kv-cache-budget pays for every slot's recurrent state first: a budget below the state of
    the slots is refused at start with a clear line, one just above it still serves."""
    model, case = fixture_with_tokenizer(tmp_path, "mamba2")
    cfg = json.load(open(os.path.join(model, "config.json")))
    inner = cfg["expand"] * cfg["hidden_size"]
    conv = inner + 2 * cfg["n_groups"] * cfg["state_size"]
    state = cfg["num_hidden_layers"] * ((cfg["conv_kernel"] - 1) * conv + inner * cfg["state_size"]) * 4
    from conftest import run
    p = run("serve", "-m", model, "--parallel", "2", "--ctx-size", "1024", "--kv-cache-budget", str(2 * state))
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode != 0 and len(errors) == 1 and "recurrent state of 2 slots" in errors[0], p.stderr
    s = Server("-m", model, "--parallel", "2", "--ctx-size", "1024", "--kv-cache-budget", str(2 * state + 4 * 1024 * 1024))
    try:
        a = completion(s, text(case["prompt"]), n=4)
        assert ids_of(s, a["content"]) == case["generated"][:4]
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("name", ["mamba2", "lfm2", "qwen3_next"])
def test_prompt_cache_state_snapshot_hit_equals_miss(tmp_path, name):
    """The prompt cache keeps the recurrent state at the prompt's last block boundary (position 32
    of the 40-token prompt) with the blocks before it: the same prompt on another slot, or back
    on the first slot after another conversation, adopts both and runs only the last 8 tokens,
    and answers what the uncached run answered (transformers' tokens)."""
    model, case = fixture_with_tokenizer(tmp_path, name)
    prompt, want = case["prompt"], case["generated"]
    shown = want[:want.index(2)] if 2 in want else want
    s = Server("-m", model, "--parallel", "2", "--ctx-size", "1024", "--metrics")
    try:
        a = completion(s, text(prompt), id_slot=0)
        assert a["timings"]["cache_n"] == 0 and ids_of(s, a["content"]) == shown
        b = completion(s, text(prompt), id_slot=1)
        assert b["timings"]["cache_n"] == 32 and b["content"] == a["content"]
        other = [(7 * i + 3) % 256 for i in range(40)]
        completion(s, text(other), n=4, id_slot=0)
        c = completion(s, text(prompt), id_slot=0)
        assert c["timings"]["cache_n"] == 32 and c["content"] == a["content"]
        # a prompt that leaves the cached prefix inside its first block shares nothing
        d = completion(s, text(prompt[:5] + [9] + prompt[6:]), n=4, id_slot=1)
        assert d["timings"]["cache_n"] == 0
        metrics = {ln.split()[0]: float(ln.split()[1]) for ln in requests.get(s.url + "/metrics").text.splitlines()
                   if ln.startswith("llamacpp:recurrent_state")}
        # two snapshots per slot are allocated; the 40-token prompts made two (prompt, other)
        assert metrics["llamacpp:recurrent_state_snapshot_bytes"] == 2 * metrics["llamacpp:recurrent_state_bytes"]
        assert metrics["llamacpp:recurrent_state_snapshots"] == 3
    finally:
        assert s.stop() == 0
