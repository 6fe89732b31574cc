"""`mlxcel generate --image` and the server's image_url parts on an InternVL checkpoint against
transformers end to end (tests/fixtures/vlm/internvl, gen_vlm_internvl.py): a seeded tiny
InternVLForConditionalGeneration (InternViT with layer scales, pixel shuffle, the LayerNorm + GELU
projector, a Qwen2 text model) with a word-level tokenizer ("\\n" an added token) and a Qwen-style
chat template that writes <IMG_CONTEXT> for an image; transformers' InternVLProcessor
(GotOcr2ImageProcessor's PIL backend, crop_to_patches) prepared the committed images (three aspect
ratios, so three tile counts) and the prompt, model.generate gave the greedy text."""
import base64
import json
import os

import requests

from conftest import ROOT, run
from server_util import Server

FX = os.path.join(ROOT, "tests", "fixtures", "vlm")
MODEL = os.path.join(FX, "internvl", "model")


def e2e():
    with open(os.path.join(FX, "internvl", "reference.json")) as f:
        return json.load(f)["e2e"]


def test_generate_with_images_matches_transformers():
    for c in e2e():
        args = ["generate", "-m", MODEL, "-p", c["prompt"], "-n", str(len(c["greedy"])), "--temp", "0", "--profile"]
        for img in c["images"]:
            args += ["--image", os.path.join(FX, img)]
        p = run(*args)
        assert p.returncode == 0, (c["name"], p.stderr)
        assert p.stdout.rstrip("\n") == c["text"], (c["name"], p.stdout, c["text"])
        # the processor's count: the template's tokens and each image's tiles' context tokens
        assert f"Prompt tokens: {len(c['ids'])}" in p.stderr, p.stderr


def data_url(path):
    kind = "png" if path.endswith(".png") else "jpeg"
    with open(path, "rb") as f:
        return f"data:image/{kind};base64," + base64.b64encode(f.read()).decode()


def test_server_image_url_parts_match_transformers():
    # prefill chunks of 7 tokens: each image's causal rows run across several chunks
    srv = Server("-m", MODEL, "--prefill-chunk-size", "7")
    try:
        for c in e2e():
            parts = [{"type": "image_url", "image_url": {"url": data_url(os.path.join(FX, f))}} for f in c["images"]]
            parts.append({"type": "text", "text": c["prompt"]})
            body = {"messages": [{"role": "user", "content": parts}], "max_tokens": len(c["greedy"]), "temperature": 0}
            r = requests.post(srv.url + "/v1/chat/completions", json=body, timeout=120)
            assert r.status_code == 200, r.text
            out = r.json()
            assert out["choices"][0]["message"]["content"] == c["text"], (c["name"], out)
            assert out["usage"]["prompt_tokens"] == len(c["ids"])
    finally:
        srv.stop()
