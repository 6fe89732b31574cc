"""`mlxcel serve` against a live process: the OpenAI Python SDK for chat / streaming /
completions / models / errors, llama-server's own routes, the same greedy tokens as
`mlxcel run -p`, and the failure behaviour of the issue (auth, 400s, 503 queue full, client
disconnect freeing the slot, garbage on the socket, SIGTERM)."""
import json
import math
import os
import signal
import socket
import threading
import time

import openai
import pytest
import requests

from conftest import ROOT, assert_clean_error, real_model_path, run
from server_util import SMOL_REPO, Server, openai_client as client

PROMPT = "List three prime numbers greater than 10."


@pytest.fixture(scope="module")
def srv():
    s = Server("--parallel", "2", "--ctx-size", "4096")
    yield s
    assert s.stop() == 0


def test_chat_matches_run_and_usage_matches_tokenizer(srv):
    c = client(srv)
    r = c.chat.completions.create(model="x", messages=[{"role": "user", "content": PROMPT}], temperature=0, max_tokens=16,
                                  extra_body={"cache_prompt": False})
    text = r.choices[0].message.content
    p = run("run", "-p", PROMPT, "-n", "16", "--temp", "0")
    assert p.returncode == 0, p.stderr
    assert text.rstrip("\n") == p.stdout.rstrip("\n")  # the same tokens from the CLI and the server
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 16
    # prompt_tokens is the count of our tokenizer over the rendered template
    prompt = requests.post(srv.url + "/apply-template", json={"messages": [{"role": "user", "content": PROMPT}]}).json()["prompt"]
    ids = requests.post(srv.url + "/tokenize", json={"content": prompt}).json()["tokens"]
    assert r.usage.prompt_tokens == len(ids)
    assert r.usage.total_tokens == len(ids) + 16
    # the completion's own text re-tokenizes to no more tokens than were generated
    assert len(requests.post(srv.url + "/tokenize", json={"content": text}).json()["tokens"]) <= 16


def test_chat_stream_equals_whole_response(srv):
    c = client(srv)
    msgs = [{"role": "user", "content": "Name a color."}]
    whole = c.chat.completions.create(model="x", messages=msgs, temperature=0, max_tokens=12).choices[0].message.content
    parts, usage, reasons = [], None, []
    for ch in c.chat.completions.create(model="x", messages=msgs, temperature=0, max_tokens=12, stream=True,
                                        stream_options={"include_usage": True}):
        if ch.usage:
            usage = ch.usage
        for choice in ch.choices:
            if choice.delta.content:
                parts.append(choice.delta.content)
            if choice.finish_reason:
                reasons.append(choice.finish_reason)
    assert "".join(parts) == whole
    assert reasons == ["length"]
    assert usage is not None and usage.completion_tokens == 12


def test_stop_string_never_leaks(srv):
    c = client(srv)
    msgs = [{"role": "user", "content": PROMPT}]
    nc = {"cache_prompt": False}
    full = c.chat.completions.create(model="x", messages=msgs, temperature=0, max_tokens=24, extra_body=nc).choices[0].message.content
    words = full.split()
    assert len(words) >= 4
    stop = words[2]
    cut = full[: full.index(stop)]
    r = c.chat.completions.create(model="x", messages=msgs, temperature=0, max_tokens=24, stop=[stop], extra_body=nc)
    assert r.choices[0].message.content == cut
    assert r.choices[0].finish_reason == "stop"
    streamed = "".join(ch.choices[0].delta.content or "" for ch in
                       c.chat.completions.create(model="x", messages=msgs, temperature=0, max_tokens=24, stop=stop, stream=True,
                                                 extra_body=nc)
                       if ch.choices)
    assert streamed == cut


