"""mlxcel convert of the GGUF decoder fixtures (tests/fixtures/decoders/gguf, made by llama.cpp's own
convert_hf_to_gguf.py from the tiny Hugging Face fixtures in tests/fixtures/decoders/<family>/) back
to a Hugging Face directory: the tensors must come back under the source checkpoint's own names with
its values (exact for f32 GGUFs; the f16-rounded values for f16 ones, GPT-2's f32 position table
excepted), and config.json must hold what the source config.json says, as the generator edited it
for llama.cpp (reference.json "config_edits"). Loading the output in transformers gives the recorded
logits (checked when the fixtures were made; the unit test convert_gguf_families_match_transformers
checks mlxcel's logits on it). Standard library only."""
import json
import os
import struct

import pytest

from conftest import ROOT, assert_clean_error, run

GGUF = os.path.join(ROOT, "tests", "fixtures", "decoders", "gguf")
SRC = os.path.join(ROOT, "tests", "fixtures", "decoders")

# (case, source family, edited-away source tensors (resized by the generator), config keys to compare)
CASES = [
    ("qwen2_f32", "qwen2", (), ("hidden_size", "num_key_value_heads", "rms_norm_eps")),
    ("qwen3_f32", "qwen3", (), ("head_dim", "num_key_value_heads")),
    ("gemma_f32", "gemma", (), ("head_dim",)),
    ("gemma2_f32", "gemma2", (), ("attn_logit_softcapping", "final_logit_softcapping", "sliding_window", "layer_types")),
    ("phi3_f16", "phi3", (), ("intermediate_size",)),
    ("starcoder2_f32", "starcoder2", (), ("norm_epsilon", "use_bias")),
    ("olmo2_f16", "olmo2", (), ("rms_norm_eps", "intermediate_size")),
    ("granite_f16", "granite", (), ("embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling")),
    ("smollm3_f16", "smollm3", (), ("no_rope_layers", "no_rope_layer_interval")),
    ("gpt2_f16", "gpt2", (".mlp.c_fc.weight", ".mlp.c_fc.bias", ".mlp.c_proj.weight"), ("n_embd", "n_positions", "layer_norm_epsilon")),
]

FMT = {"F32": ("f", 4), "F16": ("e", 2)}


def read_safetensors(path):
    """{name: (dtype, shape, [values])} with the standard library."""
    out = {}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        for name, e in header.items():
            if name == "__metadata__":
                continue
            code, size = FMT[e["dtype"]]
            s, t = e["data_offsets"]
            f.seek(base + s)
            raw = f.read(t - s)
            out[name] = (e["dtype"], e["shape"], struct.unpack("<%d%s" % (len(raw) // size, code), raw))
    return out


def half(x):
    return struct.unpack("<e", struct.pack("<e", x))[0]


def reference_case(name):
    with open(os.path.join(GGUF, "reference.json"), encoding="utf-8") as f:
        return next(c for c in json.load(f)["cases"] if c["name"] == name)


@pytest.mark.parametrize("case,family,resized,keys", CASES, ids=[c[0] for c in CASES])
def test_converted_gguf_holds_the_source_checkpoint(tmp_path, case, family, resized, keys):
    out = str(tmp_path / case)
    p = run("convert", "-m", os.path.join(GGUF, case + ".gguf"), "-o", out, "--dtype", "f32")
    assert p.returncode == 0, p.stderr
    got = read_safetensors(os.path.join(out, "model.safetensors"))
    src = read_safetensors(os.path.join(SRC, family, "model.safetensors"))
    assert set(got) == set(src)  # transformers' names, tied heads left out as the source does
    f16 = case.endswith("_f16")
    for name, (dt, shape, vals) in src.items():
        gdt, gshape, gvals = got[name]
        assert gdt == "F32"
        if name.endswith(resized):
            continue
        assert gshape == shape, name
        keep = not f16 or len(shape) == 1 or name == "transformer.wpe.weight"
        want = vals if keep else [half(v) for v in vals]
        tol = 1e-6 if family.startswith("gemma") and "norm" in name else 0.0  # (1 + w) - 1
        bad = max(abs(a - b) for a, b in zip(want, gvals))
        assert bad <= tol, (name, bad)
    cfg = json.load(open(os.path.join(out, "config.json")))
    with open(os.path.join(SRC, family, "config.json"), encoding="utf-8") as f:
        scfg = json.load(f)
    scfg.update({k: v for k, v in reference_case(case)["config_edits"].items() if v is not None})
    assert cfg["model_type"] == scfg["model_type"] and cfg["architectures"] == scfg["architectures"]
    for k in keys:
        want, have = scfg[k], cfg[k]
        if isinstance(want, float):
            assert abs(have - want) <= 1e-6 * max(1.0, abs(want)), k
        else:
            assert have == want, k
    assert not os.path.exists(os.path.join(out, "tokenizer.json"))  # the fixtures have no vocabulary


@pytest.mark.parametrize("case,needle", [
    ("llama_llama3_f16", "rope_freqs.weight"),
    ("llama_linear_f16", "llama.rope.scaling.type"),
    ("qwen3_yarn_f16", "qwen3.rope.scaling.type"),
    ("refuse_granite_no_logit_scale", "granite.logit_scale"),
])
def test_refused_by_name(tmp_path, case, needle):
    assert_clean_error(run("convert", "-m", os.path.join(GGUF, case + ".gguf"), "-o", str(tmp_path / "out")), needle)
