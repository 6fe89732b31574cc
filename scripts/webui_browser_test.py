#!/usr/bin/env python3
"""webui_browser_test.py - drives mlxcel's WebUI in headless Chromium (Debian's `chromium`, which
scripts/setup.sh installs) over the DevTools protocol, and checks one streamed chat turn.

It loads {server}{prefix}/webui/, sets temperature 0 and a token limit in the page's settings,
types a message, clicks Send, waits until the streamed answer is finished, checks that the answer
equals what POST /v1/chat/completions returns non-streamed for the same request, and saves a
screenshot. tests/cli/test_webui.py runs it against a live `mlxcel serve --webui`; by hand:

    mlxcel serve -m HuggingFaceTB/SmolLM2-135M-Instruct-GGUF --webui --port 8080 &
    scripts/webui_browser_test.py http://127.0.0.1:8080 --screenshot /tmp/webui.png

The protocol runs over --remote-debugging-pipe (file descriptors 3 and 4 of the browser, messages
ending in a NUL byte), so no port and no websocket client are needed.
"""
import argparse
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium():
    """The browser binary ($MLXCEL_CHROMIUM, else chromium on PATH), or None."""
    env = os.environ.get("MLXCEL_CHROMIUM")
    if env:
        return env if os.access(env, os.X_OK) else None
    for n in CHROMIUM_NAMES:
        p = shutil.which(n)
        if p:
            return p
    return None


def _fd_above_9(fd):
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return high


class CDPError(RuntimeError):
    pass