def test_completion_prompt_mixes_ids_and_strings(srv):
    """llama-server's tokenize_mixed: an id list may carry strings, tokenized in place (no BOS
    after the start); a list of lists / strings is several prompts."""
    ids = lambda t: requests.post(srv.url + "/tokenize", json={"content": t}).json()["tokens"]
    head, tail = ids("The sea is"), ids(" wide and")
    assert ids("The sea is wide and") == head + tail  # so the two prompts below are the same tokens
    a = requests.post(srv.url + "/completion", json={"prompt": head + tail, "n_predict": 6, "temperature": 0}).json()
    b = requests.post(srv.url + "/completion", json={"prompt": head + [" wide and"], "n_predict": 6, "temperature": 0}).json()
    assert a["content"] == b["content"] and a["tokens_evaluated"] == b["tokens_evaluated"]
    many = requests.post(srv.url + "/completion", json={"prompt": [head + tail, "The sea is wide and"], "n_predict": 6,
                                                         "temperature": 0}).json()
    assert isinstance(many, list) and len(many) == 2 and many[0]["content"] == a["content"]
    bad = requests.post(srv.url + "/completion", json={"prompt": [1, {"x": 1}]})
    assert bad.status_code == 400 and "token ids" in bad.json()["error"]["message"]


def test_completions_and_models(srv):
    c = client(srv)
    r = c.completions.create(model="x", prompt="The capital of France is", temperature=0, max_tokens=6)
    ref = requests.post(srv.url + "/completion", json={"prompt": "The capital of France is", "n_predict": 6, "temperature": 0}).json()
    assert r.choices[0].text == ref["content"]
    assert len(ref["tokens"]) == 6 and ref["stop_type"] == "limit" and ref["tokens_predicted"] == 6
    models = c.models.list()
    assert [m.id for m in models.data] == [SMOL_REPO]


def test_logprobs_and_n(srv):
    c = client(srv)
    r = c.chat.completions.create(model="x", messages=[{"role": "user", "content": "Hi"}], temperature=0, max_tokens=4,
                                  logprobs=True, top_logprobs=3)
    lp = r.choices[0].logprobs.content
    assert len(lp) == 4
    for t in lp:  # greedy: the chosen token is the most likely one
        assert len(t.top_logprobs) == 3
        assert abs(t.logprob - t.top_logprobs[0].logprob) < 1e-6
        assert t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob >= t.top_logprobs[2].logprob
    r = c.chat.completions.create(model="x", messages=[{"role": "user", "content": "Hi"}], temperature=0, max_tokens=3, n=2)
    assert [ch.index for ch in r.choices] == [0, 1]
    assert r.choices[0].message.content == r.choices[1].message.content  # greedy
    assert r.usage.completion_tokens == 6


def test_prompt_cache_reuses_the_shared_prefix():
    s = Server("--parallel", "1", "--ctx-size", "1024")
    try:
        p1 = "The history of the lighthouse keepers of the northern coast is long. " * 3
        a = requests.post(s.url + "/completion", json={"prompt": p1, "n_predict": 4, "temperature": 0}).json()
        assert a["timings"]["cache_n"] == 0
        b = requests.post(s.url + "/completion", json={"prompt": p1 + "Tell me more.", "n_predict": 4, "temperature": 0}).json()
        n1 = len(requests.post(s.url + "/tokenize", json={"content": p1}).json()["tokens"])
        assert b["timings"]["cache_n"] >= n1 - 1  # only the new tokens were run
        assert b["timings"]["prompt_n"] + b["timings"]["cache_n"] == b["tokens_evaluated"]
        c = requests.post(s.url + "/completion", json={"prompt": p1 + "Tell me more.", "n_predict": 4, "temperature": 0,
                                                       "cache_prompt": False}).json()
        assert c["timings"]["cache_n"] == 0
        # a cached prefix changes nothing in the answer (the kernels are batch-invariant)
        assert c["content"] == b["content"]
        st = requests.get(s.url + "/v1/cache/stats").json()
        assert st["requests"] == 3 and st["hits"] == 1 and st["cached_tokens"] == b["timings"]["cache_n"]
    finally:
        assert s.stop() == 0


def test_requests_land_on_the_slot_holding_their_prefix():
    s = Server("--parallel", "3", "--ctx-size", "3072")
    try:
        base = "A long shared system prompt about ships, harbours and the tides of the northern sea. " * 3
        other = "Something unrelated entirely, about mountains and snow. " * 3
        for p in (base + "First question?", other + "x", base + "Second question?"):
            r = requests.post(s.url + "/completion", json={"prompt": p, "n_predict": 2, "temperature": 0}).json()
        assert r["timings"]["cache_n"] > 20  # the third found the first one's slot
    finally:
        assert s.stop() == 0


