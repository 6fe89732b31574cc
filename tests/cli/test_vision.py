"""`mlxcel generate --image` on a vision-language checkpoint against transformers end to end
(tests/fixtures/vlm/gemma3, gen_vlm_fixtures.py): a seeded tiny Gemma 3 with a word-level
tokenizer and the released chat template; transformers' Gemma3Processor (PIL image processor)
prepared the committed images and prompt, model.generate gave the greedy text. Bad images get one
clear error line naming the input."""
import json
import os
import struct
import zlib

from conftest import ROOT, assert_clean_error, run

FX = os.path.join(ROOT, "tests", "fixtures", "vlm")
MODEL = os.path.join(FX, "gemma3", "model")


def e2e(name):
    with open(os.path.join(FX, "gemma3", "reference.json")) as f:
        return next(c for c in json.load(f)["e2e"] if c["name"] == name)


def test_generate_with_images_matches_transformers():
    for name in ("one_image", "two_images"):
        c = e2e(name)
        args = ["generate", "-m", MODEL, "-p", c["prompt"], "-n", str(len(c["greedy"])), "--temp", "0", "--profile"]
        for img in c["images"]:
            args += ["--image", os.path.join(FX, img)]
        p = run(*args)
        assert p.returncode == 0, p.stderr
        assert p.stdout.rstrip("\n") == c["text"], (name, p.stdout, c["text"])
        assert f"Prompt tokens: {len(c['ids'])}" in p.stderr, p.stderr


