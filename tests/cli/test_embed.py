"""`mlxcel embed` on all-MiniLM-L6-v2 against sentence-transformers / transformers
(tests/fixtures/embeddings/minilm.json, made by gen_minilm_embeddings.py)."""
import json
import math
import os

from conftest import ROOT, assert_clean_error, real_model_path, run

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def fixture():
    with open(os.path.join(ROOT, "tests", "fixtures", "embeddings", "minilm.json")) as f:
        return json.load(f)


def embed_json(*args):
    p = run("embed", "-m", MINILM, "--json", *args)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def close(a, b, tol=1e-4):
    return len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b)) < tol


def cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_embed_matches_sentence_transformers():
    real_model_path(MINILM)
    cases = fixture()["cases"][:4]
    args = []
    for c in cases:
        args += ["-p", c["text"]]
    j = embed_json(*args)
    assert j["shape"] == [4, 384] and j["pooling"] == "mean" and j["normalize"] == 2
    assert j["tokens"] == [len(c["input_ids"]) for c in cases]
    for e, c in zip(j["embeddings"], cases):
        assert close(e, c["sentence_transformers"])
    ref = [c["sentence_transformers"] for c in cases]
    for i in range(4):
        for k in range(4):
            assert abs(j["similarity"][i][k] - cos(ref[i], ref[k])) < 1e-4


def test_embed_pooling_normalize_dimensions():
    c = fixture()["cases"][1]
    assert close(embed_json("-p", c["text"], "--embd-normalize", "-1")["embeddings"][0], c["mean_unnormalized"])
    assert close(embed_json("-p", c["text"], "--pooling", "cls", "--embd-normalize", "-1")["embeddings"][0], c["cls_unnormalized"])
    j = embed_json("-p", c["text"], "--dimensions", "64")
    e = j["embeddings"][0]
    assert j["shape"] == [1, 64] and abs(sum(x * x for x in e) - 1) < 1e-5
    ref = c["sentence_transformers"][:64]
    n = math.sqrt(sum(x * x for x in ref))
    assert close(e, [x / n for x in ref])
    long = fixture()["cases"][5]
    assert embed_json("-p", long["text"])["tokens"] == [256]
    assert embed_json("-p", long["text"], "--max-length", "32")["tokens"] == [32]


def test_embed_text_output():
    p = run("embed", "-m", MINILM, "-p", "a cat", "-p", "a dog")
    assert p.returncode == 0
    assert p.stdout.startswith("embedding 0 (") and "cosine similarity:" in p.stdout


def test_embed_bad_input():
    p = run("embed", "-m", MINILM, "-p", "  \t")
    assert p.returncode == 2 and "whitespace" in p.stderr
    p = run("embed", "-m", MINILM)
    assert p.returncode == 2
    p = run("embed", "-m", MINILM, "-p", "x", "--pooling", "max")
    assert p.returncode == 2 and "--pooling" in p.stderr
    p = run("embed", "-m", MINILM, "-p", "x", "--image", "a.png")
    assert p.returncode == 2 and "not supported" in p.stderr
    assert_clean_error(run("embed", "-m", MINILM, "-p", "x", "--dimensions", "999"), "999")
    assert_clean_error(run("embed", "-m", "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", "-p", "x"), "not an embedding model")


# ---- tiny random XLM-RoBERTa / ModernBERT checkpoints (tests/fixtures/encoders, made by
# gen_encoder_fixtures.py with transformers and sentence-transformers) ----

ENC = os.path.join(ROOT, "tests", "fixtures", "encoders")


def encoder_ref(name):
    with open(os.path.join(ENC, "reference.json")) as f:
        return next(m for m in json.load(f)["models"] if m["dir"] == name)


def embed_fixture_json(name, texts, *extra):
    args = ["embed", "-m", os.path.join(ENC, name), "--json", *extra]
    for t in texts:
        args += ["-p", t]
    p = run(*args)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_embed_xlmr_and_modernbert_match_sentence_transformers():
    for name, pooling in (("xlmr", "cls"), ("modernbert", "mean")):
        ref = encoder_ref(name)
        cases = ref["cases"]
        texts = [c["text"] for c in cases]
        for extra in ((), ("--batch-size", "2")):
            j = embed_fixture_json(name, texts, *extra)
            assert j["shape"] == [len(cases), ref["hidden_size"]]
            assert j["pooling"] == pooling and j["normalize"] == 2
            assert j["tokens"] == [len(c["input_ids"]) for c in cases]
            for e, c in zip(j["embeddings"], cases):
                assert close(e, c["sentence_transformers"])
            refs = [c["sentence_transformers"] for c in cases]
            for i in range(len(cases)):
                for k in range(len(cases)):
                    assert abs(j["similarity"][i][k] - cos(refs[i], refs[k])) < 1e-4
        # the long input is cut at max_seq_length, and lower with --max-length
        assert max(j["tokens"]) == ref["max_seq_length"]
        assert max(embed_fixture_json(name, texts[-1:], "--max-length", "9")["tokens"]) == 9
        c = cases[1]
        assert close(embed_fixture_json(name, [c["text"]], "--embd-normalize", "-1", "--pooling", "mean")["embeddings"][0], c["mean"])
        assert close(embed_fixture_json(name, [c["text"]], "--embd-normalize", "-1", "--pooling", "cls")["embeddings"][0], c["cls"])


def test_embed_instruction_dimensions_and_normalize():
    c = encoder_ref("modernbert")["cases"][1]
    with_instr = embed_fixture_json("modernbert", [c["text"]], "--instruction", "search_query: ")
    written = embed_fixture_json("modernbert", ["search_query: " + c["text"]])
    assert with_instr["embeddings"] == written["embeddings"] and with_instr["tokens"] == written["tokens"]
    assert with_instr["tokens"][0] > len(c["input_ids"])
    j = embed_fixture_json("modernbert", [c["text"]], "--dimensions", "8")
    ref = c["sentence_transformers"][:8]
    n = math.sqrt(sum(x * x for x in ref))
    assert j["shape"] == [1, 8] and close(j["embeddings"][0], [x / n for x in ref])
    raw = c["mean"]
    for mode, norm in (("1", sum(abs(x) for x in raw)), ("3", sum(abs(x) ** 3 for x in raw) ** (1 / 3)),
                       ("0", max(abs(x) for x in raw) / 32760.0)):
        e = embed_fixture_json("modernbert", [c["text"]], "--embd-normalize", mode)["embeddings"][0]
        assert close(e, [x / norm for x in raw], tol=1e-4 * (32760 if mode == "0" else 1))


def test_embed_encoder_bad_input():
    p = run("embed", "-m", os.path.join(ENC, "xlmr"), "-p", "ok", "-p", "\n \t")
    assert p.returncode == 2 and "whitespace" in p.stderr
    p = run("embed", "-m", os.path.join(ENC, "xlmr"), "-p", "x", "--image", "cat.png")
    assert p.returncode == 2 and "not supported for this model" in p.stderr
    p = run("embed", "-m", os.path.join(ENC, "xlmr"), "-p", "x", "--embd-normalize", "-2")
    assert p.returncode == 2
    assert_clean_error(run("embed", "-m", os.path.join(ENC, "bert-rerank"), "-p", "x"), "not an embedding model")
    assert_clean_error(run("embed", "-m", os.path.join(ENC, "modernbert"), "-p", "x", "--dimensions", "33"), "33")
