"""`mlxcel generate --image` and the server's image_url parts on LLaVA checkpoints against
transformers end to end (tests/fixtures/vlm/llava and llava_siglip, gen_vlm_llava.py): seeded tiny
LlavaForConditionalGeneration models (a CLIP tower over Llama as llava-1.5, a SigLIP tower over
Qwen 2 as llava-interleave) with a word-level tokenizer that adds BOS and llava-1.5's chat template
("USER: <image>\\n... ASSISTANT:"); transformers' LlavaProcessor (PIL image processor) prepared the
committed images (three aspect ratios) and the prompt, model.generate gave the greedy text."""
import base64
import json
import os

import requests

from conftest import ROOT, run
from server_util import Server

FX = os.path.join(ROOT, "tests", "fixtures", "vlm")
CASES = ("llava", "llava_siglip")


def e2e(case):
    with open(os.path.join(FX, case, "reference.json")) as f:
        return json.load(f)["e2e"]


def test_generate_with_images_matches_transformers():
    for case in CASES:
        model = os.path.join(FX, case, "model")
        for c in e2e(case):
            args = ["generate", "-m", model, "-p", c["prompt"], "-n", str(len(c["greedy"])), "--temp", "0", "--profile"]
            for img in c["images"]:
                args += ["--image", os.path.join(FX, img)]
            p = run(*args)
            assert p.returncode == 0, (case, c["name"], p.stderr)
            assert p.stdout.rstrip("\n") == c["text"], (case, c["name"], p.stdout, c["text"])
            # the processor's count: BOS, the template's words and tokens_per_image per image
            assert f"Prompt tokens: {len(c['ids'])}" in p.stderr, (case, p.stderr)


def test_image_marker_count_must_match():
    model = os.path.join(FX, "llava", "model")
    p = run("generate", "-m", model, "--no-chat-template", "-p", "USER: <image> <image> w10 ASSISTANT:", "-n", "2",
            "--image", os.path.join(FX, "image_a.png"))
    assert p.returncode != 0 and "image markers" in p.stderr, p.stderr


def data_url(path):
    kind = "png" if path.endswith(".png") else "jpeg"
    with open(path, "rb") as f:
        return f"data:image/{kind};base64," + base64.b64encode(f.read()).decode()


def test_server_image_url_parts_match_transformers():
    # prefill chunks of 5 tokens: each image's causal rows run across several chunks
    srv = Server("-m", os.path.join(FX, "llava", "model"), "--prefill-chunk-size", "5")
    try:
        for c in e2e("llava"):
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
