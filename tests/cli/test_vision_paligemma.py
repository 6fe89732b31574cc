"""`mlxcel generate --image` on PaliGemma against transformers end to end
(tests/fixtures/vlm/paligemma, gen_vlm_paligemma.py): a seeded tiny PaliGemma with a word-level
tokenizer and no chat template; transformers' PaliGemmaProcessor (SiglipImageProcessor, PIL) wrote
the prompt ("<image>" x image_seq_length per image, BOS, the text, a newline) and the pixels, and
model.generate (the prompt one bidirectional block) gave the greedy text."""
import json
import os

from conftest import ROOT, run

FX = os.path.join(ROOT, "tests", "fixtures", "vlm")
MODEL = os.path.join(FX, "paligemma", "model")


def e2e(name):
    with open(os.path.join(FX, "paligemma", "reference.json")) as f:
        return next(c for c in json.load(f)["e2e"] if c["name"] == name)


def test_generate_with_images_matches_transformers():
    for name in ("one_image", "two_images"):
        c = e2e(name)
        for extra in ([], ["--no-chat-template"]):  # the processor's own prompt either way
            args = ["generate", "-m", MODEL, "-p", c["prompt"], "-n", str(len(c["greedy"])), "--temp", "0", "--profile", *extra]
            for img in c["images"]:
                args += ["--image", os.path.join(FX, img)]
            p = run(*args)
            assert p.returncode == 0, p.stderr
            assert p.stdout.rstrip("\n") == c["text"], (name, extra, p.stdout, c["text"])
            assert f"Prompt tokens: {len(c['ids'])}" in p.stderr, p.stderr
            assert "no chat template" not in p.stderr, p.stderr


def test_image_marker_in_the_prompt():
    # "<image>" written in the text stays where it is (BOS after it), as PaliGemmaProcessor does
    c = e2e("one_image")
    p = run("generate", "-m", MODEL, "-p", "<image>" + c["prompt"], "-n", str(len(c["greedy"])), "--temp", "0", "--profile",
            "--image", os.path.join(FX, c["images"][0]))
    assert p.returncode == 0, p.stderr
    assert p.stdout.rstrip("\n") == c["text"], (p.stdout, c["text"])
    assert f"Prompt tokens: {len(c['ids'])}" in p.stderr, p.stderr
