"""`mlxcel serve --webui`: the page at {api_prefix}/webui/ over HTTP (headers, no external assets,
the redirect, off without the flag, public with --api-key while the API is not), and one chat turn
in headless Chromium (scripts/webui_browser_test.py), which fails when chromium is missing."""
import json
import os
import re
import sys

import pytest
import requests

from conftest import ROOT, run
from server_util import Server

sys.path.insert(0, os.path.join(ROOT, "scripts"))
import webui_browser_test as wb  # noqa: E402

OUT_DIR = os.path.join(ROOT, "build", "test-output")


@pytest.fixture(scope="module")
def ui():
    s = Server("--webui")
    yield s
    assert s.stop() == 0


def test_page_is_html_with_the_security_headers(ui):
    r = requests.get(ui.url + "/webui/")
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["X-Frame-Options"] == "DENY"
    assert r.headers["Referrer-Policy"] == "no-referrer"
    csp = dict(d.strip().split(" ", 1) for d in r.headers["Content-Security-Policy"].split(";"))
    assert csp["default-src"] == "'none'" and csp["connect-src"] == "'self'" and csp["frame-ancestors"] == "'none'"
    assert csp["base-uri"] == "'none'" and csp["form-action"] == "'none'"
    # the inline style and script are allowed by their hashes alone, never 'unsafe-inline'
    assert "unsafe" not in r.headers["Content-Security-Policy"]
    for d in ("script-src", "style-src"):
        assert re.fullmatch(r"'sha256-[A-Za-z0-9+/]{43}='", csp[d]), csp[d]
    page = r.text
    assert page.startswith("<!doctype html>")
    assert page.count("<script>") == 1 and page.count("<style>") == 1
    assert requests.head(ui.url + "/webui/").status_code == 200


def test_page_has_no_external_assets(ui):
    page = requests.get(ui.url + "/webui/").text
    # no src/href/url() naming another host, no <link>, <img>, <iframe> or script/style files
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I), "external URL in the page"
    assert not re.search(r"url\(\s*['\"]?\s*(https?:)?//", page, re.I)
    assert not re.search(r"<(link|img|iframe|object|embed)\b", page, re.I)
    assert not re.search(r"<script[^>]+src", page, re.I)
    assert not re.search(r"@import", page, re.I)


def test_webui_without_slash_redirects(ui):
    r = requests.get(ui.url + "/webui", allow_redirects=False)
    assert r.status_code == 301 and r.headers["Location"] == "/webui/"
    assert requests.get(ui.url + "/webui").url.endswith("/webui/")
    assert requests.post(ui.url + "/webui/", data="x").status_code == 405
    assert requests.get(ui.url + "/webui/other").status_code == 404


def test_webui_is_501_without_the_flag():
    s = Server()
    try:
        for path in ("/webui", "/webui/"):
            r = requests.get(s.url + path)
            assert r.status_code == 501, r.text
            assert "--webui" in r.json()["error"]["message"]
    finally:
        assert s.stop() == 0


def test_no_webui_and_env():
    # LLAMA_ARG_UI turns it on, --no-webui (a later flag) off again
    s = Server("--no-ui", env={"LLAMA_ARG_UI": "1"})
    try:
        assert requests.get(s.url + "/webui/").status_code == 501
    finally:
        assert s.stop() == 0


def test_webui_under_api_prefix_with_api_key():
    s = Server("--ui", "--api-prefix", "/llama", "--api-key", "sekrit")
    try:
        # the page is static and public: it loads without the key ...
        r = requests.get(s.url + "/llama/webui/")
        assert r.status_code == 200 and "<title>mlxcel</title>" in r.text
        assert "sekrit" not in r.text
        r = requests.get(s.url + "/llama/webui", allow_redirects=False)
        assert r.status_code == 301 and r.headers["Location"] == "/llama/webui/"
        assert requests.get(s.url + "/webui/").status_code == 401  # outside the prefix: not the page
        # ... while the API it talks to needs it
        assert requests.get(s.url + "/llama/v1/models").status_code == 401
        ok = requests.get(s.url + "/llama/v1/models", headers={"Authorization": "Bearer sekrit"})
        assert ok.status_code == 200 and ok.json()["data"]
        # the browser: the page asks for the key, then chats with it
        wb.run_check(s.url, "/llama", api_key="sekrit", message="Say hello.", max_tokens=8)
    finally:
        assert s.stop() == 0