def test_llama_routes(srv):
    u = srv.url
    assert requests.get(u + "/health").json()["status"] == "ok"
    tok = requests.post(u + "/tokenize", json={"content": "Hello world", "with_pieces": True}).json()["tokens"]
    assert "".join(t["piece"] for t in tok) == "Hello world"
    ids = [t["id"] for t in tok]
    assert requests.post(u + "/detokenize", json={"tokens": ids}).json()["content"] == "Hello world"
    slots = requests.get(u + "/slots").json()
    assert len(slots) == 2 and all(s["n_ctx"] == 2048 for s in slots)  # --ctx-size 4096 over 2 slots
    props = requests.get(u + "/props").json()
    assert props["total_slots"] == 2 and "chat_template" in props
    # llama-server /completion streaming: content pieces, then a final object with stop true
    with requests.post(u + "/completion", json={"prompt": "Once upon a time", "n_predict": 5, "temperature": 0, "stream": True},
                       stream=True) as resp:
        events = [json.loads(l[6:]) for l in resp.iter_lines(decode_unicode=True) if l.startswith("data: ")]
    assert events[-1]["stop"] is True and events[-1]["tokens_predicted"] == 5
    whole = requests.post(u + "/completion", json={"prompt": "Once upon a time", "n_predict": 5, "temperature": 0}).json()
    assert "".join(e["content"] for e in events) == whole["content"]
    # an answered request's slot is idle when its client asks next (llama-server releases the slot
    # before the last event goes out; test_metrics_slots_idle_after_completion)
    for _ in range(5):
        requests.post(u + "/completion", json={"prompt": "I believe", "n_predict": 3, "temperature": 0})
        after = requests.get(u + "/slots").json()
        assert not any(s["is_processing"] for s in after)
        assert all(s["next_token"][0]["n_remain"] == -1 and s["next_token"][0]["n_decoded"] == 0 for s in after)
    assert requests.get(u + "/metrics").status_code == 501  # off without --metrics


def test_post_sampling_probs(srv):
    """llama-server's post_sampling_probs: with top_k 3 at temperature 1 the candidates after the
    chain are the 3 most likely tokens, so their probabilities are the pre-sampling ones (n_probs)
    renormalized over those 3; the same seed draws the same tokens either way."""
    base = {"prompt": "Today was the day. Today I would finally become a", "n_predict": 5, "n_probs": 3, "top_k": 3,
            "top_p": 1.0, "min_p": 0.0, "temperature": 1.0, "seed": 7}
    pre = requests.post(srv.url + "/completion", json=base).json()["completion_probabilities"]
    post = requests.post(srv.url + "/completion", json={**base, "post_sampling_probs": True, "backend_sampling": True}).json()
    post = post["completion_probabilities"]
    assert len(pre) == len(post) == 5
    for a, b in zip(pre, post):
        assert a["id"] == b["id"] and "prob" in b and "top_probs" in b and "logprob" not in b
        ids = [t["id"] for t in a["top_logprobs"]]
        assert [t["id"] for t in b["top_probs"]] == ids
        z = sum(math.exp(t["logprob"]) for t in a["top_logprobs"])
        for ta, tb in zip(a["top_logprobs"], b["top_probs"]):
            assert abs(tb["prob"] - math.exp(ta["logprob"]) / z) < 1e-4
        assert abs(sum(t["prob"] for t in b["top_probs"]) - 1.0) < 1e-4
        assert b["prob"] == next(t["prob"] for t in b["top_probs"] if t["id"] == b["id"])
    bad = requests.post(srv.url + "/completion", json={**base, "post_sampling_probs": "yes"})
    assert bad.status_code == 400 and "post_sampling_probs" in bad.json()["error"]["message"]


