"""The server's VLM prefix cache (--enable-vlm-prefix-cache): a multi-turn conversation about the
same image reuses the cached rows past the image (the same slot's own cache, and another slot's
through the shared block cache), a different image with the same text does not, and the answers
are those of a server that caches nothing past an image. Checked on Idefics3 (an image is several
causal runs of rows), Gemma 3 (one bidirectional block, never cut), Qwen2-VL and Qwen3-VL (M-RoPE:
the rows after a cached image continue from the positions its grid set, DeepStack on Qwen3-VL)
from tests/fixtures/vlm (whose single-turn answers test_vision_e2e.py / test_vision.py check
against transformers)."""
import base64
import os

import pytest
import requests

from conftest import ROOT
from server_util import Server

FX = os.path.join(ROOT, "tests", "fixtures", "vlm")
# (turns of a few dozen words, so the second turn's prompt spans several 32-token KV blocks)
FIRST, SECOND = " ".join(f"w{i}" for i in range(20, 60)), " ".join(f"w{i}" for i in range(60, 90))
FAMILIES = ("idefics3", "gemma3", "qwen2_vl", "qwen3_vl")


def data_url(path):
    kind = "png" if path.endswith(".png") else "jpeg"
    with open(path, "rb") as f:
        return f"data:image/{kind};base64," + base64.b64encode(f.read()).decode()


def turn(image, text):
    return {"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_url(os.path.join(FX, image))}},
                                        {"type": "text", "text": text}]}


def ask(srv, messages, slot=None):
    body = {"messages": messages, "max_tokens": 4, "temperature": 0, "cache_prompt": True}
    if slot is not None:
        body["id_slot"] = slot
    r = requests.post(srv.url + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    out = r.json()
    return out["choices"][0]["message"]["content"], out["timings"]["cache_n"], out["usage"]["prompt_tokens"]


def conversation(image, first, answer, second):
    return [turn(image, first), {"role": "assistant", "content": answer}, {"role": "user", "content": second}]


@pytest.mark.parametrize("fam", FAMILIES)
def test_vlm_prefix_cache_reuses_rows_past_the_same_image_only(fam):
    model = os.path.join(FX, fam, "model")
    first, second = FIRST, SECOND
    plain = Server("-m", model, "-np", "2", "--prompt-cache-min-prefix", "0")
    try:
        a1, _, _ = ask(plain, [turn("image_a.png", first)], slot=0)
        conv_a = conversation("image_a.png", first, a1, second)
        conv_b = conversation("image_b.jpg", first, a1, second)
        want_a, plain_cached, n_a = ask(plain, conv_a, slot=0)
        want_b, _, _ = ask(plain, conv_b, slot=1)
    finally:
        plain.stop()
    # without the flag nothing past the first image is reused: the cached rows end before it (the
    # template's text before the image: a few tokens, under 24 in every family here)
    assert plain_cached < 24, plain_cached

    srv = Server("-m", model, "-np", "2", "--prompt-cache-min-prefix", "0", "--enable-vlm-prefix-cache")
    try:
        got1, _, _ = ask(srv, [turn("image_a.png", first)], slot=0)
        assert got1 == a1
        # the same slot: its own cache holds the first turn's prompt, image rows and answer
        got_a, cached_a, n = ask(srv, conv_a, slot=0)
        assert got_a == want_a and n == n_a
        assert cached_a > n_a // 2, (cached_a, n_a)
        # another slot: the shared block cache gives it the whole blocks of that prefix
        got_a2, cached_a2, _ = ask(srv, conv_a, slot=1)
        assert got_a2 == want_a
        assert cached_a2 >= 64, cached_a2
        # another image with the same text: nothing from the image on is reused
        got_b, cached_b, _ = ask(srv, conv_b, slot=1)
        assert got_b == want_b
        assert cached_b < 24, cached_b
        got_b0, cached_b0, _ = ask(srv, conv_b, slot=0)
        assert got_b0 == want_b
        assert cached_b0 < 24 or cached_b0 >= 32, cached_b0  # (slot 0 never ran image_b: at most its own text, or the shared blocks of slot 1's run)
    finally:
        srv.stop()
