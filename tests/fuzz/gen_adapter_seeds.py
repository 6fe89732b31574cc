#!/usr/bin/env python3
"""gen_adapter_seeds.py - writes the seed corpus of tests/fuzz/fuzz_adapter.c (tests/fuzz/corpus/adapter/):
small LoRA adapters (rank 1-2, a few projections, F32 / F16 / BF16, under 8 KiB) in the PEFT,
mlx-lm and llama.cpp GGUF layouts for the harness's base models (the shapes of
tests/fixtures/decoders/{llama, qwen3_mlx_q4, qwen2_moe, deepseek_v2, gguf/qwen2_f32.gguf}), and
the refusals lora.c names (DoRA, modules_to_save, biases, fan_in_fan_out, another PEFT type, an
embedding or lm_head tensor, a 3-D or integer tensor, a rank mismatch, a lone A, a layer past the
model, a shape that does not fit, rank 0, a tensor twice, the wrong base format, no safetensors
file, a config that is not a JSON object). Values are drawn from a fixed seed. Files named found_*
are inputs the fuzzer found (bugs fixed since); the script leaves them alone.

Input format (see fuzz_adapter.c): byte 0 = layout | base << 2 | fuse << 5 | run << 6 | twice << 7,
byte 1 = the user scale * 8 as int8; then u16 config length, config, safetensors; or the GGUF.

    python3 tests/fuzz/gen_adapter_seeds.py      (from the repository root)"""
import json
import os
import random
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus", "adapter")
PEFT, MLX, GGUF, NOFILE = 0, 1, 2, 3
LLAMA, Q4, MOE, MLA, QWEN2_GGUF = 0, 1, 2, 3, 4
FUSE, RUN, TWICE = 32, 64, 128
rng = random.Random(1234)

# [out, in] of each projection per base (hidden 64; llama / qwen2: 4 heads x 16, 2 KV heads;
# qwen3_mlx_q4: head_dim 32; deepseek_v2: o_proj in = 4 heads x v_head_dim 24)
SHAPES = {
    LLAMA: {"q": (64, 64), "k": (32, 64), "v": (32, 64), "o": (64, 64), "gate": (96, 64), "up": (96, 64), "down": (64, 96)},
    Q4: {"q": (128, 64), "k": (64, 64), "v": (64, 64), "o": (64, 128), "gate": (96, 64), "up": (96, 64), "down": (64, 96)},
    MOE: {"q": (64, 64), "k": (32, 64), "v": (32, 64), "o": (64, 64)},
    MLA: {"o": (64, 96), "gate": (64, 64), "up": (64, 64), "down": (64, 64)},
    QWEN2_GGUF: {"q": (64, 64), "k": (32, 64), "v": (32, 64), "o": (64, 64), "gate": (96, 64), "up": (96, 64), "down": (64, 96)},
}
HF = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
      "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}
GG = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output", "gate": "ffn_gate", "up": "ffn_up", "down": "ffn_down"}


def f16(x):
    return struct.pack("<e", x)


def bf16(x):
    return struct.pack("<f", x)[2:]


def values(n, dtype, amp=0.5):
    vals = [rng.uniform(-amp, amp) for _ in range(n)]
    if dtype == "F32":
        return b"".join(struct.pack("<f", v) for v in vals)
    return b"".join((f16 if dtype == "F16" else bf16)(v) for v in vals)


def safetensors(tensors, meta=None):
    """tensors: list of (name, dtype, shape, data or None for random values)."""
    header, blobs, off = {}, [], 0
    if meta is not None:
        header["__metadata__"] = meta
    for name, dtype, shape, data in tensors:
        n = 1
        for d in shape:
            n *= d
        if data is None:
            data = values(n, dtype) if dtype in ("F32", "F16", "BF16") else bytes(n * 4)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def peft_tensors(base, mods, r=1, dtype="F32", layers=(0,), prefix="base_model.model.model.layers"):
    t = []
    for layer in layers:
        for m in mods:
            out, inp = SHAPES[base][m]
            t.append((f"{prefix}.{layer}.{HF[m]}.lora_A.weight", dtype, (r, inp), None))
            t.append((f"{prefix}.{layer}.{HF[m]}.lora_B.weight", dtype, (out, r), None))
    return t


def mlx_tensors(base, mods, r=1, dtype="F32", layers=(0,)):
    t = []
    for layer in layers:
        for m in mods:
            out, inp = SHAPES[base][m]
            t.append((f"model.layers.{layer}.{HF[m]}.lora_a", dtype, (inp, r), None))
            t.append((f"model.layers.{layer}.{HF[m]}.lora_b", dtype, (r, out), None))
    return t


def peft_cfg(**kw):
    c = {"peft_type": "LORA", "r": 1, "lora_alpha": 2, "bias": "none", "use_dora": False, "fan_in_fan_out": False,
         "modules_to_save": None, "use_rslora": False, "target_modules": ["q_proj", "v_proj"]}
    c.update(kw)
    return json.dumps(c).encode()