@pytest.mark.parametrize("body,needle", [
    ("{not json", "not valid JSON"),
    ('{"messages": "hi"}', "'messages'"),
    ('{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}', "'temperature'"),
    ('{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1.5}', "'max_tokens'"),
    ('{"messages": [{"role": "user", "content": "hi"}], "stop": [1]}', "'stop'"),
    ('{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}', "not supported"),
    ('[1, 2]', "JSON object"),
    ('{"messages": [{"role": "user", "content": "hi"}, {"role": "wizard", "content": "hi"}]}', "messages[1].role 'wizard'"),
    ('{"messages": [{"role": "User", "content": "hi"}]}', "'User'"),
])
def test_bad_requests_get_400(srv, body, needle):
    r = requests.post(srv.url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    e = r.json()["error"]
    assert needle in e["message"] and e["type"] == "invalid_request_error"


def test_unknown_role_is_400_on_every_chat_route_and_developer_is_system(srv):
    bad = {"messages": [{"role": "narrator", "content": "hi"}], "max_tokens": 2}
    for route in ("/v1/chat/completions", "/chat/completions", "/apply-template", "/v1/chat/completions/input_tokens"):
        r = requests.post(srv.url + route, json=bad)
        assert r.status_code == 400, (route, r.status_code, r.text)
        e = r.json()["error"]
        assert e["type"] == "invalid_request_error" and "'narrator'" in e["message"], (route, e)
    r = requests.post(srv.url + "/v1/messages", json={**bad, "model": "x"})
    assert r.status_code == 400 and "role" in r.json()["error"]["message"]
    # OpenAI's developer role reaches a template that does not know it as system (llama-server's
    # mapping): SmolLM2's template adds its default system prompt only when there is none
    msgs = [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    dev = requests.post(srv.url + "/apply-template", json={"messages": msgs}).json()["prompt"]
    sys_ = requests.post(srv.url + "/apply-template", json={"messages": [{**msgs[0], "role": "system"}, msgs[1]]}).json()["prompt"]
    assert dev == sys_ and "<|im_start|>system\nBe brief.<|im_end|>" in dev
    for role in ("system", "user", "assistant", "tool", "function"):
        ok = requests.post(srv.url + "/apply-template", json={"messages": [{"role": "user", "content": "q"}, {"role": role, "content": "x"}]})
        assert ok.status_code == 200, (role, ok.text)


@pytest.mark.parametrize("method,route,name", [
    ("POST", "/v1/images/generations", "/v1/images/generations"),
    ("POST", "/v1/images/edits", "/v1/images/edits"),
    ("POST", "/v1/audio/transcriptions", "/v1/audio/transcriptions"),
    ("GET", "/v1/realtime", "/v1/realtime"),
])
def test_unbuilt_spec_routes_are_501(srv, method, route, name):
    r = requests.request(method, srv.url + route, json={"prompt": "x"})
    assert r.status_code == 501, r.text
    assert r.json() == {"error": {"code": 501, "message": name + " is not implemented in this build", "type": "not_implemented_error"}}


@pytest.mark.parametrize("route", ["/nope", "/v1/nope", "/v1/responsesx", "/slots/", "/infill/x"])
def test_unknown_paths_are_404_json(srv, route):
    r = requests.post(srv.url + route, json={})
    assert r.status_code == 404
    assert r.json()["error"]["type"] == "not_found_error" and r.json()["error"]["code"] == 404


def test_listening_line_comes_after_the_load(srv):
    lines = [l for l in srv.lines if l.strip()]
    loading = next(i for i, l in enumerate(lines) if "answers 503 until it is ready" in l)
    listening = next(i for i, l in enumerate(lines) if "listening on" in l)
    assert loading < listening and "ready:" in lines[listening + 1], lines


@pytest.mark.parametrize("args,needle", [
    (["-m", "/nonexistent/model"], "/nonexistent/model"),
    (["--lora", "/nonexistent/adapter"], "/nonexistent/adapter"),
    (["--lora", "EMPTY_DIR"], "adapter_config.json"),
    (["--lora-scaled", "/nonexistent/adapter:0.5"], "/nonexistent/adapter"),
    (["--draft-model", "/nonexistent/draft"], "draft model /nonexistent/draft"),
])
def test_load_errors_exit_before_the_listening_line(tmp_path, args, needle):
    args = [str(tmp_path) if a == "EMPTY_DIR" else a for a in args]
    model = [] if "-m" in args else ["-m", SMOL_REPO]
    p = run("serve", *model, "--port", "0", *args, timeout=120)
    assert p.returncode > 0 and "Sanitizer" not in p.stderr, p.stderr
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert lines[-1].startswith("error: ") and needle in lines[-1], p.stderr
    assert sum(l.startswith("error: ") for l in lines) == 1, p.stderr
    assert "listening" not in p.stderr and "ready:" not in p.stderr, p.stderr


def test_sdk_raises_on_400_and_404(srv):
    c = client(srv)
    with pytest.raises(openai.BadRequestError):
        c.chat.completions.create(model="x", messages=[], max_tokens=2)
    assert requests.get(srv.url + "/nope").status_code == 404


def test_prompt_over_context_is_400(srv):
    long = "word " * 3000  # > 2048 tokens per slot
    r = requests.post(srv.url + "/v1/completions", json={"prompt": long, "max_tokens": 1})
    assert r.status_code == 400 and "context" in r.json()["error"]["message"]


def test_oversized_body_is_413_and_garbage_is_survived(srv):
    r = requests.post(srv.url + "/v1/chat/completions", data=b"x" * (40 << 20))
    assert r.status_code == 413
    host, port = srv.url.split("//")[1].split(":")
    for payload in (b"\x00\xff garbage \r\n\r\n", b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\n\r\n",
                    b"GET / HTTP/1.1\r\nX: " + b"b" * 200000 + b"\r\n\r\n"):
        s = socket.create_connection((host, int(port)))
        s.sendall(payload)
        s.settimeout(10)
        try:
            data = s.recv(100)
            assert data == b"" or data.startswith(b"HTTP/1.1 4"), data
        except (ConnectionResetError, socket.timeout):
            pass
        s.close()
    assert requests.get(srv.url + "/health").status_code == 200


def test_client_disconnect_frees_the_slot(srv):
    body = {"messages": [{"role": "user", "content": "Write a long story."}], "max_tokens": 2000, "stream": True}
    resp = requests.post(srv.url + "/v1/chat/completions", json=body, stream=True)
    it = resp.iter_lines()
    next(it)
    next(it)
    resp.close()  # the client goes away mid-stream
    deadline = time.time() + 20
    while time.time() < deadline:
        if not any(s["is_processing"] for s in requests.get(srv.url + "/slots").json()):
            break
        time.sleep(0.2)
    assert not any(s["is_processing"] for s in requests.get(srv.url + "/slots").json())


def test_auth_and_public_routes():
    s = Server("--api-key", "sekrit", "--parallel", "1", "--ctx-size", "1024")
    try:
        assert requests.get(s.url + "/health").status_code == 200
        missing = requests.get(s.url + "/v1/models")
        wrong = requests.get(s.url + "/v1/models", headers={"Authorization": "Bearer nope"})
        assert missing.status_code == wrong.status_code == 401
        assert missing.json() == wrong.json()
        with pytest.raises(openai.AuthenticationError):
            client(s, "nope").models.list()
        assert client(s, "sekrit").models.list().data[0].id == SMOL_REPO
    finally:
        assert s.stop() == 0


def test_queue_full_is_503_and_sigterm_exits_0():
    s = Server("--parallel", "1", "--max-queue-depth", "1", "--ctx-size", "1024")
    try:
        # (long enough that the first request still runs when the last two come: about 2 s here)
        body = {"prompt": "Tell me a story", "n_predict": 1000, "temperature": 0, "ignore_eos": True}
        results = []

        def post():
            try:
                results.append(requests.post(s.url + "/completion", json=body).status_code)
            except requests.ConnectionError as e:
                results.append(str(e))

        threads = [threading.Thread(target=post) for _ in range(2)]
        for t in threads:
            t.start()
            time.sleep(0.5)
        r = requests.post(s.url + "/completion", json=body)
        assert r.status_code == 503 and "queue" in r.json()["error"]["message"]
        with pytest.raises(openai.InternalServerError):
            client(s).completions.create(model="x", prompt="hi", max_tokens=2)
    finally:
        # SIGTERM with requests in flight: they end and the process exits 0 promptly
        t0 = time.time()
        assert s.stop(signal.SIGTERM) == 0
        assert time.time() - t0 < 20
        for t in threads:
            t.join(30)
        # in-flight requests were answered (finished or cancelled with 503), not cut off
        assert sorted(results) in ([200, 503], [503, 503], [200, 200]), results


def test_chat_template_override(tmp_path):
    f = tmp_path / "t.jinja"
    f.write_text("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}")
    s = Server("--chat-template-file", str(f), "--parallel", "1", "--ctx-size", "1024")
    try:
        r = requests.post(s.url + "/apply-template", json={"messages": [{"role": "user", "content": "Hi"}]}).json()
        assert r["prompt"] == "[user] Hi\n"
    finally:
        assert s.stop() == 0


def test_chat_template_builtin_name():
    """llama.cpp's test_chat_completion.py::test_apply_chat_template: `--chat-template command-r`
    names llama.cpp's built-in Command-R format instead of being Jinja source."""
    s = Server("--chat-template", "command-r", "--parallel", "1", "--ctx-size", "1024")
    try:
        msgs = [{"role": "system", "content": "You are a test."}, {"role": "user", "content": "Hi there"}]
        r = requests.post(s.url + "/apply-template", json={"messages": msgs})
        assert r.status_code == 200, r.text
        assert r.json()["prompt"] == ("<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a test.<|END_OF_TURN_TOKEN|>"
                                      "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi there<|END_OF_TURN_TOKEN|>"
                                      "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>")
    finally:
        assert s.stop() == 0


def test_unix_socket_and_mlxcel_server_name(tmp_path):
    sock = str(tmp_path / "m.sock")
    binary = os.path.join(os.path.dirname(os.environ.get("MLXCEL_BIN", "build/mlxcel")) or ".", "mlxcel-server")
    s = Server("--host", sock, "--parallel", "1", "--ctx-size", "1024", binary=binary)
    try:
        assert s.url == "unix:" + sock
        c = socket.socket(socket.AF_UNIX)
        c.connect(sock)
        c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            b = c.recv(4096)
            if not b:
                break
            data += b
        assert data.startswith(b"HTTP/1.1 200") and b'"ok"' in data
    finally:
        assert s.stop() == 0


def test_several_hosts_share_one_port():
    """llama-server's --host "127.0.0.1,::1": every address answers, on the port the first one got
    (here --port 0); a Unix socket cannot be part of a list."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.fail("IPv6 loopback is unavailable on this machine")
    s = Server("--host", "127.0.0.1,::1", "--parallel", "1", "--ctx-size", "1024")
    try:
        port = int(s.url.rsplit(":", 1)[1])
        for host in ("127.0.0.1", "[::1]"):
            r = requests.get(f"http://{host}:{port}/health", timeout=10)
            assert r.status_code == 200, host
            c = requests.post(f"http://{host}:{port}/v1/completions", json={"prompt": "Hi", "max_tokens": 2}, timeout=60)
            assert c.status_code == 200 and c.json()["usage"]["completion_tokens"] >= 1, host
    finally:
        assert s.stop() == 0
    p = run("serve", "-m", real_model_path("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"), "--host", "127.0.0.1,/tmp/x.sock",
            "--port", "0")
    assert_clean_error(p, "Unix socket")


@pytest.mark.parametrize("args,needle", [
    (["--kv-bits", "5"], "--kv-bits 5"),
    (["--frobnicate"], "--frobnicate"),
    (["--port", "70000"], "--port"),
    (["--ctx-size", "1000", "--parallel", "4"], "512"),
    (["--api-key", "a", "--api-key-file", "b"], "mutually exclusive"),
    (["--chat-template", "{% for %}"], "--chat-template"),
    (["--chat-template-file", "/nonexistent.jinja"], "/nonexistent.jinja"),
])
def test_bad_flags_fail_at_startup(args, needle):
    p = run("serve", "-m", SMOL_REPO, *args, timeout=120)
    assert_clean_error(p, needle)


def test_anthropic_messages(srv):
    u = srv.url
    msgs = [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}]
    r = requests.post(u + "/v1/messages", json={"model": "x", "max_tokens": 10, "messages": msgs, "temperature": 0}).json()
    oa = client(srv).chat.completions.create(model="x", messages=[{"role": "user", "content": PROMPT}], temperature=0, max_tokens=10)
    assert r["type"] == "message" and r["content"][0]["text"] == oa.choices[0].message.content
    u_ = r["usage"]
    assert r["stop_reason"] == "max_tokens" and u_["output_tokens"] == 10
    assert u_["input_tokens"] + u_["cache_read_input_tokens"] == oa.usage.prompt_tokens
    n = requests.post(u + "/v1/messages/count_tokens", json={"model": "x", "messages": msgs}).json()
    assert n["input_tokens"] == oa.usage.prompt_tokens
    assert requests.post(u + "/v1/chat/completions/input_tokens",
                         json={"messages": [{"role": "user", "content": PROMPT}]}).json()["input_tokens"] == oa.usage.prompt_tokens
    with requests.post(u + "/v1/messages", json={"model": "x", "max_tokens": 10, "messages": msgs, "temperature": 0, "stream": True},
                       stream=True) as resp:
        lines = list(resp.iter_lines(decode_unicode=True))
    names = [l[7:] for l in lines if l.startswith("event: ")]
    assert names[0] == "message_start" and names[-1] == "message_stop"
    deltas = [json.loads(l[6:]) for l in lines if l.startswith("data: ") and "text_delta" in l]
    assert "".join(d["delta"]["text"] for d in deltas) == r["content"][0]["text"]
    bad = requests.post(u + "/v1/messages", json={"model": "x", "messages": msgs})
    assert bad.status_code == 400 and bad.json()["type"] == "error" and "max_tokens" in bad.json()["error"]["message"]


def test_logit_bias_and_sampler_fields(srv):
    c = client(srv)
    msgs = [{"role": "user", "content": "Say hello."}]
    base = c.chat.completions.create(model="x", messages=msgs, temperature=0, max_tokens=3).choices[0].message.content
    first = requests.post(srv.url + "/tokenize", json={"content": base}).json()["tokens"][0]
    banned = c.chat.completions.create(model="x", messages=msgs, temperature=0, max_tokens=3, logit_bias={str(first): -100})
    ids = requests.post(srv.url + "/tokenize", json={"content": banned.choices[0].message.content}).json()["tokens"]
    assert ids[0] != first
    r = requests.post(srv.url + "/completion", json={"prompt": "Say hello.", "n_predict": 3, "temperature": 0,
                                                     "logit_bias": [[first, False]]}).json()
    assert first not in r["tokens"]
    # the other samplers are accepted and reproducible for a seed
    # (cache_prompt off: a cached prefix runs the suffix alone, whose logits differ in the last bits)
    body = {"prompt": "Once upon a time", "n_predict": 8, "temperature": 0.9, "seed": 5, "cache_prompt": False,
            "dry_multiplier": 0.8, "typical_p": 0.9,
            "top_n_sigma": 2.0, "xtc_probability": 0.5, "dynatemp_range": 0.2, "dry_sequence_breakers": ["\n"]}
    a = requests.post(srv.url + "/completion", json=body).json()
    b = requests.post(srv.url + "/completion", json=body).json()
    assert a["content"] == b["content"] and len(a["tokens"]) == 8
    # text keys bias every token of the text (llama-server)
    word = requests.post(srv.url + "/detokenize", json={"tokens": [first]}).json()["content"]
    r = requests.post(srv.url + "/completion", json={"prompt": "Say hello.", "n_predict": 3, "temperature": 0,
                                                     "logit_bias": {word: -100}}).json()
    assert first not in r["tokens"]
    for bad in ({"logit_bias": {"abc": "x"}}, {"logit_bias": {"99999999": 1}}, {"logit_bias": [[1]]}, {"mirostat": 3},
                {"dry_sequence_breakers": "x"}):
        r = requests.post(srv.url + "/completion", json={"prompt": "x", "n_predict": 1, **bad})
        assert r.status_code == 400, bad


def test_reasoning_split_with_a_thinking_template():
    # DeepSeek-R1's template opens <think> in the generation prompt: everything the model writes
    # before </think> is reasoning, in the whole response and in the stream
    tpl = os.path.join(os.path.dirname(ROOT), "shared", "testdata", "templates", "templates",
                       "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja")
    s = Server("--chat-template-file", tpl, "--parallel", "1", "--ctx-size", "1024")
    try:
        c = client(s)
        msgs = [{"role": "user", "content": "Hi"}]
        prompt = requests.post(s.url + "/apply-template", json={"messages": msgs}).json()["prompt"]
        assert prompt.endswith("<think>\n")
        raw = requests.post(s.url + "/completion", json={"prompt": prompt, "n_predict": 12, "temperature": 0}).json()["content"]
        assert "</think>" not in raw
        nc = {"cache_prompt": False}  # the same computation as the /completion above, bit for bit
        r = c.chat.completions.create(model="x", messages=msgs, temperature=0, max_tokens=12, extra_body=nc)
        m = r.choices[0].message
        assert m.model_extra["reasoning_content"] == raw.strip() and not m.content
        parts = [ch.choices[0].delta.model_extra.get("reasoning_content") or "" for ch in
                 c.chat.completions.create(model="x", messages=msgs, temperature=0, max_tokens=12, stream=True, extra_body=nc)
                 if ch.choices]
        assert "".join(parts) == raw.strip()
    finally:
        assert s.stop() == 0


def test_several_prompts_in_one_request(srv):
    u = srv.url
    one = requests.post(u + "/completion", json={"prompt": "The sky is", "n_predict": 4, "temperature": 0, "cache_prompt": False}).json()
    two = requests.post(u + "/completion", json={"prompt": "Water is", "n_predict": 4, "temperature": 0, "cache_prompt": False}).json()
    both = requests.post(u + "/completion", json={"prompt": ["The sky is", "Water is"], "n_predict": 4, "temperature": 0,
                                                  "cache_prompt": False}).json()
    assert isinstance(both, list) and [b["content"] for b in both] == [one["content"], two["content"]]
    ids = requests.post(u + "/tokenize", json={"content": "The sky is", "add_special": True}).json()["tokens"]
    as_ids = requests.post(u + "/completion", json={"prompt": [ids, ids], "n_predict": 4, "temperature": 0, "cache_prompt": False}).json()
    assert as_ids[0]["content"] == as_ids[1]["content"] == one["content"]
    r = client(srv).completions.create(model="x", prompt=["The sky is", "Water is"], max_tokens=4, temperature=0,
                                       extra_body={"cache_prompt": False})
    assert [c.text for c in r.choices] == [one["content"], two["content"]]
    assert r.usage.prompt_tokens == one["tokens_evaluated"] + two["tokens_evaluated"]


def test_concurrent_requests_give_the_text_of_each_alone():
    """Prompts arriving together are prefilled in one pass and decoded in one batch; every
    request must still get, byte for byte, the greedy text it gets alone."""
    s = Server("--parallel", "4", "--ctx-size", "4096")
    try:
        prompts = ["The sky is", "Water boils at", "List three prime numbers greater than 10.", "Once upon a time, in a small",
                   "Paris is the capital of", "def fib(n):"]
        body = lambda p: {"prompt": p, "n_predict": 12, "temperature": 0, "cache_prompt": False}
        alone = [requests.post(s.url + "/completion", json=body(p), timeout=300).json()["content"] for p in prompts]
        got = [None] * len(prompts)

        def one(i):
            got[i] = requests.post(s.url + "/completion", json=body(prompts[i]), timeout=300).json()["content"]

        th = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
        for t in th:
            t.start()
        for t in th:
            t.join()
        assert got == alone
    finally:
        assert s.stop() == 0


def test_tls(tmp_path):
    import subprocess
    import urllib3
    key, cert = str(tmp_path / "k.pem"), str(tmp_path / "c.pem")
    p = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                        "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"], capture_output=True)
    assert p.returncode == 0, p.stderr
    s = Server("--ssl-cert-file", cert, "--ssl-key-file", key, "--parallel", "1", "--ctx-size", "1024")
    try:
        assert s.url.startswith("https://")
        urllib3.disable_warnings()
        r = requests.get(s.url + "/health", verify=cert)
        assert r.status_code == 200 and r.json()["status"] == "ok"
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(s.url.replace("https://", "http://") + "/health", timeout=10)
    finally:
        assert s.stop() == 0