def test_webui_without_a_model_starts_the_router_without_autoload(tmp_path):
    """spec: --webui without a model starts router mode with autoload off (no model needed)."""
    from test_server_router import Router
    rt = Router("--webui", env={"MLXCEL_MODELS_DIR": str(tmp_path), "HF_HUB_CACHE": str(tmp_path)})
    try:
        assert "autoload off" in rt.log(), rt.log()
        assert requests.get(rt.url + "/v1/models").json()["data"] == []
        page = requests.get(rt.url + "/webui/")
        assert page.status_code == 200 and "<html" in page.text.lower()
    finally:
        assert rt.stop() == 0


def test_webui_flag_is_not_in_help():
    p = run("serve", "--help")
    assert p.returncode == 0 and "--webui" not in p.stdout and "--ui" not in p.stdout.replace("--ui-", "")


def test_browser_chat_turn_matches_the_api(ui):
    """Headless Chromium: load the page, set temperature 0, send a message, wait for the streamed
    answer, compare it with the non-streamed one, save a screenshot. Fails if chromium is missing."""
    assert wb.find_chromium(), "chromium is not installed: scripts/setup.sh installs Debian's chromium package"
    shot = os.path.join(OUT_DIR, "webui.png")
    if os.path.exists(shot):
        os.remove(shot)
    answer, path = wb.run_check(ui.url, "", screenshot=shot, message="What is the capital of France?", max_tokens=40)
    assert answer and os.path.getsize(path) > 1000
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    print(f"\nwebui screenshot: {path}")


def _browser():
    chromium = wb.find_chromium()
    assert chromium, "chromium is not installed: scripts/setup.sh installs Debian's chromium package"
    return wb.Browser(chromium)


def _answers(b):
    return b.eval("document.querySelectorAll('#log .msg.assistant').length")