def dir_seed(layout, base, flags, scale, cfg, st=b""):
    cfg = cfg.encode() if isinstance(cfg, str) else cfg
    return bytes([layout | base << 2 | flags, scale & 0xFF]) + struct.pack("<H", len(cfg)) + cfg + st


def gguf_adapter(tensors, alpha=2.0, gtype="adapter", atype="lora"):
    """tensors: (name, shape as stored [rows, cols]); F32 random values, ne reversed, 32-aligned."""
    def s(v):
        v = v.encode()
        return struct.pack("<Q", len(v)) + v

    kv = [s("general.architecture") + struct.pack("<I", 8) + s("qwen2"),
          s("general.type") + struct.pack("<I", 8) + s(gtype),
          s("adapter.type") + struct.pack("<I", 8) + s(atype),
          s("adapter.lora.alpha") + struct.pack("<If", 6, alpha)]
    infos, data = [], b""
    for name, (rows, cols) in tensors:
        data += b"\0" * (-len(data) % 32)
        infos.append(s(name) + struct.pack("<IQQ", 2, cols, rows) + struct.pack("<IQ", 0, len(data)))
        data += values(rows * cols, "F32")
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)) + b"".join(kv) + b"".join(infos)
    head += b"\0" * (-len(head) % 32)
    return head + data


