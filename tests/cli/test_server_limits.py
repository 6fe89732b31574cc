"""`mlxcel serve` under hostile input (src/server/limits.h has the table): each limit answers its
status (413 body, 431 header fields, 429 connections per address, 400 for the JSON-level limits) in
the route's API error shape, with a message naming the limit and the flag that raises it, and the
server keeps serving afterwards. Also: max_tokens past the context (llama-server: accepted, ends
at the context with finish_reason "length"; --n-predict caps it), the API key compare, and file
paths confined to --media-path and --slot-save-path (no "..", absolute paths or symlinks out)."""
import base64
import json
import os
import select
import shutil
import socket
import time

import pytest
import requests

from conftest import ROOT
from server_util import Server

SMALL = ["--parallel", "1", "--ctx-size", "1024", "--max-body-bytes", "65536", "--max-header-bytes", "4096",
         "--max-headers", "30", "--max-json-depth", "16", "--max-messages", "8", "--max-tools", "2",
         "--max-logit-bias", "4", "--max-grammar-bytes", "2048", "--max-inputs", "4"]


@pytest.fixture(scope="module")
def srv():
    s = Server(*SMALL)
    yield s
    assert s.stop() == 0


def serving(s):
    """The server still answers a real generation."""
    r = requests.post(s.url + "/v1/chat/completions", timeout=60,
                      json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "temperature": 0})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] is not None


def openai_error(r, status, *needles):
    assert r.status_code == status, r.text
    e = r.json()["error"]
    assert e["code"] == status and e["type"], e
    for n in needles:
        assert n in e["message"], (n, e["message"])
    assert "\n" not in e["message"]
    return e["message"]


def anthropic_error(r, status, *needles):
    assert r.status_code == status, r.text
    j = r.json()
    assert j["type"] == "error" and j["error"]["type"], j
    for n in needles:
        assert n in j["error"]["message"], (n, j)
    return j["error"]["message"]


def user(text="hi"):
    return {"role": "user", "content": text}


def tool(name):
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}


def nested(depth):
    return "[" * depth + "]" * depth


# --- the transport: body, head, connections ------------------------------------------------------

def test_body_over_max_body_bytes_is_413_in_each_api_shape(srv):
    big = json.dumps({"messages": [user("x" * 70000)], "max_tokens": 1})
    openai_error(requests.post(srv.url + "/v1/chat/completions", data=big), 413, "65536", "--max-body-bytes")
    anthropic_error(requests.post(srv.url + "/v1/messages", data=big), 413, "--max-body-bytes")
    openai_error(requests.post(srv.url + "/completion", data=big), 413, "--max-body-bytes")
    # just under the limit: read as usual
    ok = json.dumps({"messages": [user("y " * 100)], "max_tokens": 1})
    assert requests.post(srv.url + "/v1/chat/completions", data=ok).status_code == 200
    serving(srv)


def test_header_fields_over_the_limits_are_431(srv):
    many = {f"X-Field-{i}": "v" for i in range(40)}
    openai_error(requests.get(srv.url + "/health", headers=many), 431, "header fields", "at most 30", "--max-headers")
    r = requests.get(srv.url + "/v1/models", headers={"X-Big": "b" * 5000})
    openai_error(r, 431, "at most 4096", "--max-header-bytes")
    assert r.headers.get("Connection", "").lower() == "close"
    anthropic_error(requests.post(srv.url + "/v1/messages", headers={"X-Big": "b" * 5000}, json={}), 431, "--max-header-bytes")
    # a long query string counts too
    openai_error(requests.get(srv.url + "/health?" + "a=" + "q" * 5000), 431, "--max-header-bytes")
    # far past the connection's memory: libmicrohttpd's own refusal, the server survives
    host, port = srv.url.split("//")[1].split(":")
    s = socket.create_connection((host, int(port)))
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX: " + b"z" * 300000 + b"\r\n\r\n")
    s.settimeout(10)
    try:
        assert s.recv(100)[:10] in (b"", b"HTTP/1.1 4")
    except (ConnectionResetError, socket.timeout, BrokenPipeError):
        pass
    s.close()
    # 29 fields and 4000 bytes pass
    fine = {f"X-Field-{i}": "v" for i in range(20)}
    assert requests.get(srv.url + "/health", headers=fine).status_code == 200
    serving(srv)


