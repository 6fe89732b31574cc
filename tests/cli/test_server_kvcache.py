"""`mlxcel serve`'s paged KV cache against a live process (SmolLM2): the shared block pool, the
cross-slot prompt cache (block-hash chains, prompt_cache_key partitions, /v1/cache/stats block
counts), --kv-cache-budget admission (a prompt larger than the pool is refused with 503, requests
that fit wait in the queue) and --enable-preemption (a preempted request recomputes and answers
exactly what it answers alone). Every comparison is against the same request run with nothing
cached or nothing competing (greedy decoding; the kernels are batch-invariant, so cached KV blocks
hold the very bits a fresh prefill computes)."""
import threading
import time

import pytest
import requests

from conftest import assert_clean_error, run
from server_util import SMOL_REPO, Server

# ~90 tokens: two full 32-token blocks and a partial one
LONG = ("The lighthouse keepers of the northern coast kept a log of every ship that passed, every storm "
        "that broke against the rocks and every lamp they trimmed through the long winter nights. ") * 2

# one SmolLM2 KV block: 30 layers x 32 positions x 192 (3 KV heads x 64) x f16 K and V
BLOCK_BYTES = 30 * 32 * 192 * 2 * 2


def completion(s, prompt, n=8, **kw):
    body = {"prompt": prompt, "n_predict": n, "temperature": 0}
    body.update(kw)
    r = requests.post(s.url + "/completion", json=body, timeout=300)
    return r


def n_tokens(s, text):
    return len(requests.post(s.url + "/tokenize", json={"content": text}).json()["tokens"])


def stream_until_first_token(s, prompt, n, out):
    """Starts a streaming completion in a thread; returns once its first token arrived."""
    got = threading.Event()

    def go():
        with requests.post(s.url + "/completion", json={"prompt": prompt, "n_predict": n, "temperature": 0, "stream": True,
                                                        "ignore_eos": True}, stream=True, timeout=300) as r:
            for line in r.iter_lines():
                if line.startswith(b"data: "):
                    got.set()
            out.append(r.status_code)
        got.set()

    t = threading.Thread(target=go)
    t.start()
    assert got.wait(120)
    return t


