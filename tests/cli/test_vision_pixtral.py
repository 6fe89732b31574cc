"""`mlxcel generate --image` and the server's image_url parts on the Pixtral-tower VLMs against
transformers end to end (tests/fixtures/vlm/mistral3 and llava_pixtral, gen_vlm_pixtral.py): a seeded
tiny Mistral3ForConditionalGeneration (Pixtral tower, 2 x 2 patch merger) and LLaVA with a Pixtral
tower (Pixtral-12B's layout), each over a Mistral text model, with a word-level tokenizer holding
Mistral's control tokens at their tekken ids ([INST], [IMG], [IMG_BREAK], [IMG_END], [SYSTEM_PROMPT],
...) and a Mistral chat template (mistral3: the released Mistral-Small-3.2-24B-Instruct-2506 one, its
default system prompt included; llava_pixtral: one after mistral-community/pixtral-12b's);
transformers' PixtralProcessor (PIL image processor: each image at its own aspect ratio, rows of
[IMG] closed by [IMG_BREAK] / [IMG_END]) prepared the committed images and the prompt,
model.generate gave the greedy text."""
import base64
import json
import os

import requests

from conftest import ROOT, run
from server_util import Server

FX = os.path.join(ROOT, "tests", "fixtures", "vlm")
CASES = ("mistral3", "llava_pixtral")


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
            # the processor's count: the template's tokens and each image's rows of [IMG] with their breaks
            assert f"Prompt tokens: {len(c['ids'])}" in p.stderr, (case, p.stderr)


def data_url(path):
    kind = "png" if path.endswith(".png") else "jpeg"
    with open(path, "rb") as f:
        return f"data:image/{kind};base64," + base64.b64encode(f.read()).decode()


def test_server_image_url_parts_match_transformers():
    for case in CASES:
        # prefill chunks of 5 tokens: an image's rows run across several chunks
        srv = Server("-m", os.path.join(FX, case, "model"), "--prefill-chunk-size", "5")
        try:
            for c in e2e(case):
                parts = [{"type": "image_url", "image_url": {"url": data_url(os.path.join(FX, f))}} for f in c["images"]]
                parts.append({"type": "text", "text": c["prompt"]})
                body = {"messages": [{"role": "user", "content": parts}], "max_tokens": len(c["greedy"]), "temperature": 0}
                r = requests.post(srv.url + "/v1/chat/completions", json=body, timeout=120)
                assert r.status_code == 200, r.text
                out = r.json()
                assert out["choices"][0]["message"]["content"] == c["text"], (case, c["name"], out)
                assert out["usage"]["prompt_tokens"] == len(c["ids"])
        finally:
            srv.stop()
