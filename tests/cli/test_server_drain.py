"""`mlxcel serve`'s shutdown against a live process (SmolLM2): the first SIGTERM / SIGINT drains
(new requests get 503 "the server is shutting down" while the streams already running finish with
the very tokens they give when nothing stops the server), --shutdown-timeout bounds the drain
(then what is left ends with a clean 503 error, in the stream or as the reply), a second signal
stops at once, and every case exits 0."""
import json
import signal
import threading
import time

import requests

from conftest import assert_clean_error, run
from server_util import Server

PROMPTS = ["Tell a short story about a fox who learns to read.",
           "Explain how a steam engine works to a curious child."]


def body(prompt, n, stream):
    return {"prompt": prompt, "n_predict": n, "temperature": 0, "ignore_eos": True, "stream": stream}


class Stream:
    """A streaming /completion read on its own thread: its events, and when the first arrived."""

    def __init__(self, url, prompt, n):
        self.events, self.first = [], threading.Event()
        self.t = threading.Thread(target=self._run, args=(url, prompt, n))
        self.t.start()

    def _run(self, url, prompt, n):
        r = requests.post(url + "/completion", json=body(prompt, n, True), stream=True, timeout=300)
        for line in r.iter_lines():
            if line.startswith(b"data: "):
                self.events.append(json.loads(line[6:]))
                self.first.set()
        self.first.set()

    def text(self):
        return "".join(e.get("content", "") for e in self.events)


def wait_exit(s, timeout):
    t0 = time.time()
    rc = s.proc.wait(timeout)
    return rc, time.time() - t0


def assert_shutting_down(r):
    assert r.status_code == 503, r.text
    assert r.json()["error"]["message"] == "the server is shutting down", r.text


def test_sigterm_drains_running_streams_and_refuses_new_requests():
    s = Server("--parallel", "2", "--ctx-size", "2048", "--shutdown-timeout", "120")
    try:
        n = 160
        alone = [requests.post(s.url + "/completion", json=body(p, n, False), timeout=300).json()["content"] for p in PROMPTS]
        streams = [Stream(s.url, p, n) for p in PROMPTS]
        for st in streams:
            assert st.first.wait(120)
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        # the socket still answers, every route with 503 (a balancer's /health check included)
        assert_shutting_down(requests.post(s.url + "/completion", json=body("Hi", 4, False), timeout=30))
        assert_shutting_down(requests.get(s.url + "/health", timeout=30))
        assert s.proc.poll() is None, "the server exited with streams still running"
        rc, _ = wait_exit(s, 240)
        assert rc == 0
        for st, want in zip(streams, alone):
            st.t.join(30)
            assert st.events[-1]["stop"] is True and "error" not in st.events[-1], st.events[-1]
            assert st.text() == want
    finally:
        assert s.stop() == 0
    log = "".join(s.lines)
    assert "draining: " in log and "cancelling" not in log, log


def test_shutdown_timeout_cancels_what_is_left_cleanly():
    s = Server("--parallel", "1", "--ctx-size", "2048", "--shutdown-timeout", "1")
    try:
        st = Stream(s.url, PROMPTS[0], 1800)  # far longer than the drain allows
        assert st.first.wait(120)
        queued = {}
        t = threading.Thread(target=lambda: queued.update(r=requests.post(s.url + "/completion", json=body("Hi", 8, False), timeout=300)))
        t.start()
        time.sleep(0.3)
        s.proc.send_signal(signal.SIGTERM)
        rc, secs = wait_exit(s, 60)
        assert rc == 0 and secs < 20, secs
        st.t.join(30)
        t.join(30)
        # the stream ends with an error event, the queued request with its 503 reply: nothing cut off
        assert st.events[-1] == {"error": {"code": 503, "message": "the server is shutting down", "type": "unavailable_error"}}, st.events[-1]
        assert_shutting_down(queued["r"])
    finally:
        assert s.stop() == 0
    assert "cancelling 2 requests still in flight" in "".join(s.lines)


def test_second_signal_stops_at_once():
    s = Server("--parallel", "1", "--ctx-size", "2048", "--shutdown-timeout", "600")
    try:
        st = Stream(s.url, PROMPTS[1], 1800)
        assert st.first.wait(120)
        s.proc.send_signal(signal.SIGINT)
        time.sleep(1.0)
        assert s.proc.poll() is None  # draining
        s.proc.send_signal(signal.SIGINT)
        rc, secs = wait_exit(s, 60)
        assert rc == 0 and secs < 20, secs
        st.t.join(30)
        assert "error" in st.events[-1], st.events[-1]
    finally:
        assert s.stop() == 0


def test_shutdown_timeout_flag_is_checked():
    p = run("serve", "-m", "x", "--shutdown-timeout", "-1", timeout=60)
    assert_clean_error(p, "--shutdown-timeout")
