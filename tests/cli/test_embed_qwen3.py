"""`mlxcel embed` with a Qwen3-Embedding checkpoint, `mlxcel rerank` with a Qwen3 generative
reranker, and the same numbers from `mlxcel serve`'s embedding and rerank routes.

Truth: tests/fixtures/qwen3_embed/reference.json (gen_qwen3_embed_fixtures.py): vectors from
sentence-transformers (last-token pooling + Normalize, with and without the Qwen3-Embedding
query template) and scores sigmoid(logit(yes) - logit(no)) from transformers with the
Qwen3-Reranker model card's prompt. The decoder's f32 reference path (MXL_DECODER_REFERENCE=1)
is held to 1e-4, the default fast path (int8 activations, f16 KV cache) to 2e-3. The server
and the CLI run the same engine code on the same path: equal to the 9 digits the CLI prints."""
import json
import os
import time

import pytest
import requests

from conftest import ROOT, assert_clean_error, run
from server_util import Server

FIX = os.path.join(ROOT, "tests", "fixtures", "qwen3_embed")
EMBED = os.path.join(FIX, "embed")
RERANK = os.path.join(FIX, "rerank")
CROSS = os.path.join(ROOT, "tests", "fixtures", "encoders", "bert-rerank")
REF_PATH = {"MXL_DECODER_REFERENCE": "1"}
REF_TOL, FAST_TOL = 1e-4, 2e-3


@pytest.fixture(scope="module")
def ref():
    with open(os.path.join(FIX, "reference.json"), encoding="utf-8") as f:
        return json.load(f)


def max_diff(a, b):
    assert len(a) == len(b)
    return max(abs(x - y) for x, y in zip(a, b))


