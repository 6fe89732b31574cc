"""`mlxcel rerank` on the tiny BERT / XLM-RoBERTa / ModernBERT cross-encoders against
transformers and sentence-transformers' CrossEncoder (tests/fixtures/encoders/reference.json,
made by gen_encoder_fixtures.py)."""
import json
import os

import pytest

from conftest import ROOT, assert_clean_error, run

ENC = os.path.join(ROOT, "tests", "fixtures", "encoders")
RERANKERS = ["bert-rerank", "xlmr-rerank", "modernbert-rerank"]


def reference(name):
    with open(os.path.join(ENC, "reference.json")) as f:
        for m in json.load(f)["models"]:
            if m["dir"] == name:
                return m
    raise KeyError(name)


def rerank_json(name, query, docs, *extra):
    args = ["rerank", "-m", os.path.join(ENC, name), "-q", query, "--json", *extra]
    for d in docs:
        args += ["-d", d]
    p = run(*args)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def ranking_of(scores):
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


@pytest.mark.parametrize("name", RERANKERS)
def test_rerank_matches_cross_encoder(name):
    ref = reference(name)
    docs = ref["documents"]
    for run_ref in ref["runs"]:
        extra = ["--max-length", str(run_ref["max_length"])] if run_ref["max_length"] != ref["max_length"] else []
        j = rerank_json(name, run_ref["query"], docs, *extra)
        assert j["kind"] == "cross-encoder" and j["max_length"] == run_ref["max_length"]
        want = [p["score"] for p in run_ref["pairs"]]
        assert len(j["scores"]) == len(docs)
        assert max(abs(a - b) for a, b in zip(j["scores"], want)) < 1e-5
        for p in run_ref["pairs"]:
            if "cross_encoder" in p:
                assert abs(p["cross_encoder"] - p["score"]) < 1e-5
        assert j["tokens"] == [len(p["input_ids"]) for p in run_ref["pairs"]]
        assert [r["index"] for r in j["ranking"]] == ranking_of(want)
        assert all(r["document"] == docs[r["index"]] and r["score"] == j["scores"][r["index"]] for r in j["ranking"])


def test_rerank_top_n_batch_size_and_text_output():
    ref = reference("xlmr-rerank")
    docs, want = ref["documents"], [p["score"] for p in ref["runs"][0]["pairs"]]
    j = rerank_json("xlmr-rerank", ref["query"], docs, "--top-n", "2", "--batch-size", "1")
    assert [r["index"] for r in j["ranking"]] == ranking_of(want)[:2]
    assert max(abs(a - b) for a, b in zip(j["scores"], want)) < 1e-5  # all scores, in request order
    p = run("rerank", "-m", os.path.join(ENC, "xlmr-rerank"), "-q", ref["query"], "-d", docs[0], "-d", docs[2],
            "--top-n", "1")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("scores (cross-encoder") and "ranking:" in lines
    rank = lines[lines.index("ranking:") + 1:]
    best = 0 if want[0] >= want[2] else 1
    assert len(rank) == 1 and rank[0].strip().startswith(f"1. [{best}]")
    assert f"{want[0]:.6f}"[:7] in lines[1]


def test_rerank_bad_input():
    m = os.path.join(ENC, "bert-rerank")
    p = run("rerank", "-m", m, "-d", "x")
    assert p.returncode == 2 and "-q" in p.stderr
    p = run("rerank", "-m", m, "-q", "x")
    assert p.returncode == 2 and "-d" in p.stderr
    p = run("rerank", "-m", m, "-q", "x", "-d", "fine", "-d", " \t\n")
    assert p.returncode == 2 and "whitespace" in p.stderr and "document 2" in p.stderr
    p = run("rerank", "-m", m, "-q", "   ", "-d", "x")
    assert p.returncode == 2 and "whitespace" in p.stderr
    p = run("rerank", "-m", m, "-q", "x", "-d", "y", "--instruction", "Judge relevance")
    assert p.returncode == 2 and "--instruction" in p.stderr and "cross-encoder" in p.stderr
    p = run("rerank", "-m", m, "-q", "x", "-d", "y", "--image", "a.png")
    assert p.returncode == 2 and "not supported for this model" in p.stderr
    p = run("rerank", "-m", m, "-q", "x", "-d", "y", "--top-n", "0")
    assert p.returncode == 2 and "--top-n" in p.stderr
    assert_clean_error(run("rerank", "-m", m, "-q", "a query", "-d", "a document", "--max-length", "4"), "room")
    assert_clean_error(run("rerank", "-m", os.path.join(ENC, "xlmr"), "-q", "x", "-d", "y"), "not a reranker")
    assert_clean_error(run("rerank", "-m", os.path.join(ENC, "does-not-exist"), "-q", "x", "-d", "y"))