def test_repl_image_command_matches_transformers():
    c = e2e("one_image")
    img = os.path.join(FX, c["images"][0])
    # /image then a message; a bad path is one error line and the REPL goes on; /clear drops the images
    p = run("generate", "-m", MODEL, "-n", str(len(c["greedy"])), "--temp", "0",
            input=f"/image {img}\n{c['prompt']}\n/image {FX}/missing.png\n/clear\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == c["text"], p.stdout
    assert "missing.png" in p.stderr and "Sanitizer" not in p.stderr
    # --image attaches to the first message of the REPL
    p = run("generate", "-m", MODEL, "-n", str(len(c["greedy"])), "--temp", "0", "--image", img, input=c["prompt"] + "\n")
    assert p.returncode == 0 and p.stdout.splitlines()[0] == c["text"], (p.stdout, p.stderr)
    # raw turns carry no media
    p = run("generate", "-m", MODEL, "-n", "2", "--no-chat-template", input=f"/image {img}\n")
    assert "/image needs the chat template" in p.stderr


def png_header(w, h):
    """A PNG signature and IHDR declaring w x h RGB, then a truncated IDAT."""
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return b"\x89PNG\r\n\x1a\n" + chunk + struct.pack(">I", 100) + b"IDAT" + b"\x00" * 10


def test_bad_images_are_clean_errors(tmp_path):
    with open(os.path.join(FX, "image_a.png"), "rb") as f:
        good = f.read()
    cases = {
        "truncated.png": good[: len(good) // 2],
        "garbage.jpg": b"\xff\xd8\xff\xe0" + os.urandom(200),
        "text.png": b"not an image at all\n",
        "empty.gif": b"",
        "bomb.png": png_header(100000, 100000),
    }
    for fname, data in cases.items():
        path = tmp_path / fname
        path.write_bytes(data)
        p = run("generate", "-m", MODEL, "-p", "w10", "-n", "2", "--image", str(path))
        assert_clean_error(p, fname)
    p = run("generate", "-m", MODEL, "-p", "w10", "-n", "2", "--image", str(tmp_path / "missing.png"))
    assert_clean_error(p, "missing.png")


# --- the server: OpenAI image_url parts -----------------------------------------------------------

import base64  # noqa: E402

import requests  # noqa: E402

from server_util import Server, metrics  # noqa: E402


def data_url(path):
    kind = "png" if path.endswith(".png") else "jpeg"
    with open(path, "rb") as f:
        return f"data:image/{kind};base64," + base64.b64encode(f.read()).decode()


def chat(url, content, n=8, **extra):
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": n, "temperature": 0, **extra}
    return requests.post(url + "/v1/chat/completions", json=body, timeout=120)


def test_server_image_url_parts_match_transformers(tmp_path):
    srv = Server("-m", MODEL, "--media-path", FX)
    try:
        props = requests.get(srv.url + "/props", timeout=10).json()
        assert props["modalities"]["vision"] is True
        for name in ("one_image", "two_images"):
            c = e2e(name)
            # data: URLs for the first image, a file under --media-path for the second
            parts = [{"type": "image_url", "image_url": {"url": data_url(os.path.join(FX, c["images"][0]))}}]
            parts += [{"type": "image_url", "image_url": {"url": "file://" + os.path.join(FX, f)}} for f in c["images"][1:]]
            parts.append({"type": "text", "text": c["prompt"]})
            for repeat in range(2):  # a repeated request (the prompt cache must not serve the images' positions wrongly)
                r = chat(srv.url, parts, n=len(c["greedy"]))
                assert r.status_code == 200, r.text
                out = r.json()
                assert out["choices"][0]["message"]["content"] == c["text"], (name, repeat, out)
                assert out["usage"]["prompt_tokens"] == len(c["ids"])
        # Anthropic image blocks (base64 sources), and count_tokens with them
        c = e2e("two_images")
        blocks = []
        for f in c["images"]:
            with open(os.path.join(FX, f), "rb") as fh:
                blocks.append({"type": "image", "source": {"type": "base64", "media_type": "image/png" if f.endswith(".png") else "image/jpeg",
                                                           "data": base64.b64encode(fh.read()).decode()}})
        body = {"model": "x", "max_tokens": len(c["greedy"]), "temperature": 0,
                "messages": [{"role": "user", "content": blocks + [{"type": "text", "text": c["prompt"]}]}]}
        r = requests.post(srv.url + "/v1/messages", json=body, timeout=120)
        assert r.status_code == 200, r.text
        assert r.json()["content"][0]["text"] == c["text"], r.json()
        u = r.json()["usage"]
        assert u["input_tokens"] + u.get("cache_read_input_tokens", 0) == len(c["ids"]), u
        r = requests.post(srv.url + "/v1/messages/count_tokens", json=body, timeout=120)
        assert r.status_code == 200 and r.json()["input_tokens"] == len(c["ids"]), r.text
        # the same prompt with the images swapped: a different prefix past the first image
        c = e2e("two_images")
        swapped = [{"type": "image_url", "image_url": {"url": data_url(os.path.join(FX, f))}} for f in reversed(c["images"])]
        r = chat(srv.url, swapped + [{"type": "text", "text": c["prompt"]}], n=len(c["greedy"]))
        assert r.status_code == 200, r.text
        # bad inputs: 400 with a message, and the server stays up
        bad = {
            "remote": {"url": "https://example.com/cat.png"},
            "escape": {"url": "file://" + os.path.join(FX, "..", "..", "..", "README.md")},
            "notb64": {"url": "data:image/png;base64,@@@@"},
            "garbage": {"url": "data:image/png;base64," + base64.b64encode(b"not an image").decode()},
            "text": {"url": "data:text/plain;base64,aGk="},
        }
        for why, iu in bad.items():
            r = chat(srv.url, [{"type": "image_url", "image_url": iu}, {"type": "text", "text": "w10"}])
            assert r.status_code == 400, (why, r.text)
            assert r.json()["error"]["message"], why
        r = chat(srv.url, [{"type": "text", "text": "w10 w11"}], n=2)
        assert r.status_code == 200, r.text
    finally:
        srv.stop()


def test_server_without_media_path_refuses_files_and_text_model_refuses_images():
    srv = Server("-m", MODEL)
    try:
        c = e2e("one_image")
        r = chat(srv.url, [{"type": "image_url", "image_url": {"url": "file://" + os.path.join(FX, c["images"][0])}},
                           {"type": "text", "text": "w10"}])
        assert r.status_code == 400 and "--media-path" in r.json()["error"]["message"], r.text
    finally:
        srv.stop()
    srv = Server()
    try:
        r = chat(srv.url, [{"type": "image_url", "image_url": {"url": data_url(os.path.join(FX, "image_a.png"))}},
                           {"type": "text", "text": "hi"}])
        assert r.status_code == 400, r.text
        props = requests.get(srv.url + "/props", timeout=10).json()
        assert props["modalities"]["vision"] is False
    finally:
        srv.stop()


def _counters(srv):
    m = metrics(srv)
    return m.get("vision_encodes_total", -1), m.get("vision_cache_hits_total", -1)


def test_server_vision_cache_reuses_encoded_images():
    """An image sent again (the next turn of a conversation carries it again) is copied from the
    vision cache instead of running the tower: the same answers, one encode per distinct image;
    --vision-cache-size 0 encodes every time."""
    c = e2e("two_images")
    parts = [{"type": "image_url", "image_url": {"url": data_url(os.path.join(FX, f))}} for f in c["images"]]
    parts.append({"type": "text", "text": c["prompt"]})
    for size, encodes, hits in (("20", 2, 4), ("0", 6, 0)):
        srv = Server("-m", MODEL, "--metrics", "--vision-cache-size", size)
        try:
            for _ in range(3):
                r = chat(srv.url, parts, n=len(c["greedy"]))
                assert r.status_code == 200, r.text
                assert r.json()["choices"][0]["message"]["content"] == c["text"], (size, r.json())
            assert _counters(srv) == (encodes, hits), (size, _counters(srv))
        finally:
            srv.stop()
    r = run("serve", "-m", MODEL, "--vision-cache-size", "-1", "--port", "0")
    assert_clean_error(r, "--vision-cache-size")
