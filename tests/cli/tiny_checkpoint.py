"""Tiny random-weight checkpoints written at test time, identical bit for bit to the ones the
reference script (tests/fixtures/checkpoint_json/gen_checkpoint_json_fixtures.py) ran through
transformers.

A checkpoint is described by its config.json text and a tensor list [name, shape, center, scale]:
each tensor is f32 `center + scale * u` with u uniform in [-1, 1) from a counter-based hash of
(seed, tensor name, element index) (splitmix64's finaliser), so no random-number library version
can change the weights. Embedding tables as large as a real vocabulary (262k rows) are made in a
fraction of a second with numpy."""
import json
import os
import struct
import zlib

import numpy as np

M64 = (1 << 64) - 1


def tensor_values(seed, name, shape, center, scale):
    n = int(np.prod(shape)) if shape else 1
    key = (zlib.crc32(name.encode()) * 0x9E3779B97F4A7C15 + seed * 0xD1B54A32D192ED03) & M64
    with np.errstate(over="ignore"):
        x = np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(key)
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    u = (x >> np.uint64(40)).astype(np.float64) * (2.0 / (1 << 24)) - 1.0
    return (center + scale * u).astype(np.float32).reshape(shape)


def write_safetensors(path, tensors):
    """tensors: list of (name, float32 ndarray), written in order."""
    header, offset = {}, 0
    for name, a in tensors:
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, a in tensors:
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())


def write_checkpoint(directory, config_text, tensors, seed, tokenizer_dir=None, generation_config_text=None):
    """Writes config.json (the exact text given), model.safetensors, an optional
    generation_config.json (exact text) and copies tokenizer.json / tokenizer_config.json from
    tokenizer_dir."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "wb") as f:
        f.write(config_text.encode("utf-8"))
    if generation_config_text is not None:
        with open(os.path.join(directory, "generation_config.json"), "wb") as f:
            f.write(generation_config_text.encode("utf-8"))
    if tokenizer_dir:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            src = os.path.join(tokenizer_dir, name)
            if os.path.exists(src):
                with open(src, "rb") as fi, open(os.path.join(directory, name), "wb") as fo:
                    fo.write(fi.read())
    write_safetensors(os.path.join(directory, "model.safetensors"),
                      [(name, tensor_values(seed, name, shape, center, scale))
                       for name, shape, center, scale in tensors])


def build_case_dir(directory, case, testdata):
    """The model directory of one case of tests/fixtures/checkpoint_json/reference.json: its
    config.json text, its weights, the real tokenizer files from testdata/tokenizers/<tokenizer>
    (tokenizer_config.json edited by the case's "tokenizer_config_prefix": a BOM and members put
    before the published ones), its generation_config.json text and chat_template.jinja file."""
    tok_dir = os.path.join(testdata, "tokenizers", case["tokenizer"])
    write_checkpoint(directory, case["config_text"], case["tensors"], case["seed"], tok_dir,
                     case.get("generation_config_text"))
    if case.get("tokenizer_config_prefix"):
        with open(os.path.join(tok_dir, "tokenizer_config.json"), encoding="utf-8") as f:
            body = f.read().lstrip()
        assert body.startswith("{")
        with open(os.path.join(directory, "tokenizer_config.json"), "wb") as f:
            f.write(("\ufeff{" + case["tokenizer_config_prefix"] + body[1:]).encode("utf-8"))
    if case.get("chat_template_file"):
        with open(os.path.join(testdata, case["chat_template_file"]), "rb") as fi, \
                open(os.path.join(directory, "chat_template.jinja"), "wb") as fo:
            fo.write(fi.read())
