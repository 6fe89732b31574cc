"""`mlxcel serve --webui`: the page at {api_prefix}/webui/ over HTTP (headers, no external assets,
the redirect, off without the flag, public with --api-key while the API is not), and one chat turn
in headless Chromium (scripts/webui_browser_test.py), which fails when chromium is missing."""
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


def test_webui_without_a_model_names_router_mode():
    p = run("serve", "--webui", "--port", "0")
    assert p.returncode != 0
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "router mode" in lines[0] and "not available in this build" in lines[0], p.stderr


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
