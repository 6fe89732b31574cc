"""test_server_cors.py - the CORS answers of `mlxcel serve` as the spec's serve table describes them:
--cors-origins (default *: with --cors-credentials, on by default, the request's Origin is
reflected; `localhost` reflects only loopback origins; any other value goes out as it is),
--allowed-origins (exact list, exclusive with --cors-origins), --cors-headers / --cors-methods on
preflight, --no-cors-credentials."""
import http.client
import urllib.parse

from conftest import run
from server_util import Server


def ask(url, method, path, origin, req_headers=None):
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    h = {"Origin": origin} if origin else {}
    if method == "OPTIONS":
        h["Access-Control-Request-Method"] = "POST"
        if req_headers:
            h["Access-Control-Request-Headers"] = req_headers
    c.request(method, path, headers=h)
    r = c.getresponse()
    r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}


def test_default_reflects_origin_with_credentials():
    s = Server()
    try:
        st, h = ask(s.url, "GET", "/health", "http://a.example")
        assert st == 200 and h["access-control-allow-origin"] == "http://a.example"
        assert h["access-control-allow-credentials"] == "true"
        st, h = ask(s.url, "OPTIONS", "/v1/chat/completions", "http://a.example", "content-type, x-custom")
        assert st == 200, st  # (llama-server answers a preflight 200)
        assert h["access-control-allow-origin"] == "http://a.example"
        assert h["access-control-allow-methods"] == "GET,POST,OPTIONS"
        assert h["access-control-allow-headers"] == "content-type, x-custom"  # * echoes what was asked
        st, h = ask(s.url, "GET", "/health", None)
        assert h.get("access-control-allow-origin") == "*"  # no Origin: nothing to reflect
    finally:
        s.stop()


def test_no_credentials_star_and_fixed_lists():
    s = Server("--no-cors-credentials", "--cors-methods", "POST", "--cors-headers", "authorization")
    try:
        st, h = ask(s.url, "OPTIONS", "/v1/chat/completions", "http://a.example", "x-other")
        assert h["access-control-allow-origin"] == "*" and "access-control-allow-credentials" not in h
        assert h["access-control-allow-methods"] == "POST" and h["access-control-allow-headers"] == "authorization"
    finally:
        s.stop()
    s = Server("--cors-origins", "http://x.example")
    try:
        _, h = ask(s.url, "GET", "/health", "http://other.example")
        assert h["access-control-allow-origin"] == "http://x.example"
    finally:
        s.stop()


def test_localhost_reflects_only_loopback_origins():
    s = Server("--cors-origins", "localhost")
    try:
        for o in ("http://localhost:3000", "http://127.0.0.1:8081", "http://[::1]:5173", "https://localhost"):
            _, h = ask(s.url, "GET", "/health", o)
            assert h.get("access-control-allow-origin") == o, o
        for o in ("http://evil.example", "http://localhost.evil.example", "http://127.0.0.1.nip.io"):
            _, h = ask(s.url, "GET", "/health", o)
            assert "access-control-allow-origin" not in h, o
    finally:
        s.stop()


def test_allowed_origins_exact_match():
    s = Server("--allowed-origins", "http://a.example, http://b.example:8080")
    try:
        _, h = ask(s.url, "GET", "/health", "http://b.example:8080")
        assert h["access-control-allow-origin"] == "http://b.example:8080"
        for o in ("http://c.example", "http://b.example", "http://a.example.evil"):
            _, h = ask(s.url, "GET", "/health", o)
            assert "access-control-allow-origin" not in h, o
    finally:
        s.stop()
    p = run("serve", "--allowed-origins", "http://a.example", "--cors-origins", "*", "-m", "x", "--port", "0")
    assert p.returncode == 2 and "mutually exclusive" in p.stderr
