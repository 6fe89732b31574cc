"""`mlxcel generate --image` and the server's image_url parts on Idefics3, SmolVLM and Idefics2
checkpoints against transformers end to end (tests/fixtures/vlm/idefics3, smolvlm and idefics2,
gen_vlm_idefics3.py; Idefics2: its perceiver resampler, split tiles of their own sizes and the
processor's boundary-token replacements, two adjacent images in one case):
seeded tiny Idefics3ForConditionalGeneration / SmolVLMForConditionalGeneration (the vision
transformer, pixel shuffle by scale_factor 2 / 3, the linear connector, a Llama text model) with a
word-level tokenizer ("\n" an added token) and SmolVLM's chat template; transformers'
Idefics3Processor / SmolVLMProcessor (their PIL image processors: longest-edge resize, tiles row by
row and the global tile) prepared the committed images (three aspect ratios, so three tile grids)
and the prompt, model.generate gave the greedy text."""
import base64
import json
import os

import pytest
import requests

from conftest import ROOT, run
from server_util import Server

FX = os.path.join(ROOT, "tests", "fixtures", "vlm")
CASES = ["idefics3", "smolvlm", "idefics2"]


def e2e(case):
    with open(os.path.join(FX, case, "reference.json")) as f:
        return json.load(f)["e2e"]


@pytest.mark.parametrize("case", CASES)
def test_generate_with_images_matches_transformers(case):
    for c in e2e(case):
        args = ["generate", "-m", os.path.join(FX, case, "model"), "-p", c["prompt"], "-n", str(len(c["greedy"])), "--temp", "0", "--profile"]
        for img in c["images"]:
            args += ["--image", os.path.join(FX, img)]
        p = run(*args)
        assert p.returncode == 0, (c["name"], p.stderr)
        assert p.stdout.rstrip("\n") == c["text"], (c["name"], p.stdout, c["text"])
        # the processor's count: the template's tokens and each image's tiles with their tokens
        assert f"Prompt tokens: {len(c['ids'])}" in p.stderr, p.stderr


def data_url(path):
    kind = "png" if path.endswith(".png") else "jpeg"
    with open(path, "rb") as f:
        return f"data:image/{kind};base64," + base64.b64encode(f.read()).decode()


@pytest.mark.parametrize("case", CASES)
def test_server_image_url_parts_match_transformers(case):
    # prefill chunks of 7 tokens: each image's causal rows run across several chunks
    srv = Server("-m", os.path.join(FX, case, "model"), "--prefill-chunk-size", "7")
    try:
        for c in e2e(case):
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
