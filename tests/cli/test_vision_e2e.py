"""`mlxcel generate --image` and the server's image_url parts against transformers end to end, on
the tiny seeded vision-language fixtures of tests/fixtures/vlm whose reference.json has an "e2e"
list (the committed images through the family's real transformers processor over its chat
template's rendering, the prompt's ids, model.generate's greedy tokens and text):
- llava_next (gen_vlm_llava_next.py): CLIP tower, anyres crops over scaled llava-v1.6 pinpoints,
  image_newline, a Mistral text model; llava-v1.6-mistral's chat template;
- aya_vision (gen_vlm_aya_vision.py): SigLIP tower, pixel shuffle, the LayerNorm + SwiGLU projector,
  a Cohere2 text model; GotOcr2's crop_to_patches tiles;
- internvl (gen_vlm_internvl.py): InternViT with layer scales, pixel shuffle, the LayerNorm + GELU
  projector, a Qwen2 text model; GotOcr2 tiles, <img><IMG_CONTEXT>...</img>;
- idefics3, smolvlm and idefics2 (gen_vlm_idefics3.py): tiles row by row with their row / column
  tokens and the global tile (Idefics3 / SmolVLM), the perceiver resampler over split tiles of
  their own sizes and the processor's boundary-token replacements, two adjacent images in one case
  (Idefics2).
Each family's word-level tokenizer keeps the prompt-token count exact, which the test checks."""
import base64
import json
import os

import pytest
import requests

from conftest import ROOT, run
from server_util import Server

FX = os.path.join(ROOT, "tests", "fixtures", "vlm")
FAMILIES = ["llava_next", "aya_vision", "internvl", "idefics3", "smolvlm", "idefics2"]


def e2e(fam):
    with open(os.path.join(FX, fam, "reference.json")) as f:
        return json.load(f)["e2e"]


@pytest.mark.parametrize("fam", FAMILIES)
def test_generate_with_images_matches_transformers(fam):
    for c in e2e(fam):
        args = ["generate", "-m", os.path.join(FX, fam, "model"), "-p", c["prompt"], "-n", str(len(c["greedy"])), "--temp", "0", "--profile"]
        for img in c["images"]:
            args += ["--image", os.path.join(FX, img)]
        p = run(*args)
        assert p.returncode == 0, (c["name"], p.stderr)
        assert p.stdout.rstrip("\n") == c["text"], (c["name"], p.stdout, c["text"])
        # the processor's count: the template's tokens and each image's placeholders
        assert f"Prompt tokens: {len(c['ids'])}" in p.stderr, p.stderr


def data_url(path):
    kind = "png" if path.endswith(".png") else "jpeg"
    with open(path, "rb") as f:
        return f"data:image/{kind};base64," + base64.b64encode(f.read()).decode()


@pytest.mark.parametrize("fam", FAMILIES)
def test_server_image_url_parts_match_transformers(fam):
    # prefill chunks of 7 tokens: each image's causal rows run across several chunks
    srv = Server("-m", os.path.join(FX, fam, "model"), "--prefill-chunk-size", "7")
    try:
        for c in e2e(fam):
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
