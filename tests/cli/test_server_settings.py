"""GET / PATCH /v1/settings (`serve --settings`): the request defaults read and changed at run time.
What a PATCH sets must be what the next request without its own values runs with (checked through
/completion's reported settings and token counts and /props), a bad value or name changes nothing,
and the endpoint is off without --settings and refused at startup without an API key."""
import time

import requests

from conftest import run
from server_util import SMOL_REPO, Server

KEY = {"Authorization": "Bearer k3y"}


def test_settings_needs_an_api_key():
    p = run("serve", "-m", SMOL_REPO, "--port", "0", "--settings", timeout=120)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert p.returncode == 1 and lines and lines[-1].startswith("error: --settings needs --api-key"), p.stderr


def test_settings_off_without_the_flag():
    s = Server("-c", "2048")
    try:
        r = requests.get(s.url + "/v1/settings")
        assert r.status_code == 501 and "--settings" in r.json()["error"]["message"], r.text
    finally:
        assert s.stop() == 0


def test_get_patch_and_requests_follow():
    s = Server("--settings", "--api-key", "k3y", "--temp", "0.7", "-c", "2048")
    try:
        assert requests.get(s.url + "/v1/settings").status_code == 401
        g = requests.get(s.url + "/v1/settings", headers=KEY)
        assert g.status_code == 200, g.text
        cur = g.json()
        assert cur["object"] == "settings"
        st = cur["settings"]
        assert abs(st["temperature"] - 0.7) < 1e-6 and st["top_k"] == 40 and st["ignore_eos"] is False
        props = requests.get(s.url + "/props", headers=KEY).json()["default_generation_settings"]["params"]
        assert abs(props["temperature"] - st["temperature"]) < 1e-6 and props["top_k"] == st["top_k"]

        # a good change: the answer and GET show it, and requests without their own values run with it
        r = requests.patch(s.url + "/v1/settings", headers=KEY, json={"temperature": 0, "max_tokens": 5, "top_k": 1, "ignore_eos": True})
        assert r.status_code == 200, r.text
        st = r.json()["settings"]
        assert st["temperature"] == 0 and st["max_tokens"] == 5 and st["top_k"] == 1 and st["ignore_eos"] is True
        assert requests.get(s.url + "/v1/settings", headers=KEY).json() == r.json()
        props = requests.get(s.url + "/props", headers=KEY).json()["default_generation_settings"]["params"]
        assert props["temperature"] == 0 and props["n_predict"] == 5 and props["top_k"] == 1 and props["ignore_eos"] is True
        outs = []
        for _ in range(2):
            c = requests.post(s.url + "/completion", headers=KEY, json={"prompt": "Once upon a time"}, timeout=120)
            assert c.status_code == 200, c.text
            j = c.json()
            assert j["tokens_predicted"] == 5 and j["generation_settings"]["temperature"] == 0, j
            outs.append(j["content"])
        assert outs[0] == outs[1]  # greedy
        # a request's own values still win over the defaults
        c = requests.post(s.url + "/completion", headers=KEY, json={"prompt": "Once upon a time", "n_predict": 2}, timeout=120)
        assert c.json()["tokens_predicted"] == 2

        # bad values and names are 400 and change nothing
        before = requests.get(s.url + "/v1/settings", headers=KEY).json()
        for body, needle in [({"top_k": -1}, "'top_k' must be >= 0"), ({"temperature": "hot"}, "temperature"),
                             ({"bogus": 1}, "'bogus' is not a setting"), ({"temperature": 0.5, "seed": 3}, "'seed' is not a setting"),
                             ({"top_p": 0.5, "min_p": 7}, "'min_p' must be between 0 and 1")]:
            b = requests.patch(s.url + "/v1/settings", headers=KEY, json=body)
            assert b.status_code == 400 and needle in b.json()["error"]["message"], (body, b.text)
        assert requests.patch(s.url + "/v1/settings", headers=KEY, data="[1]").status_code == 400
        assert requests.get(s.url + "/v1/settings", headers=KEY).json() == before
        assert requests.post(s.url + "/v1/settings", headers=KEY, json={}).status_code == 405
    finally:
        assert s.stop() == 0


def test_settings_outlive_sleeping():
    s = Server("--settings", "--api-key", "k3y", "--sleep-idle-seconds", "1", "-r", "zzz", "-c", "2048")
    try:
        assert requests.patch(s.url + "/v1/settings", headers=KEY, json={"max_tokens": 3, "temperature": 0}).status_code == 200
        for _ in range(2):  # (each reload used to append the -r strings to the defaults again)
            deadline = time.time() + 60
            while not requests.get(s.url + "/props", headers=KEY).json()["is_sleeping"]:
                assert time.time() < deadline
                time.sleep(0.3)
            c = requests.post(s.url + "/completion", headers=KEY, json={"prompt": "Hello"}, timeout=120)
            assert c.status_code == 200 and c.json()["tokens_predicted"] == 3, c.text
        st = requests.get(s.url + "/v1/settings", headers=KEY).json()["settings"]
        assert st["max_tokens"] == 3 and st["temperature"] == 0
    finally:
        assert s.stop() == 0