def gguf_pairs(mods, r=1, layers=(0,)):
    t = []
    for layer in layers:
        for m in mods:
            out, inp = SHAPES[QWEN2_GGUF][m]
            t.append((f"blk.{layer}.{GG[m]}.weight.lora_a", (r, inp)))
            t.append((f"blk.{layer}.{GG[m]}.weight.lora_b", (out, r)))
    return t


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):  # (found_*: inputs the fuzzer found, kept as they are)
        if not f.startswith("found_"):
            os.remove(os.path.join(OUT, f))
    S = {}
    all7 = ["q", "k", "v", "o", "gate", "up", "down"]
    # loads: PEFT, every projection of layer 0, run, fused, and as two adapters
    S["peft_llama_all7_f32"] = dir_seed(PEFT, LLAMA, RUN | FUSE, 8, peft_cfg(), safetensors(peft_tensors(LLAMA, all7)))
    S["peft_llama_qv_r2_f16_rslora"] = dir_seed(PEFT, LLAMA, RUN | TWICE, 12, peft_cfg(
        r=2, use_rslora=True, alpha_pattern={"layers.1.self_attn.v_proj": 4, "q_proj": 0.5}),
        safetensors(peft_tensors(LLAMA, ["q", "v"], r=2, dtype="F16", layers=(0, 1)), {"format": "pt"}))
    S["peft_llama_mlp_bf16"] = dir_seed(PEFT, LLAMA, RUN | FUSE, -16, peft_cfg(lora_alpha=1.5),
                                        safetensors(peft_tensors(LLAMA, ["gate", "up", "down"], dtype="BF16", layers=(1,))))
    S["peft_llama_nan_alpha"] = dir_seed(PEFT, LLAMA, RUN, 8, b'{"peft_type": "LORA", "lora_alpha": NaN, "r": 1}',
                                         safetensors(peft_tensors(LLAMA, ["o"])))
    S["peft_q4_q_gate"] = dir_seed(PEFT, Q4, RUN | FUSE, 8, peft_cfg(), safetensors(peft_tensors(Q4, ["q", "gate"])))
    S["peft_moe_attn"] = dir_seed(PEFT, MOE, RUN, 8, peft_cfg(), safetensors(peft_tensors(MOE, ["q", "k", "v", "o"])))
    S["refuse_moe_zero_gate"] = dir_seed(PEFT, MOE, RUN, 8, peft_cfg(), safetensors([
        ("base_model.model.model.layers.0.mlp.gate_proj.lora_A.weight", "F32", (1, 0), b""),
        ("base_model.model.model.layers.0.mlp.gate_proj.lora_B.weight", "F32", (0, 1), b"")]))
    S["refuse_mla_q"] = dir_seed(PEFT, MLA, RUN, 8, peft_cfg(), safetensors([
        ("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", "F32", (1, 64), None),
        ("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", "F32", (128, 1), None)]))
    S["peft_mla_o_dense_mlp"] = dir_seed(PEFT, MLA, RUN | FUSE, 8, peft_cfg(), safetensors(peft_tensors(MLA, ["o", "gate", "up", "down"])))
    # mlx-lm
    S["mlx_llama_qv_up_down"] = dir_seed(MLX, LLAMA, RUN | FUSE, 8, json.dumps(
        {"fine_tune_type": "lora", "num_layers": 2, "lora_parameters": {"rank": 1, "scale": 2.5}}),
        safetensors(mlx_tensors(LLAMA, ["q", "v", "up", "down"]), {"format": "mlx"}))
    S["mlx_llama_f16_default_scale"] = dir_seed(MLX, LLAMA, RUN | TWICE, 4, json.dumps({"lora_parameters": {"rank": 2}}),
                                                safetensors(mlx_tensors(LLAMA, ["k", "o"], r=2, dtype="F16", layers=(1,))))
    S["mlx_dora_type"] = dir_seed(MLX, LLAMA, RUN, 8, json.dumps({"fine_tune_type": "dora"}),
                                  safetensors(mlx_tensors(LLAMA, ["q"])))
    # GGUF (llama.cpp convert_lora_to_gguf.py layout) on the GGUF base
    S["gguf_qwen2_attn_mlp"] = bytes([GGUF | QWEN2_GGUF << 2 | RUN | FUSE, 8]) + gguf_adapter(gguf_pairs(["q", "k", "down"]), alpha=2.0)
    S["gguf_qwen2_alpha0_r2"] = bytes([GGUF | QWEN2_GGUF << 2 | RUN | TWICE, 8]) + gguf_adapter(gguf_pairs(["v", "gate", "up"], r=2, layers=(1,)), alpha=0.0)
    S["gguf_not_adapter"] = bytes([GGUF | QWEN2_GGUF << 2 | RUN, 8]) + gguf_adapter(gguf_pairs(["q"]), gtype="model")
    S["gguf_control_vector"] = bytes([GGUF | QWEN2_GGUF << 2 | RUN, 8]) + gguf_adapter(gguf_pairs(["q"]), atype="control_vector")
    S["gguf_other_tensor"] = bytes([GGUF | QWEN2_GGUF << 2 | RUN, 8]) + gguf_adapter([("token_embd.weight.lora_a", (1, 64))])
    S["gguf_on_safetensors_base"] = bytes([GGUF | LLAMA << 2 | RUN, 8]) + gguf_adapter(gguf_pairs(["q"]))
    S["peft_on_gguf_base"] = dir_seed(PEFT, QWEN2_GGUF, RUN, 8, peft_cfg(), safetensors(peft_tensors(QWEN2_GGUF, ["q"])))
    # refusals of the config
    for name, kw in (("dora", {"use_dora": True}), ("modules_to_save", {"modules_to_save": ["lm_head"]}),
                     ("bias_all", {"bias": "all"}), ("fan_in_fan_out", {"fan_in_fan_out": True}),
                     ("ia3", {"peft_type": "IA3"})):
        S[f"refuse_{name}"] = dir_seed(PEFT, LLAMA, RUN, 8, peft_cfg(**kw), safetensors(peft_tensors(LLAMA, ["q"])))
    S["refuse_cfg_array"] = dir_seed(PEFT, LLAMA, RUN, 8, "[1, 2]", safetensors(peft_tensors(LLAMA, ["q"])))
    S["refuse_no_safetensors"] = dir_seed(NOFILE, LLAMA, RUN, 8, peft_cfg())
    # refusals of the tensors
    t = peft_tensors(LLAMA, ["q"])
    S["refuse_lm_head"] = dir_seed(PEFT, LLAMA, RUN, 8, peft_cfg(), safetensors(t + [
        ("base_model.model.lm_head.lora_A.weight", "F32", (1, 64), None)]))
    S["refuse_3d_and_i32"] = dir_seed(PEFT, LLAMA, RUN, 8, peft_cfg(), safetensors([
        (t[0][0], "F32", (1, 1, 64), None), (t[1][0], "I32", (64, 1), None)]))
    S["refuse_rank_mismatch"] = dir_seed(PEFT, LLAMA, RUN, 8, peft_cfg(), safetensors([
        (t[0][0], "F32", (2, 64), None), (t[1][0], "F32", (64, 1), None)]))
    S["refuse_lone_a_layer_past"] = dir_seed(PEFT, LLAMA, RUN, 8, peft_cfg(), safetensors([
        t[0], ("base_model.model.model.layers.7.self_attn.q_proj.lora_A.weight", "F32", (1, 64), None)]))
    S["refuse_shape_rank0"] = dir_seed(PEFT, LLAMA, RUN, 8, peft_cfg(), safetensors([
        (t[0][0], "F32", (0, 64), b""), (t[1][0], "F32", (64, 0), b""),
        ("base_model.model.model.layers.1.self_attn.k_proj.lora_A.weight", "F32", (1, 64), None),
        ("base_model.model.model.layers.1.self_attn.k_proj.lora_B.weight", "F32", (64, 1), None)]))
    S["refuse_twice"] = dir_seed(PEFT, LLAMA, RUN, 8, peft_cfg(), safetensors(t + [
        ("x.model.layers.0.self_attn.q_proj.lora_A.weight", "F32", (1, 64), None)]))
    for name, data in S.items():
        assert len(data) <= 8192, (name, len(data))
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"{len(S)} seeds in {OUT}")


if __name__ == "__main__":
    main()
