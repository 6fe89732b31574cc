"""Hostile and broken checkpoints given to `mlxcel inspect`: one error line naming the file and
the problem, a non-zero exit, never a crash (CI runs this against the ASan+UBSan binary)."""
import json
import os
import struct

import pytest

from conftest import assert_clean_error, real_model_path, run

SMOL = ("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf")
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def gguf_kv_string(key, val):
    k, v = key.encode(), val.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<I", 8) + struct.pack("<Q", len(v)) + v


@pytest.mark.parametrize("cut", [0, 3, 4, 8, 16, 24, 100, 1000, 100_000, 3_000_000])
def test_truncated_real_gguf(tmp_path, cut):
    src = real_model_path(*SMOL)
    with open(src, "rb") as f:
        data = f.read(cut)
    p = write(tmp_path / "cut.gguf", data)
    assert_clean_error(run("inspect", "-m", p), p)


def test_gguf_hostile_headers(tmp_path):
    cases = {
        "badmagic.gguf": b"GGUX" + b"\0" * 60,
        "v1.gguf": b"GGUF" + struct.pack("<I", 1) + b"\0" * 32,
        "v99.gguf": b"GGUF" + struct.pack("<I", 99) + b"\0" * 32,
        "hugecount.gguf": b"GGUF" + struct.pack("<IQQ", 3, 2**62, 2**62),
        "hugestr.gguf": b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 2**63) + b"x",
        "badtype.gguf": b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<I", 77),
    }
    # a tensor pointing far outside the file
    kv = gguf_kv_string("general.architecture", "llama")
    tensor = struct.pack("<Q", 1) + b"t" + struct.pack("<I", 1) + struct.pack("<Q", 32) + struct.pack("<I", 0) + struct.pack("<Q", 2**40)
    cases["oob.gguf"] = b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + kv + tensor + b"\0" * 64
    for name, data in cases.items():
        p = write(tmp_path / name, data)
        assert_clean_error(run("inspect", "-m", p), p)


def make_model_dir(tmp_path, config, st_bytes):
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    write(d / "model.safetensors", st_bytes)
    return str(d)


def safetensors(header, data=b""):
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


GOOD_CFG = {"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
            "num_key_value_heads": 1, "vocab_size": 4}


@pytest.mark.parametrize("name,blob", [
    ("header_len_too_big", struct.pack("<Q", 2**63) + b"{}"),
    ("not_json", struct.pack("<Q", 5) + b"{{{{{"),
    ("json_array", safetensors([])),
    ("bad_dtype", safetensors({"w": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4)),
    ("size_mismatch", safetensors({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 4)),
    ("offsets_out_of_range", safetensors({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})),
    ("overlap", safetensors({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12)),
    ("shape_overflow", safetensors({"w": {"dtype": "F32", "shape": [2**62, 2**62], "data_offsets": [0, 4]}}, b"\0" * 4)),
    ("negative_dim", safetensors({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4)),
    ("truncated", b"\x10\x00"),
])
def test_hostile_safetensors(tmp_path, name, blob):
    d = make_model_dir(tmp_path, GOOD_CFG, blob)
    assert_clean_error(run("inspect", "-m", d), "model.safetensors")


@pytest.mark.parametrize("cfg,needle", [
    ("{", "config.json"),
    ("[]", "config.json"),
    ('{"model_type": "llama", "hidden_size": -5}', "hidden_size"),
    ('{"model_type": "llama", "num_hidden_layers": "thirty"}', "num_hidden_layers"),
    ('{"model_type": "llama", "quantization": {"bits": 7, "group_size": 64}}', "bits=7"),
    ('{"model_type": "no_such_family", "hidden_size": 8}', "no_such_family"),
])
def test_bad_config(tmp_path, cfg, needle):
    blob = safetensors({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4)
    d = make_model_dir(tmp_path, cfg, blob)
    assert_clean_error(run("inspect", "-m", d), needle)


def test_missing_model_and_bad_flags(tmp_path):
    p = run("inspect", "-m", str(tmp_path / "nope"))
    assert_clean_error(p)
    p = run("inspect")
    assert p.returncode == 2 and "--model" in p.stderr
    p = run("inspect", "-m", real_model_path(*SMOL), "--max-tokens", "abc")
    assert p.returncode == 2 and "--max-tokens" in p.stderr
    p = run("inspect", "-m", real_model_path(*SMOL), "--cache-type-k", "turbo5")
    assert p.returncode == 2 and "turbo5" in p.stderr
    p = run("inspect", "-m", real_model_path(*SMOL), "--cache-type-v", "q2")
    assert p.returncode == 2 and "q2" in p.stderr
    p = run("inspect", "-m", real_model_path(*SMOL), "--quant", "int3")
    assert p.returncode == 2


def test_directory_without_model(tmp_path):
    (tmp_path / "empty").mkdir()
    assert_clean_error(run("inspect", "-m", str(tmp_path / "empty")), "empty")
