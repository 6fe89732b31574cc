"""`mlxcel generate --image` and the server's image_url parts on Qwen2-VL / Qwen2.5-VL / Qwen3-VL
(and -MoE) and GLM-4.1V checkpoints against transformers end to end (tests/fixtures/vlm/qwen2_vl, qwen2_5_vl, qwen3_vl;
gen_vlm_qwen2vl.py):
seeded tiny checkpoints with a word-level tokenizer and the released Qwen2-VL chat template;
transformers' Qwen2VLProcessor / Qwen3VLProcessor (PIL image processor: smart_resize to each image's own grid)
prepared the committed images and prompt, model.generate gave the greedy text (M-RoPE positions
past the images, carried into decoding; Qwen3-VL's DeepStack features added to the image rows in
the first layers, also when the server's prefill chunks end inside the prompt)."""
import base64
import json
import os

import pytest
import requests

from conftest import ROOT, run
from server_util import Server

FX = os.path.join(ROOT, "tests", "fixtures", "vlm")
FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "glm4v", "glm4v_moe")


def e2e(fam, name):
    with open(os.path.join(FX, fam, "reference.json")) as f:
        return next(c for c in json.load(f)["e2e"] if c["name"] == name)


@pytest.mark.parametrize("fam", FAMILIES)
def test_generate_with_images_matches_transformers(fam):
    for name in ("one_image", "two_images"):
        c = e2e(fam, name)
        args = ["generate", "-m", os.path.join(FX, fam, "model"), "-p", c["prompt"], "-n", str(len(c["greedy"])), "--temp", "0",
                "--profile"]
        for img in c["images"]:
            args += ["--image", os.path.join(FX, img)]
        p = run(*args)
        assert p.returncode == 0, p.stderr
        assert p.stdout.rstrip("\n") == c["text"], (fam, name, p.stdout, c["text"])
        assert f"Prompt tokens: {len(c['ids'])}" in p.stderr, p.stderr


def data_url(path):
    kind = "png" if path.endswith(".png") else "jpeg"
    with open(path, "rb") as f:
        return f"data:image/{kind};base64," + base64.b64encode(f.read()).decode()


@pytest.mark.parametrize("fam,chunk", [("qwen2_5_vl", None), ("qwen3_vl", "8")])
def test_server_image_url_parts_match_transformers(fam, chunk):
    srv = Server("-m", os.path.join(FX, fam, "model"), *(["--prefill-chunk-size", chunk] if chunk else []))
    try:
        for name in ("one_image", "two_images", "one_image"):
            c = e2e(fam, name)
            parts = [{"type": "image_url", "image_url": {"url": data_url(os.path.join(FX, f))}} for f in c["images"]]
            parts.append({"type": "text", "text": c["prompt"]})
            for repeat in range(2):  # repeated: a reused slot must not keep the last request's position delta
                body = {"messages": [{"role": "user", "content": parts}], "max_tokens": len(c["greedy"]), "temperature": 0}
                r = requests.post(srv.url + "/v1/chat/completions", json=body, timeout=120)
                assert r.status_code == 200, r.text
                out = r.json()
                assert out["choices"][0]["message"]["content"] == c["text"], (name, repeat, out)
                assert out["usage"]["prompt_tokens"] == len(c["ids"])
    finally:
        srv.stop()