def cli_embed(texts, *extra, env=None):
    p = run("embed", "-m", EMBED, *sum((["-p", t] for t in texts), []), "--json", *extra, env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def cli_rerank(query, docs, *extra, env=None):
    p = run("rerank", "-m", RERANK, "-q", query, *sum((["-d", d] for d in docs), []), "--json", *extra, env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("env,tol", [(REF_PATH, REF_TOL), (None, FAST_TOL)], ids=["reference", "fast"])
def test_embed_matches_sentence_transformers(ref, env, tol):
    cases = ref["embed"]["cases"]
    texts = [c["text"] for c in cases]
    j = cli_embed(texts, env=env)
    assert j["shape"] == [len(texts), 64]
    assert j["pooling"] == "last_token"
    assert j["tokens"] == [len(c["input_ids"]) for c in cases]
    for v, c in zip(j["embeddings"], cases):
        assert max_diff(v, c["embedding"]) < tol
    # --instruction goes into the Qwen3-Embedding query template "Instruct: {task}\nQuery:{text}"
    j = cli_embed(texts, "--instruction", ref["embed"]["task"], env=env)
    assert j["tokens"] == [len(c["instructed_input_ids"]) for c in cases]
    for v, c in zip(j["embeddings"], cases):
        assert max_diff(v, c["instructed_embedding"]) < tol


def test_embed_dimensions_and_refusals(ref):
    c = ref["embed"]["cases"][0]
    v = cli_embed([c["text"]], "--dimensions", "16", env=REF_PATH)["embeddings"][0]
    head = c["embedding"][:16]
    n = sum(x * x for x in head) ** 0.5
    assert max_diff(v, [x / n for x in head]) < 4 * REF_TOL
    assert_clean_error(run("embed", "-m", EMBED, "-p", "hi", "--pooling", "mean"), "last-token")
    assert_clean_error(run("embed", "-m", EMBED, "-p", "hi", "--dimensions", "65"), "65")
    assert_clean_error(run("embed", "-m", RERANK, "-p", "hi"), "not an embedding model")


@pytest.mark.parametrize("env,tol", [(REF_PATH, REF_TOL), (None, FAST_TOL)], ids=["reference", "fast"])
def test_rerank_matches_transformers(ref, env, tol):
    rr = ref["rerank"]
    for r in rr["runs"]:
        extra = ["--max-length", str(r["max_length"])]
        if r["instruction"]:
            extra += ["--instruction", r["instruction"]]
        j = cli_rerank(rr["query"], rr["documents"], *extra, env=env)
        assert j["kind"] == "generative"
        assert j["instruction"] == (r["instruction"] or rr["default_instruction"])
        assert j["tokens"] == [len(p["input_ids"]) for p in r["pairs"]]
        assert max_diff(j["scores"], [p["score"] for p in r["pairs"]]) < tol
        order = sorted(range(len(r["pairs"])), key=lambda i: -j["scores"][i])
        assert [x["index"] for x in j["ranking"]] == order


def test_rerank_refusals():
    assert_clean_error(run("rerank", "-m", EMBED, "-q", "q", "-d", "d"), "not a reranker")
    assert_clean_error(run("rerank", "-m", RERANK, "-q", "q", "-d", "d", "--instruction", "  "), "--instruction")
    assert_clean_error(run("rerank", "-m", RERANK, "-q", "q", "-d", "d", "--max-length", "40"), "prompt")
    assert_clean_error(run("rerank", "-m", CROSS, "-q", "q", "-d", "d", "--instruction", "x"), "--instruction")


def wait_until_ready(s, path, body, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = requests.post(s.url + path, json=body)
        if r.status_code != 503:
            return r
        time.sleep(0.2)
    pytest.fail("server did not become ready: " + "".join(s.lines))


def test_server_embedding_and_generative_reranker_equal_cli(ref):
    cases = ref["embed"]["cases"]
    texts = [c["text"] for c in cases[:4]]
    rr = ref["rerank"]
    s = Server("-m", EMBED, "--reranker-model", RERANK)
    try:
        cli = cli_embed(texts)["embeddings"]
        r = requests.post(s.url + "/v1/embeddings", json={"input": texts}).json()
        assert r["usage"]["prompt_tokens"] == sum(len(c["input_ids"]) for c in cases[:4])
        for d, v in zip(r["data"], cli):
            assert max_diff(d["embedding"], v) < 1e-6
        llama = requests.post(s.url + "/embedding", json={"content": texts[1]}).json()
        assert max_diff(llama[0]["embedding"][0], cli[1]) < 1e-6
        for instruction in (None, "Judge whether the passage is about geography"):
            extra = ["--instruction", instruction] if instruction else []
            cli_scores = cli_rerank(rr["query"], rr["documents"], *extra)["scores"]
            body = {"query": rr["query"], "documents": rr["documents"]}
            if instruction:
                body["instruction"] = instruction
            for route in ("/v1/rerank", "/rerank"):
                res = requests.post(s.url + route, json=body).json()["results"]
                assert sorted(x["index"] for x in res) == list(range(len(rr["documents"])))
                for x in res:
                    assert abs(x["relevance_score"] - cli_scores[x["index"]]) < 1e-6
        bad = requests.post(s.url + "/v1/rerank", json={"query": "q", "documents": ["d"], "instruction": 3})
        assert bad.status_code == 400 and "instruction" in bad.json()["error"]["message"]
    finally:
        assert s.stop() == 0


def test_generative_rerank_only_server_loads_once(ref):
    rr = ref["rerank"]
    s = Server("-m", RERANK, "--reranker-model", RERANK, wait_ready=False)
    try:
        body = {"query": rr["query"], "documents": rr["documents"], "top_n": 2, "return_documents": True}
        r = wait_until_ready(s, "/v1/reranking", body)
        assert r.status_code == 200, r.text
        res = r.json()["results"]
        cli_scores = cli_rerank(rr["query"], rr["documents"])["scores"]
        order = sorted(range(len(cli_scores)), key=lambda i: -cli_scores[i])[:2]
        assert [x["index"] for x in res] == order
        for x in res:
            assert abs(x["relevance_score"] - cli_scores[x["index"]]) < 1e-6
            assert x["document"]["text"] == rr["documents"][x["index"]]
        # no chat model was loaded: the checkpoint serves ranking only
        chat = requests.post(s.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
        assert chat.status_code == 501
    finally:
        assert s.stop() == 0
    log = "".join(s.lines)  # one "ready:" line per loaded model
    assert log.count("ready:") == 1 and "reranker " + RERANK + " ready:" in log, log


def test_classifier_server_refuses_instruction():
    s = Server("-m", CROSS)
    try:
        r = requests.post(s.url + "/v1/rerank", json={"query": "q", "documents": ["d"], "instruction": "x"})
        assert r.status_code == 400 and "instruction" in r.json()["error"]["message"]
    finally:
        assert s.stop() == 0