def test_a_request_on_another_slot_reuses_the_cached_prefix():
    s = Server("--parallel", "2", "--ctx-size", "2048")
    try:
        a = completion(s, LONG).json()
        assert a["timings"]["cache_n"] == 0
        # a second request sharing only the first words takes the same slot (its own prefix) and
        # keeps it busy; the follow-up then has to land on the OTHER slot
        busy = []
        t = stream_until_first_token(s, LONG[:20] + " and then something else entirely.", 200, busy)
        b = completion(s, LONG + "What did they write?").json()
        t.join()
        assert busy == [200]
        assert b["id_slot"] != a["id_slot"]
        n_long = n_tokens(s, LONG)
        # the full blocks of the first prompt came from the pool's block cache
        assert b["timings"]["cache_n"] == (n_long // 32) * 32 and b["timings"]["cache_n"] >= 64
        assert b["timings"]["prompt_n"] + b["timings"]["cache_n"] == b["tokens_evaluated"]
        st = requests.get(s.url + "/v1/cache/stats").json()
        assert st["blocks"]["hit_tokens"] == b["timings"]["cache_n"]
        assert st["blocks"]["block_tokens"] == 32 and st["blocks"]["block_bytes"] == BLOCK_BYTES
        assert st["blocks"]["total"] >= 2 * 2048 // 32  # auto: both slots' contexts plus the cache
        assert st["blocks"]["cached"] >= 2 and st["blocks"]["used"] + st["blocks"]["free"] == st["blocks"]["total"]
        # the same answer as with nothing cached
        c = completion(s, LONG + "What did they write?", cache_prompt=False).json()
        assert c["timings"]["cache_n"] == 0
        assert c["content"] == b["content"] and c["tokens_predicted"] == b["tokens_predicted"]
    finally:
        assert s.stop() == 0


def test_prompt_cache_key_partitions_the_cache():
    s = Server("--parallel", "2", "--ctx-size", "2048")
    try:
        a = completion(s, LONG, prompt_cache_key="alice").json()
        assert a["timings"]["cache_n"] == 0
        bob = completion(s, LONG + "More?", prompt_cache_key="bob").json()
        assert bob["timings"]["cache_n"] == 0  # alice's blocks are not bob's, even on alice's slot
        alice = completion(s, LONG + "More?", prompt_cache_key="alice").json()
        assert alice["timings"]["cache_n"] >= 64
        assert alice["content"] == bob["content"]
        r = completion(s, "Hi", prompt_cache_key=5)
        assert r.status_code == 400 and "prompt_cache_key" in r.json()["error"]["message"]
    finally:
        assert s.stop() == 0


def metric(s, name):
    for line in requests.get(s.url + "/metrics").text.splitlines():
        if line.startswith("llamacpp:" + name + " "):
            return float(line.split()[1])
    raise AssertionError(name)


def test_budget_smaller_than_the_prompt_is_refused_and_others_queue():
    # 4 blocks = 128 positions for the whole server
    s = Server("--parallel", "2", "--ctx-size", "2048", "--kv-cache-budget", str(4 * BLOCK_BYTES + 100), "--metrics")
    try:
        st = requests.get(s.url + "/v1/cache/stats").json()
        assert st["blocks"]["total"] == 4
        n_long = n_tokens(s, LONG)
        assert 64 < n_long < 96  # 3 blocks with the first generated token
        r = completion(s, LONG + LONG)  # more than the pool holds: refused, not queued forever
        assert r.status_code == 503 and "kv-cache-budget" in r.json()["error"]["message"]
        # A grows to ~4 blocks; B needs 3 for its prompt alone, so it waits in the queue until A
        # is done (a slot is free all along), then both answer what they answer alone
        pa, pb = LONG, "In the harbour town, " + LONG
        alone = [completion(s, p, n=30, ignore_eos=True, cache_prompt=False).json()["content"] for p in (pa, pb)]
        out, seen_deferred = {}, []

        def go(k, p):
            out[k] = completion(s, p, n=30, ignore_eos=True, cache_prompt=False)

        ta = threading.Thread(target=go, args=("a", pa))
        ta.start()
        while metric(s, "requests_processing") < 1:
            time.sleep(0.01)
        tb = threading.Thread(target=go, args=("b", pb))
        tb.start()
        while ta.is_alive():
            seen_deferred.append(metric(s, "requests_deferred"))
            time.sleep(0.02)
        ta.join()
        tb.join()
        assert 1.0 in seen_deferred
        assert out["a"].status_code == 200 and out["b"].status_code == 200
        assert [out["a"].json()["content"], out["b"].json()["content"]] == alone
    finally:
        assert s.stop() == 0


def alone_and_together(s, prompts, stagger=0.0, between=None):
    """Each prompt alone (one at a time, so nothing competes for blocks), then all at once
    (started `stagger` seconds apart): every concurrent request succeeds with the text it got
    alone. `between`, when given, must hold after the lone runs."""
    alone = [completion(s, p, n=56, ignore_eos=True, cache_prompt=False).json()["content"] for p in prompts]
    if between:
        assert between()
    out = {}

    def go(k, p):
        out[k] = completion(s, p, n=56, ignore_eos=True, cache_prompt=False)

    ts = [threading.Thread(target=go, args=(k, p)) for k, p in enumerate(prompts)]
    for t in ts:
        t.start()
        time.sleep(stagger)
    for t in ts:
        t.join()
    assert [out[k].status_code for k in range(len(prompts))] == [200] * len(prompts)
    assert [out[k].json()["content"] for k in range(len(prompts))] == alone


def test_dry_pool_without_preemption_waits_and_keeps_outputs():
    # both requests fit at admission, then outgrow a 5-block pool together (3 blocks each): the
    # one that cannot get its third block waits with its token pending until the other is done
    prompts = ["Tell a short story about a fox who learns to read, with a happy ending.",
               "Explain how a steam engine works to a curious ten year old child."]
    s = Server("--parallel", "2", "--ctx-size", "1024", "--kv-cache-budget", str(5 * BLOCK_BYTES), "--kv-admission-watermark", "0")
    try:
        alone_and_together(s, prompts)
        assert requests.get(s.url + "/v1/cache/stats").json()["blocks"]["preemptions"] == 0
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("policy", ["longest-first", "lowest-priority"])
def test_preemption_keeps_outputs_identical(policy):
    # 4 blocks for two requests that each grow to ~70 positions (3 blocks): the pool runs dry
    # mid-decode and one of them is preempted, recomputed (from what the cache still holds) and
    # continued
    prompts = ["Tell a short story about a fox who learns to read, with a happy ending.",
               "Explain how a steam engine works to a curious ten year old child."]
    s = Server("--parallel", "2", "--ctx-size", "1024", "--kv-cache-budget", str(4 * BLOCK_BYTES),
               "--kv-admission-watermark", "0", "--enable-preemption", "--preemption-policy", policy)
    try:
        alone_and_together(s, prompts, stagger=0.05,
                           between=lambda: requests.get(s.url + "/v1/cache/stats").json()["blocks"]["preemptions"] == 0)
        assert requests.get(s.url + "/v1/cache/stats").json()["blocks"]["preemptions"] >= 1
    finally:
        assert s.stop() == 0


# one SmolLM2 KV block under --kv-bits 4 --kv-quant-scheme turboquant: turbo4 K (6 blocks of 32
# values of 18 bytes a row) in the first 29 layers and fp16 K (192 values of 2 bytes) in the last
# (--kv-skip-last-layer, default on); turbo4 V in the middle 26 layers, fp16 V in the first and last
# 2 (--turbo-boundary-v's default)
BLOCK_BYTES_TURBO4 = 32 * (29 * 6 * 18 + 192 * 2 + 26 * 6 * 18 + 4 * 192 * 2)
# ... without --kv-skip-last-layer: turbo4 K in all 30
BLOCK_BYTES_TURBO4_ALL_K = 32 * (30 * 6 * 18 + 26 * 6 * 18 + 4 * 192 * 2)
# ... --kv-bits 8 (uniform int8: a byte a value and an f32 scale per --kv-group-size values, 64 by
# default) in 29 layers, fp16 K and V in the last
BLOCK_BYTES_INT8_G64 = 32 * (29 * 2 * (192 + 3 * 4) + 2 * 192 * 2)


def cached_prompt_answers_as_fresh(s, block_bytes):
    """The pool's blocks are block_bytes each, and a prompt served from cached blocks answers what
    it answers with nothing cached (the cached blocks hold the bits a fresh prefill stores)."""
    assert requests.get(s.url + "/v1/cache/stats").json()["blocks"]["block_bytes"] == block_bytes
    a = completion(s, LONG, n=12).json()
    b = completion(s, LONG + "What did they write?", n=12).json()
    assert b["timings"]["cache_n"] >= 64
    c = completion(s, LONG + "What did they write?", n=12, cache_prompt=False).json()
    assert c["timings"]["cache_n"] == 0 and a["content"]
    assert c["content"] == b["content"] and c["tokens_predicted"] == b["tokens_predicted"]


def test_turboquant_cache_in_the_pool_and_prompt_cache():
    """--kv-bits 4 --kv-quant-scheme turboquant: the pool's blocks are turbo4 with fp16 boundary
    values (their bytes in /v1/cache/stats), and a prompt served from cached blocks answers what it
    answers with nothing cached (rotation and quantization are deterministic); --kv-bits 8 is int8."""
    s = Server("--parallel", "2", "--ctx-size", "2048", "--kv-bits", "4", "--kv-quant-scheme", "turboquant")
    try:
        cached_prompt_answers_as_fresh(s, BLOCK_BYTES_TURBO4)
    finally:
        assert s.stop() == 0
    for args, want in ((["--kv-bits", "8"], BLOCK_BYTES_INT8_G64),
                       (["--kv-bits", "8", "--kv-group-size", "32", "--kv-skip-last-layer=false"], 32 * 30 * 2 * (192 + 6 * 4)),
                       (["--kv-bits", "4", "--kv-quant-scheme", "turboquant", "--kv-skip-last-layer=false"], BLOCK_BYTES_TURBO4_ALL_K)):
        s = Server("--parallel", "1", "--ctx-size", "512", *args)
        try:
            assert requests.get(s.url + "/v1/cache/stats").json()["blocks"]["block_bytes"] == want, args
            assert completion(s, "Hello there", n=4).status_code == 200
        finally:
            assert s.stop() == 0


@pytest.mark.parametrize("args,needle", [
    (["--kv-cache-budget", "lots"], "--kv-cache-budget"),
    (["--kv-cache-budget", "-5"], "--kv-cache-budget"),
    (["--kv-admission-watermark", "0.7"], "--kv-admission-watermark"),
    (["--preemption-policy", "random"], "--preemption-policy"),
])
def test_bad_budget_flags_are_clean_startup_errors(args, needle):
    p = run("serve", "-m", SMOL_REPO, "--port", "0", *args, timeout=120)
    assert_clean_error(p, needle)


def test_budget_below_one_block_fails_at_load():
    # the block size is known once the model is loaded (the socket is open, the listening line not yet)
    p = run("serve", "-m", SMOL_REPO, "--port", "0", "--kv-cache-budget", "100", timeout=120)
    assert p.returncode > 0 and "Sanitizer" not in p.stderr
    last = [l for l in p.stderr.splitlines() if l.strip()][-1]
    assert last.startswith("error: ") and "smaller than one KV block" in last and "737280" in last


# one SmolLM2 KV block with q8_0 keys and q4_0 values: 30 layers x 32 positions x 6 blocks of 32
# values (3 KV heads x 64) x (34 + 18) bytes (ggml's block_q8_0 and block_q4_0)
BLOCK_BYTES_Q8_Q4 = 30 * 32 * 6 * (34 + 18)


def test_block_format_caches_in_the_pool_prompt_cache_and_preemption():
    """--cache-type-k q8_0 --cache-type-v q4_0: the pool's blocks hold those formats (their bytes
    in /v1/cache/stats), a prompt served from cached blocks answers what it answers with nothing
    cached, and a preempted request recomputes into the same answer it gives alone (the cached
    blocks hold the very bits a fresh prefill stores: quantization is deterministic)."""
    s = Server("--parallel", "2", "--ctx-size", "2048", "--cache-type-k", "q8_0", "--cache-type-v", "q4_0")
    try:
        cached_prompt_answers_as_fresh(s, BLOCK_BYTES_Q8_Q4)
    finally:
        assert s.stop() == 0
    prompts = ["Tell a short story about a fox who learns to read, with a happy ending.",
               "Explain how a steam engine works to a curious ten year old child."]
    s = Server("--parallel", "2", "--ctx-size", "1024", "--kv-cache-budget", str(4 * BLOCK_BYTES_Q8_Q4),
               "--kv-admission-watermark", "0", "--enable-preemption", "--cache-type-k", "q8_0", "--cache-type-v", "q4_0")
    try:
        alone_and_together(s, prompts, stagger=0.05,
                           between=lambda: requests.get(s.url + "/v1/cache/stats").json()["blocks"]["preemptions"] == 0)
        assert requests.get(s.url + "/v1/cache/stats").json()["blocks"]["preemptions"] >= 1
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("args,needle", [
    (["--cache-type-k", "bf16"], "--cache-type-k bf16"),
    (["--cache-type-v", "q3_0"], "--cache-type-v q3_0"),
    (["-ctk", "turbo5"], "--cache-type-k turbo5"),
    (["--kv-bits", "4"], "--kv-bits 4 with --kv-quant-scheme uniform"),
    (["--kv-bits", "8", "--kv-quant-scheme", "turboquant"], "--kv-bits 8 with --kv-quant-scheme turboquant"),
    (["--kv-quant-scheme", "lloyd"], "--kv-quant-scheme"),
    (["--kv-cache-mode", "fp16+q4_0"], "--kv-cache-mode fp16+q4_0"),
])
def test_bad_cache_types_are_clean_startup_errors(args, needle):
    p = run("serve", "-m", SMOL_REPO, "--port", "0", *args, timeout=120)
    assert_clean_error(p, needle)


def test_kv_group_size_not_dividing_the_heads_is_refused_at_load():
    # (checked when the model is known: after the "loading" line, the last line names it)
    p = run("serve", "-m", SMOL_REPO, "--port", "0", "--kv-bits", "8", "--kv-group-size", "48", timeout=120)
    assert p.returncode > 0 and "Sanitizer" not in p.stderr
    msg = [l for l in p.stderr.splitlines() if l.strip()][-1]
    assert msg == "error: an int8 KV group of 48 does not divide this model's heads (head_dim 64)", msg


def test_memory_limit_below_the_model_refuses_it_at_load():
    # MLXCEL_MEMORY_LIMIT is a cap the server checks at load: weights + KV for every slot's full
    # context (4 x 8192 tokens = 1024 blocks) + 20% headroom, the estimate named in the error
    p = run("serve", "-m", SMOL_REPO, "--port", "0", env={"MLXCEL_MEMORY_LIMIT": "50MB"}, timeout=120)
    assert p.returncode > 0 and "Sanitizer" not in p.stderr  # (the socket was open: the "loading" line came first)
    msg = [l for l in p.stderr.splitlines() if l.strip()][-1]
    assert msg.startswith("error: memory preflight") and "MLXCEL_MEMORY_LIMIT" in msg and "--force" in msg, msg
    kv_gib = 1024 * BLOCK_BYTES / 2**30
    assert "4 slots x 8192 tokens" in msg and f"KV {kv_gib:.3f} GiB" in msg and "exceeds the 0.047 GiB" in msg, msg
    # the same server on a budget it fits: 1 slot x 2048 tokens
    s = Server("--parallel", "1", "--ctx-size", "2048", env={"MLXCEL_MEMORY_LIMIT": "200MB"})
    try:
        assert completion(s, "Hi", n=2).status_code == 200
    finally:
        assert s.stop() == 0
    assert f"KV {64 * BLOCK_BYTES / 2**30:.3f} GiB" in "".join(s.lines) and ": fits" in "".join(s.lines)
    # --force only warns
    s = Server("--force", env={"MLXCEL_MEMORY_LIMIT": "50MB"})
    try:
        assert completion(s, "Hi", n=2).status_code == 200
    finally:
        assert s.stop() == 0
    assert "warning: memory preflight" in "".join(s.lines)