class Browser:
    """One headless Chromium with one page, spoken to over the DevTools pipe."""

    def __init__(self, binary, width=1100, height=820):
        self.profile = tempfile.mkdtemp(prefix="mlxcel-webui-chromium-")
        to_child_r, self._to_child = os.pipe()      # our commands -> the browser's fd 3
        self._from_child, from_child_w = os.pipe()  # the browser's fd 4 -> our replies
        # the child's ends above 9, so that moving them onto 3 and 4 never closes one of them
        to_child_r, from_child_w = (_fd_above_9(fd) for fd in (to_child_r, from_child_w))
        args = ["--headless", "--remote-debugging-pipe", "--no-first-run", "--no-default-browser-check",
                "--disable-gpu", "--disable-extensions", "--disable-background-networking", "--disable-sync",
                "--disable-dev-shm-usage", "--mute-audio", "--hide-scrollbars", f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}"]
        if os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
        # bash puts the pipe ends on fds 3 and 4 (no preexec_fn: the caller may have threads)
        script = f'exec "$0" "$@" 3<&{to_child_r} 4>&{from_child_w} {to_child_r}<&- {from_child_w}>&-'
        self.proc = subprocess.Popen(["bash", "-c", script, binary, *args, "about:blank"],
                                     pass_fds=(to_child_r, from_child_w), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(to_child_r)
        os.close(from_child_w)
        self._stderr = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        self._next_id = 0
        self._buf = b""
        self._replies = {}
        self.events = []  # (method, params, sessionId) of every event seen
        self.handlers = {}  # event method -> fn(params), called as the event arrives (may call())
        self.session = None
        try:
            target = self.call("Target.createTarget", url="about:blank", session=False)["targetId"]
            self.session = self.call("Target.attachToTarget", targetId=target, flatten=True, session=False)["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                self.call(domain + ".enable")
            self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        except Exception:
            self.close()
            raise

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self._stderr.append(line.decode(errors="replace"))

    def _read_message(self, deadline):
        import select
        while b"\0" not in self._buf:
            left = deadline - time.time()
            if left <= 0:
                raise CDPError("timed out waiting for the browser")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise CDPError("the browser exited: " + "".join(self._stderr[-20:]))
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, session=True, timeout=30, **params):
        self._next_id += 1
        mid = self._next_id
        msg = {"id": mid, "method": method, "params": params}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while mid not in self._replies:
            m = self._read_message(deadline)
            if "id" in m:
                self._replies[m["id"]] = m
            elif "method" in m:
                self.events.append((m["method"], m.get("params", {}), m.get("sessionId")))
                if m["method"] in self.handlers:
                    self.handlers[m["method"]](m.get("params", {}))
        m = self._replies.pop(mid)
        if "error" in m:
            raise CDPError(f"{method}: {m['error']}")
        return m.get("result", {})

    def eval(self, expr, timeout=30):
        """The value of a JavaScript expression in the page (promises awaited)."""
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True, timeout=timeout)
        if "exceptionDetails" in r:
            raise CDPError(f"{expr!r}: {json.dumps(r['exceptionDetails'])[:800]}")
        return r["result"].get("value")

    def wait_for(self, expr, timeout=30, what=None):
        deadline = time.time() + timeout
        while True:
            v = self.eval(expr)
            if v:
                return v
            if time.time() > deadline:
                raise CDPError(f"timed out waiting for {what or expr}")
            time.sleep(0.1)

    def navigate(self, url):
        r = self.call("Page.navigate", url=url)
        if r.get("errorText"):
            raise CDPError(f"navigating to {url}: {r['errorText']}")
        self.wait_for("document.readyState === 'complete'", what="the page to load")

    def click(self, selector):
        """A real mouse click in the middle of the element."""
        box = self.eval(f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
                        f" return [r.x + r.width / 2, r.y + r.height / 2]; }})()")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def type_into(self, selector, text):
        """Focuses an input and types text into it as the keyboard would (input events)."""
        self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.focus(); e.select && e.select(); }})()")
        self.call("Input.insertText", text=text)

    def set_field(self, selector, value):
        """Types a settings value and leaves the field (its change event saves it)."""
        self.type_into(selector, str(value))
        self.eval(f"document.querySelector({json.dumps(selector)}).dispatchEvent(new Event('change'))")

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def intercept(self, url_pattern, respond):
        """Answers the page's requests matching url_pattern (a Fetch pattern, * wildcards) with
        respond(request) -> (status, content_type, body bytes) instead of the server."""
        def paused(params):
            status, ctype, body = respond(params["request"])
            self.call("Fetch.fulfillRequest", requestId=params["requestId"], responseCode=status,
                      responseHeaders=[{"name": "Content-Type", "value": ctype}], body=base64.b64encode(body).decode())
        self.handlers["Fetch.requestPaused"] = paused
        self.call("Fetch.enable", patterns=[{"urlPattern": url_pattern}])

    def sent_requests(self, url_part):
        """The requests (Network domain, enabled with Network.enable) whose URL holds url_part."""
        return [p["request"] for m, p, _ in self.events if m == "Network.requestWillBeSent" and url_part in p["request"]["url"]]

    def problems(self):
        """Exceptions and Content-Security-Policy reports the page produced."""
        out = []
        for method, params, _ in self.events:
            if method == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(params.get("exceptionDetails", {}))[:500])
            elif method == "Log.entryAdded":
                text = params.get("entry", {}).get("text", "")
                if "Content Security Policy" in text or "Refused to" in text:
                    out.append("CSP: " + text)
        return out

    def close(self):
        try:
            if self.proc.poll() is None:
                try:
                    os.write(self._to_child, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
                    self.proc.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    self.proc.kill()
                    self.proc.wait()
        finally:
            for fd in (self._to_child, self._from_child):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def reference_answer(server, prefix, message, max_tokens, api_key=None):
    """The non-streamed answer of POST /v1/chat/completions at temperature 0."""
    body = {"messages": [{"role": "user", "content": message}], "temperature": 0, "max_tokens": max_tokens}
    req = urllib.request.Request(server + prefix + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": "Bearer " + api_key} if api_key else {})})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)["choices"][0]["message"]["content"]


LAST_ANSWER = "[...document.querySelectorAll('#log .msg.assistant')].at(-1)"


def chat_turn(b, message, timeout=60):
    """Types `message`, clicks Send, waits for the answer to finish; its raw text and DOM text."""
    before = b.eval("document.querySelectorAll('#log .msg.assistant').length")
    b.type_into("#input", message)
    b.click("#send")
    b.wait_for(f"document.querySelectorAll('#log .msg.assistant').length > {before}", what="the answer to start")
    state = b.wait_for(f"(() => {{ const s = {LAST_ANSWER}.dataset.state; return s !== 'streaming' && s; }})()",
                       timeout=timeout, what="the streamed answer to finish")
    if state != "done":
        errors = b.eval("[...document.querySelectorAll('#log .msg.error')].map(e => e.textContent).join('; ')")
        raise CDPError(f"the answer ended '{state}': {errors}")
    raw = b.eval("window.mlxcelWebui.state.messages.at(-1).content")
    dom = b.eval(f"{LAST_ANSWER}.querySelector('.content').textContent")
    return raw, dom


def rendered_text(b, markdown):
    """textContent of `markdown` through the page's own renderer."""
    return b.eval(f"(() => {{ const d = document.createElement('div');"
                  f" d.innerHTML = window.mlxcelWebui.renderMarkdown({json.dumps(markdown)}); return d.textContent; }})()")


def run_check(server, prefix="", screenshot=None, message="What is the capital of France?", max_tokens=40,
              api_key=None, chromium=None, log=print):
    """The whole check against a live server; raises on any failure. Returns (answer, screenshot)."""
    chromium = chromium or find_chromium()
    if not chromium:
        raise CDPError("chromium is not installed (scripts/setup.sh installs Debian's chromium package)")
    url = server + prefix + "/webui/"
    with Browser(chromium) as b:
        b.navigate(url)
        b.wait_for("window.mlxcelWebui !== undefined", what="the page's script to run (blocked by its CSP?)")
        if api_key:
            # the page finds out from /v1/models that a key is needed and opens its settings
            b.wait_for("/API key/.test(document.getElementById('status').textContent)", what="the page to ask for the API key")
            assert b.eval("!document.getElementById('settings').hidden"), "the settings did not open for the API key"
            b.set_field("#api_key", api_key)
        # the model picker fills from /v1/models
        b.wait_for("document.getElementById('model').options.length > 0", what="the model picker to fill")
        b.eval("document.getElementById('settings').hidden = false")
        b.set_field("#temperature", 0)
        b.set_field("#max_tokens", max_tokens)
        saved = b.eval("JSON.parse(localStorage.getItem('mlxcel.webui.settings'))")
        assert saved["temperature"] == "0" and saved["max_tokens"] == str(max_tokens), saved
        b.eval("document.getElementById('settings').hidden = true")
        raw, dom = chat_turn(b, message)
        want = reference_answer(server, prefix, message, max_tokens, api_key)
        log(f"webui answer: {raw!r}")
        assert raw == want, f"the page's streamed answer {raw!r} differs from the non-streamed one {want!r}"
        assert dom == rendered_text(b, want), f"the page shows {dom!r}, rendering {want!r} gives something else"
        assert dom.strip(), "empty answer"
        problems = b.problems()
        assert not problems, problems
        shot = b.screenshot(screenshot) if screenshot else None
        if shot:
            log(f"webui screenshot: {os.path.abspath(shot)}")
        return raw, shot


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("server", help="the server's base URL, e.g. http://127.0.0.1:8080")
    ap.add_argument("--prefix", default="", help="its --api-prefix")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--message", default="What is the capital of France?")
    ap.add_argument("--max-tokens", type=int, default=40)
    ap.add_argument("--screenshot", default="build/test-output/webui.png")
    a = ap.parse_args()
    try:
        run_check(a.server.rstrip("/"), a.prefix, a.screenshot, a.message, a.max_tokens, a.api_key)
    except (CDPError, AssertionError) as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
