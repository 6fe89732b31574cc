"""A server chat request with each of its allocations failed in turn (the allocation seam,
src/core/alloc.h; the model, tokenizer and template sweeps are tests/unit/test_alloc_faults.c).

The server runs with MXL_ALLOC_FAULT_HOOK=1 (server.c alloc_fault_hook): a request's
X-Mxl-Alloc-Fail-At: n makes the n-th allocation from its arrival fail, and GET /mxl-alloc gives
the seam's counters. One good request counts the calls; then for n = 1..count the same request
runs with call n failed (every call up to SWEEP_ALL / 2, an even stride beyond). Each must answer
either 200 with the good answer (the call had a fallback, or was not reached) or 500 with a JSON
error saying "out of memory" (a stream: the good answer and [DONE], or one error event saying
out of memory, as an engine error ends a stream); never hang, crash or leak: after the sweep a good request answers
the same, the live bytes are where they were, and the server exits 0 on SIGTERM (under ASan,
with no leak report)."""
import json
import os
import time

import requests

from server_util import Server

from conftest import mlxcel_bin

# Every call of a release build (about 300 for the whole request, 400 streamed: a minute and a
# half); the sanitizer build answers a request in about a second, so there the sweep takes the
# first 40 calls and an even stride over the rest (MXL_ALLOC_SWEEP_ALL overrides).
SWEEP_ALL = int(os.environ.get("MXL_ALLOC_SWEEP_ALL", "80" if "/asan/" in mlxcel_bin() else "1200"))
BODY = {
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a prime number."}],
    "max_tokens": 3,
    "temperature": 0,
    "cache_prompt": False,
}


def chat(url, fail_at=0, stream=False):
    """(status, body text) of the chat request with allocation fail_at failed (0: none)."""
    body = dict(BODY, stream=stream)
    r = requests.post(url + "/v1/chat/completions", json=body, headers={"X-Mxl-Alloc-Fail-At": str(fail_at)},
                      timeout=60)
    return r.status_code, r.text


def counters(url):
    return requests.get(url + "/mxl-alloc", timeout=30).json()


def answer(text):
    try:
        return json.loads(text)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def sweep_indices(count):
    head = min(count, SWEEP_ALL // 2)
    idx = list(range(1, head + 1))
    if count > head:
        stride = max(1, (count - head + SWEEP_ALL // 2 - 1) // (SWEEP_ALL // 2))
        idx += list(range(head + stride, count, stride)) + [count]
    return idx


def stream_answer(text):
    """(content, outcome) of an SSE body: outcome "done" ([DONE] ends it, no error), "oom" (one error
    event saying out of memory, then [DONE] as for any engine error), or "bad"."""
    content, done, errors = "", 0, []
    for line in text.split("\n"):
        if not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            done += 1
            continue
        try:
            ev = json.loads(data)
        except ValueError:
            return None, "bad"
        if "error" in ev:
            errors.append(ev["error"].get("message", "") if isinstance(ev["error"], dict) else str(ev["error"]))
            continue
        for ch in ev.get("choices", []):
            content += (ch.get("delta") or {}).get("content") or ""
    if done == 1 and not errors and text.rstrip().endswith("data: [DONE]"):
        return content, "done"
    if len(errors) == 1 and "out of memory" in errors[0] and "\n" not in errors[0] and done <= 1:
        return content, "oom"
    return content, "bad"


def run_sweep(srv, stream, label):
    url = srv.url
    status, text = chat(url, stream=stream)  # warm-up: first-use statics
    assert status == 200, text
    want = stream_answer(text)[0] if stream else answer(text)
    if stream:
        assert stream_answer(text)[1] == "done", text
    c0 = counters(url)
    status, text = chat(url, stream=stream)
    c1 = counters(url)
    assert status == 200 and (stream_answer(text) if stream else (answer(text), "done")) == (want, "done"), text
    count = c1["calls"] - c0["calls"]
    assert count > 0
    # the baseline once the last call is freed (a stream's call goes when MHD ends the response,
    # which can come after the client has read [DONE]): two reads 0.2 s apart that agree
    live0, deadline = c1["live_bytes"], time.time() + 10
    while time.time() < deadline:
        time.sleep(0.2)
        now = counters(url)["live_bytes"]
        if now == live0:
            break
        live0 = now
    errors = same = unreached = 0
    bad = []
    for n in sweep_indices(count):
        f0 = counters(url)["failures"]
        status, text = chat(url, fail_at=n, stream=stream)
        fired = counters(url)["failures"] != f0
        if status == 200:
            got, outcome = stream_answer(text) if stream else (answer(text), "done")
            if outcome == "oom":
                errors += 1
                continue
            if outcome != "done" or got != want:
                bad.append((n, f"200 with {outcome} / a different answer: " + text[:300]))
            if fired:
                same += 1
            else:
                unreached += 1  # past the request's calls, or guarded (alloc.h mxl_alloc_json_parse_guard)
        elif status == 500:
            errors += 1
            try:
                err = json.loads(text)["error"]
                msg = err["message"] if isinstance(err, dict) else err
            except (ValueError, KeyError, TypeError):
                msg = ""
            if "out of memory" not in msg or "\n" in msg:
                bad.append((n, "500 without a one-line out-of-memory message: " + text[:200]))
        else:
            bad.append((n, f"status {status} (fault fired: {fired}): {text[:200]}"))
    # the server is whole: the same answer, and what the failed requests allocated is freed
    status, text = chat(url, stream=stream)
    assert status == 200 and (stream_answer(text)[0] if stream else answer(text)) == want, text
    # a stream's call is freed when MHD ends the response, which can come after the client has
    # read [DONE]: give the server a moment
    deadline = time.time() + 10
    while (live := counters(url)["live_bytes"]) != live0 and time.time() < deadline:
        time.sleep(0.1)
    print(f"{label}: {count} allocation calls, {len(sweep_indices(count))} failed in turn: "
          f"{errors} errors (500 or an error event), {same} answered alike with the call failed (a fallback), "
          f"{unreached} not failed (past the request or guarded), {len(bad)} bad")
    for n, why in bad[:40]:
        print(f"  allocation {n}: {why}")
    assert not bad, bad[:10]
    assert live == live0, f"live bytes {live} after the sweep, {live0} before"


def test_chat_request_survives_each_failed_allocation():
    srv = Server("--parallel", "1", "--ctx-size", "512", env={"MXL_ALLOC_FAULT_HOOK": "1"})
    try:
        run_sweep(srv, False, "server chat request")
        run_sweep(srv, True, "server chat request (stream)")
    finally:
        assert srv.stop() == 0