def closed_by_server(sock):
    """Whether the server has closed this connection, which never sent a request."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def test_connections_per_address_are_429_then_refused():
    s = Server("--parallel", "1", "--ctx-size", "1024", "--max-connections-per-ip", "2")
    host, port = s.url.split("//")[1].split(":")
    held = []
    try:
        held = [socket.create_connection((host, int(port))) for _ in range(2)]
        deadline = time.time() + 30
        while True:  # (until the two held connections are counted: see below)
            time.sleep(0.2)
            r = requests.get(s.url + "/health")
            if r.status_code != 200 or time.time() > deadline:
                break
        openai_error(r, 429, "at most 2", "--max-connections-per-ip")
        assert r.headers.get("Connection", "").lower() == "close"
        anthropic_error(requests.post(s.url + "/v1/messages", json={}), 429, "--max-connections-per-ip")
        # past twice the limit a new connection is closed at once, without an answer
        held += [socket.create_connection((host, int(port))) for _ in range(2)]
        # (the earlier probes stay counted until the server has closed them: on a loaded machine
        # under ASan a held connection may come while they still are, find the address at twice
        # its limit and be closed at once. Such a connection is replaced, and the probe repeated,
        # until the four held are counted and a probe is the one closed)
        deadline, answer = time.time() + 60, None
        while True:
            time.sleep(0.2)
            c = socket.create_connection((host, int(port)))
            c.settimeout(10)
            try:
                c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                answer = c.recv(100)
            except (ConnectionResetError, BrokenPipeError):
                answer = b""
            c.close()
            closed = [h for h in held if closed_by_server(h)]
            if answer == b"" and not closed:
                break
            assert time.time() < deadline, (answer, len(closed))
            assert answer == b"" or answer.startswith(b"HTTP/1.1 429"), answer
            for h in closed:
                held.remove(h)
                h.close()
            if closed:
                # (the probe just made stays counted until the server has closed it: a replacement
                # made at once finds the address at twice its limit again and is closed in turn,
                # round after round; the replacements wait that out)
                time.sleep(1.0)
                held += [socket.create_connection((host, int(port))) for _ in closed]
        for h in held:
            h.close()
        held = []
        deadline = time.time() + 30
        while True:  # (once the server has closed them: until then a probe is refused or gets 429)
            try:
                if requests.get(s.url + "/health").status_code == 200:
                    break
            except requests.exceptions.ConnectionError:
                pass
            assert time.time() < deadline
            time.sleep(0.2)
        serving(s)
    finally:
        for h in held:
            h.close()
        assert s.stop() == 0


def test_loopback_is_not_counted_by_default(srv):
    host, port = srv.url.split("//")[1].split(":")
    held = [socket.create_connection((host, int(port))) for _ in range(80)]  # > the default 64
    try:
        time.sleep(0.2)
        assert requests.get(srv.url + "/health").status_code == 200
    finally:
        for h in held:
            h.close()


# --- JSON-level limits -----------------------------------------------------------------------

def test_json_nesting_over_max_json_depth_is_400(srv):
    deep = '{"messages": [{"role": "user", "content": "hi"}], "x": ' + nested(16) + "}"  # 17 levels
    openai_error(requests.post(srv.url + "/v1/chat/completions", data=deep), 400, "deeper than 16", "--max-json-depth")
    anthropic_error(requests.post(srv.url + "/v1/messages", data=deep), 400, "--max-json-depth")
    openai_error(requests.post(srv.url + "/completion", data=nested(5000)), 400, "--max-json-depth")
    # brackets inside strings do not count
    ok = {"messages": [user("[" * 100 + "{" * 100)], "max_tokens": 1}
    assert requests.post(srv.url + "/v1/chat/completions", json=ok).status_code == 200
    at_limit = '{"prompt": "a", "n_predict": 1, "x": ' + nested(15) + "}"  # 16 levels
    assert requests.post(srv.url + "/completion", data=at_limit).status_code == 200
    serving(srv)


def test_default_json_depth_is_64_and_jansson_never_sees_2048():
    s = Server("--parallel", "1", "--ctx-size", "1024")
    try:
        base = '{"prompt": "a", "n_predict": 1, "x": %s}'
        assert requests.post(s.url + "/completion", data=base % nested(63)).status_code == 200
        openai_error(requests.post(s.url + "/completion", data=base % nested(64)), 400, "deeper than 64", "--max-json-depth")
        openai_error(requests.post(s.url + "/completion", data=nested(100000)), 400, "--max-json-depth")
        serving(s)
    finally:
        assert s.stop() == 0


def test_too_many_messages_is_400_on_every_chat_route(srv):
    msgs = [user(f"m{i}") for i in range(9)]
    openai_error(requests.post(srv.url + "/v1/chat/completions", json={"messages": msgs, "max_tokens": 1}), 400,
                 "'messages' has 9 entries", "at most 8", "--max-messages")
    anthropic_error(requests.post(srv.url + "/v1/messages", json={"messages": msgs, "max_tokens": 1}), 400, "--max-messages")
    anthropic_error(requests.post(srv.url + "/v1/messages/count_tokens", json={"messages": msgs}), 400, "--max-messages")
    openai_error(requests.post(srv.url + "/apply-template", json={"messages": msgs}), 400, "--max-messages")
    openai_error(requests.post(srv.url + "/v1/responses", json={"input": msgs, "max_output_tokens": 1}), 400, "--max-messages")
    r = requests.post(srv.url + "/v1/chat/completions", json={"messages": msgs[:8], "max_tokens": 1})
    assert r.status_code == 200, r.text
    serving(srv)


def test_too_many_tools_is_400(srv):
    tools = [tool(f"f{i}") for i in range(3)]
    openai_error(requests.post(srv.url + "/v1/chat/completions", json={"messages": [user()], "tools": tools, "max_tokens": 1}),
                 400, "'tools' has 3 entries", "at most 2", "--max-tools")
    a_tools = [{"name": f"f{i}", "input_schema": {"type": "object"}} for i in range(3)]
    anthropic_error(requests.post(srv.url + "/v1/messages", json={"messages": [user()], "tools": a_tools, "max_tokens": 1}),
                    400, "--max-tools")
    r_tools = [{"type": "function", "name": f"f{i}", "parameters": {"type": "object"}} for i in range(3)]
    openai_error(requests.post(srv.url + "/v1/responses", json={"input": "hi", "tools": r_tools, "max_output_tokens": 1}), 400,
                 "--max-tools")
    openai_error(requests.post(srv.url + "/v1/chat/completions/input_tokens", json={"messages": [user()], "tools": tools}), 400,
                 "--max-tools")
    assert requests.post(srv.url + "/v1/chat/completions",
                         json={"messages": [user()], "tools": tools[:2], "max_tokens": 1}).status_code == 200
    serving(srv)


def test_logit_bias_entries_over_the_limit_are_400(srv):
    body = {"messages": [user()], "max_tokens": 1, "logit_bias": {str(i): 1 for i in range(5)}}
    openai_error(requests.post(srv.url + "/v1/chat/completions", json=body), 400, "5 entries", "at most 4", "--max-logit-bias")
    # a text entry counts each of its tokens
    body = {"prompt": "a", "n_predict": 1, "logit_bias": [["one two three four five six seven", -1]]}
    openai_error(requests.post(srv.url + "/completion", json=body), 400, "more than 4 tokens", "--max-logit-bias")
    body = {"prompt": "a", "n_predict": 1, "logit_bias": [[1, 1.0], [2, False], ["hi", -1]]}
    assert requests.post(srv.url + "/completion", json=body).status_code == 200
    serving(srv)


def test_stop_strings_choices_and_prompts_have_fixed_limits(srv):
    body = {"messages": [user()], "max_tokens": 1, "stop": [f"s{i}" for i in range(17)]}
    openai_error(requests.post(srv.url + "/v1/chat/completions", json=body), 400, "more than 16 strings")
    body = {"messages": [user()], "max_tokens": 1, "stop_sequences": [f"s{i}" for i in range(17)]}
    anthropic_error(requests.post(srv.url + "/v1/messages", json=body), 400, "more than 16 strings")
    openai_error(requests.post(srv.url + "/v1/chat/completions", json={"messages": [user()], "max_tokens": 1, "n": 17}), 400,
                 "between 1 and 16")
    openai_error(requests.post(srv.url + "/v1/completions", json={"prompt": ["p"] * 17, "max_tokens": 1}), 400,
                 "17 prompts", "at most 16")
    serving(srv)


def test_grammar_and_schema_over_max_grammar_bytes_are_400(srv):
    g = 'root ::= "a" ' + " ".join(['"b"'] * 800)  # ~3.2 KB
    openai_error(requests.post(srv.url + "/completion", json={"prompt": "x", "n_predict": 1, "grammar": g}), 400,
                 "'grammar' is", "at most 2048", "--max-grammar-bytes")
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "d" * 40} for i in range(60)}}
    openai_error(requests.post(srv.url + "/v1/chat/completions", json={
        "messages": [user()], "max_tokens": 1, "response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}),
        400, "bytes of JSON", "--max-grammar-bytes")
    # a small schema whose grammar is large
    small = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(30)}}  # ~770 bytes, ~3.2 KB of GBNF
    assert len(json.dumps(small, separators=(",", ":"))) < 2048
    openai_error(requests.post(srv.url + "/completion", json={"prompt": "x", "n_predict": 1, "json_schema": small}), 400,
                 "the grammar made from 'json_schema'", "--max-grammar-bytes")
    ok = {"prompt": "x", "n_predict": 4, "json_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}
    assert requests.post(srv.url + "/completion", json=ok).status_code == 200
    serving(srv)


def test_inputs_the_fuzzer_found_are_400_not_a_crash(srv):
    # json_schema.c: a property whose schema fails, beside additionalProperties, read the names of
    # the properties after it, never filled (a NULL dereference: the server died)
    schema = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 1.5}, "b": {"type": "string"}},
              "additionalProperties": True}
    openai_error(requests.post(srv.url + "/completion", json={"prompt": "x", "n_predict": 1, "json_schema": schema}), 400,
                 "minimum/maximum")
    # grammar.c: an empty root rule made an empty parse stack at a NULL buffer (UB)
    r = requests.post(srv.url + "/completion", json={"prompt": "x", "n_predict": 2, "grammar": "root ::=\n"})
    assert r.status_code in (200, 400), r.text
    # api_anthropic.c: a tool_use block without "input" leaked the object made for it
    body = {"max_tokens": 1, "messages": [user(), {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f"}]},
                                           {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]}
    assert requests.post(srv.url + "/v1/messages", json=body).status_code == 200
    # gen_call.c: an empty first prompt of several copied its ids from NULL (UB)
    openai_error(requests.post(srv.url + "/v1/completions", json={"prompt": ["", [1, 2, 3]], "max_tokens": 1}), 400, "empty")
    # request.c: a control character quoted from the request stays out of the one-line message
    r = requests.post(srv.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": [{"type": "image\nurl"}]}]})
    openai_error(r, 400, "image url")
    serving(srv)


def test_embedding_inputs_over_max_inputs_are_400():
    minilm = "sentence-transformers/all-MiniLM-L6-v2"
    s = Server("-m", minilm, "--max-inputs", "3")
    try:
        openai_error(requests.post(s.url + "/v1/embeddings", json={"input": ["a", "b", "c", "d"]}), 400,
                     "'input' has 4 entries", "at most 3", "--max-inputs")
        r = requests.post(s.url + "/v1/embeddings", json={"input": ["a", "b", "c"]})
        assert r.status_code == 200 and len(r.json()["data"]) == 3
    finally:
        assert s.stop() == 0


# --- max_tokens and the context (as llama-server) ------------------------------------------------

def test_max_tokens_past_the_context_ends_at_the_context():
    s = Server("--parallel", "1", "--ctx-size", "512")
    try:
        r = requests.post(s.url + "/v1/completions", timeout=300,
                          json={"prompt": "Count: 1 2 3", "max_tokens": 100000, "ignore_eos": True, "temperature": 0})
        assert r.status_code == 200, r.text
        j = r.json()
        assert j["choices"][0]["finish_reason"] == "length"
        assert j["usage"]["prompt_tokens"] + j["usage"]["completion_tokens"] <= 512
        assert j["usage"]["completion_tokens"] >= 400
        serving(s)
    finally:
        assert s.stop() == 0


def test_n_predict_caps_every_request():
    s = Server("--parallel", "1", "--ctx-size", "1024", "--n-predict", "3")
    try:
        for mt in (100, -1):
            r = requests.post(s.url + "/v1/completions",
                              json={"prompt": "Count: 1 2 3", "max_tokens": mt, "ignore_eos": True, "temperature": 0})
            assert r.status_code == 200, r.text
            assert r.json()["usage"]["completion_tokens"] == 3, r.json()
        r = requests.post(s.url + "/completion", json={"prompt": "Count:", "n_predict": 2, "ignore_eos": True})
        assert r.json()["tokens_predicted"] == 2
    finally:
        assert s.stop() == 0


# --- API key -------------------------------------------------------------------------------------

def test_api_key_compare_has_the_same_answers():
    s = Server("--api-key", "sekrit-key", "--parallel", "1", "--ctx-size", "1024")
    try:
        for bad in ("", "s", "sekrit-ke", "sekrit-key2", "Sekrit-key", "x" * 3000):
            r = requests.get(s.url + "/v1/models", headers={"Authorization": "Bearer " + bad})
            assert r.status_code == 401, bad
        assert requests.get(s.url + "/v1/models", headers={"Authorization": "Bearer sekrit-key"}).status_code == 200
        assert requests.get(s.url + "/v1/models", headers={"X-Api-Key": "sekrit-key"}).status_code == 200
        assert requests.get(s.url + "/v1/models", headers={"X-Api-Key": "sekrit-kez"}).status_code == 401
    finally:
        assert s.stop() == 0


# --- file paths ----------------------------------------------------------------------------------

VLM_FX = os.path.join(ROOT, "tests", "fixtures", "vlm")
VLM = os.path.join(VLM_FX, "gemma3", "model")


def image_chat(url, path):
    body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": path}}, {"type": "text", "text": "w10"}]}],
            "max_tokens": 1, "temperature": 0}
    return requests.post(url + "/v1/chat/completions", json=body, timeout=120)


def test_media_path_confines_image_files(tmp_path):
    media, outside = tmp_path / "media", tmp_path / "outside"
    media.mkdir()
    outside.mkdir()
    png = os.path.join(VLM_FX, "image_a.png")
    shutil.copy(png, media / "a.png")
    shutil.copy(png, outside / "secret.png")
    (media / "sub").mkdir()
    os.symlink(media / "a.png", media / "sub" / "inner.png")        # a symlink staying inside
    os.symlink(outside / "secret.png", media / "escape.png")         # a symlink leading out
    os.symlink(outside, media / "outdir")                            # a directory symlink leading out
    os.mkfifo(media / "fifo.png")
    s = Server("-m", VLM, "--media-path", str(media))
    try:
        for good in ("a.png", "file://" + str(media / "a.png"), "sub/inner.png", "sub/../a.png"):
            r = image_chat(s.url, good)
            assert r.status_code == 200, (good, r.text)
        for bad, needle in (("../outside/secret.png", "outside --media-path"), (str(outside / "secret.png"), "outside --media-path"),
                            ("file://" + str(outside / "secret.png"), "outside --media-path"), ("escape.png", "outside --media-path"),
                            ("outdir/secret.png", "outside --media-path"), ("/etc/passwd", "outside --media-path"),
                            ("fifo.png", "not a readable file"), ("sub", "not a readable file"), ("missing.png", "cannot be read")):
            r = image_chat(s.url, bad)
            openai_error(r, 400, needle)
        assert image_chat(s.url, "a.png").status_code == 200
    finally:
        assert s.stop() == 0


def test_slot_files_stay_in_slot_save_path(tmp_path):
    slots, outside = tmp_path / "slots", tmp_path / "outside"
    slots.mkdir()
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("keep me")
    os.symlink(victim, slots / "link.bin")
    os.mkfifo(slots / "fifo.bin")
    s = Server("--parallel", "1", "--ctx-size", "1024", "--slot-save-path", str(slots))
    try:
        r = requests.post(s.url + "/completion", json={"prompt": "Hello there", "n_predict": 2, "id_slot": 0, "temperature": 0})
        assert r.status_code == 200, r.text
        for name in ("../outside/x.bin", "/etc/passwd", "sub/x.bin", "..", ".hidden"):
            r = requests.post(s.url + "/slots/0?action=save", json={"filename": name})
            openai_error(r, 400, "Invalid filename")
        # restoring through a symlink or from a FIFO is refused (and does not hang)
        openai_error(requests.post(s.url + "/slots/0?action=restore", json={"filename": "link.bin"}), 400, "symlink")
        openai_error(requests.post(s.url + "/slots/0?action=restore", json={"filename": "fifo.bin"}), 400, "not a regular file")
        # saving over a symlink replaces the link; the file it pointed to is untouched
        r = requests.post(s.url + "/slots/0?action=save", json={"filename": "link.bin"})
        assert r.status_code == 200, r.text
        assert victim.read_text() == "keep me"
        assert not os.path.islink(slots / "link.bin") and os.path.getsize(slots / "link.bin") == r.json()["n_written"]
        r = requests.post(s.url + "/slots/0?action=restore", json={"filename": "link.bin"})
        assert r.status_code == 200, r.text
        assert sorted(os.listdir(slots)) == ["fifo.bin", "link.bin"]  # no temporary file left
        serving(s)
    finally:
        assert s.stop() == 0