def test_browser_model_picker_regenerate_and_stop(ui):
    """The picker lists /v1/models (two models here, the second one faked) and the chosen one goes
    in the request with the page's settings; Regenerate answers the last message again in place;
    Stop ends a long answer early and the page takes the next message."""
    real = requests.get(ui.url + "/v1/models").json()["data"][0]["id"]
    models = {"object": "list", "data": [{"id": real, "object": "model"}, {"id": "mlxcel-test/other", "object": "model"}]}
    with _browser() as b:
        b.intercept("*/v1/models", lambda req: (200, "application/json", json.dumps(models).encode()))
        b.call("Network.enable")
        b.navigate(ui.url + "/webui/")
        b.wait_for("document.getElementById('model').options.length === 2", what="the picker to list both models")
        assert b.eval("document.getElementById('model').disabled") is False
        b.eval("(() => { const m = document.getElementById('model'); m.value = 'mlxcel-test/other';"
               " m.dispatchEvent(new Event('change')); })()")
        b.eval("document.getElementById('settings').hidden = false")
        b.set_field("#temperature", 0)
        b.set_field("#max_tokens", 12)
        b.set_field("#system", "You are terse.")
        first, _ = wb.chat_turn(b, "Name a color.")
        sent = [r for r in b.sent_requests("/v1/chat/completions") if r["method"] == "POST"]
        body = json.loads(sent[-1]["postData"])
        assert body["model"] == "mlxcel-test/other" and body["stream"] is True
        assert body["temperature"] == 0 and body["max_tokens"] == 12
        assert body["messages"] == [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a color."}]
        assert b.eval("JSON.parse(localStorage.getItem('mlxcel.webui.settings')).model") == "mlxcel-test/other"

        # Regenerate: the last answer is replaced (temperature 0: by the same text)
        b.click("#regen")
        b.wait_for(f"(() => {{ const s = {wb.LAST_ANSWER}.dataset.state; return s === 'done' || s === 'error'; }})() "
                   f"&& window.mlxcelWebui.state.messages.length === 2 && !window.mlxcelWebui.state.busy",
                   timeout=60, what="the regenerated answer")
        assert _answers(b) == 1
        assert b.eval("window.mlxcelWebui.state.messages.at(-1).content") == first
        assert len([r for r in b.sent_requests("/v1/chat/completions") if r["method"] == "POST"]) == 2

        # Stop: a long answer, stopped once it is streaming
        b.set_field("#max_tokens", 2000)
        b.type_into("#input", "Write a very long story about a dragon and a knight.")
        b.click("#send")
        b.wait_for(f"(() => {{ const a = {wb.LAST_ANSWER}; return a.dataset.state === 'streaming'"
                   f" && a.querySelector('.content').textContent.length > 20; }})()", timeout=60, what="the long answer to stream")
        b.click("#stop")
        state = b.wait_for(f"{wb.LAST_ANSWER}.dataset.state !== 'streaming' && {wb.LAST_ANSWER}.dataset.state", timeout=10,
                           what="the answer to stop")
        assert state == "stopped"
        assert b.eval("document.getElementById('send').disabled") is False
        assert b.eval("document.getElementById('stop').disabled") is True
        partial = b.eval("window.mlxcelWebui.state.messages.at(-1).content")
        assert partial and len(partial) < 2000
        # the server is free again: the next message is answered
        wb.chat_turn(b, "Thanks.")
        assert not b.problems(), b.problems()


def test_browser_renders_reasoning_and_markdown_safely(ui):
    """A streamed answer (faked SSE) with reasoning_content and Markdown: the reasoning sits in a
    closed <details>, the Markdown becomes headings, lists, code and links, and no HTML of the
    model's gets through."""
    content = ("# Title\n\nSome **bold**, *em* and `code`.\n\n- one\n- two\n\n```python\nprint('<b>hi</b>')\n```\n\n"
               "[site](https://example.com/x) [bad](javascript:alert(1)) <img src=x onerror=alert(1)><script>alert(2)</script>")
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "reasoning_content": "Let me think"}}]},
              {"choices": [{"index": 0, "delta": {"reasoning_content": " about it."}}]}]
    chunks += [{"choices": [{"index": 0, "delta": {"content": content[i:i + 7]}}]} for i in range(0, len(content), 7)]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    sse = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    with _browser() as b:
        b.intercept("*/v1/chat/completions", lambda req: (200, "text/event-stream", sse.encode()))
        b.navigate(ui.url + "/webui/")
        raw, _ = wb.chat_turn(b, "Show me Markdown.")
        assert raw == content
        got = b.eval(f"""(() => {{
            const a = {wb.LAST_ANSWER}, c = a.querySelector('.content'), d = a.querySelector('details');
            return {{reasoning: d && d.textContent, open: d && d.open,
                     tags: [...c.querySelectorAll('*')].map(e => e.tagName.toLowerCase()),
                     attrs: [...c.querySelectorAll('*')].flatMap(e => [...e.attributes].map(x => x.name)),
                     links: [...c.querySelectorAll('a')].map(e => e.getAttribute('href')),
                     code: c.querySelector('pre code').textContent, text: c.textContent}};
        }})()""")
        assert got["reasoning"] == "ReasoningLet me think about it." and got["open"] is False
        assert {"h1", "strong", "em", "code", "ul", "li", "pre", "a", "p"} <= set(got["tags"])
        assert set(got["tags"]) <= {"h1", "strong", "em", "code", "ul", "li", "pre", "span", "a", "p", "br"}, got["tags"]
        assert set(got["attrs"]) <= {"href", "target", "rel", "class"}, got["attrs"]
        assert got["links"] == ["https://example.com/x"]
        assert got["code"] == "print('<b>hi</b>')"
        assert "<img src=x onerror=alert(1)><script>alert(2)</script>" in got["text"]
        assert not b.problems(), b.problems()
        b.screenshot(os.path.join(OUT_DIR, "webui-markdown.png"))
