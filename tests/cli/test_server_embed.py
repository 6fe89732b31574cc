"""`mlxcel serve` with embedding and reranking models: the OpenAI and llama-server embedding
routes and the rerank routes give the numbers of `mlxcel embed` / `mlxcel rerank` (which match
sentence-transformers / transformers, see their tests), with the bad-input answers of the issue."""
import base64
import json
import os
import struct

import math

import pytest
import requests

from conftest import ROOT, assert_clean_error, real_model_path, run
from server_util import SMOL_REPO, Server

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
RERANK = os.path.join(ROOT, "tests", "fixtures", "encoders", "bert-rerank")


@pytest.fixture(scope="module")
def emb():
    real_model_path(MINILM)
    s = Server("-m", MINILM)
    yield s
    assert s.stop() == 0


def cli_embed(text):
    p = run("embed", "-m", MINILM, "-p", text, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["embeddings"][0]


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / norm(a) / norm(b)


def test_embeddings_equal_cli_and_sentence_transformers(emb):
    with open(os.path.join(ROOT, "tests", "fixtures", "embeddings", "minilm.json")) as f:
        cases = json.load(f)["cases"][:6]
    texts = [c["text"] for c in cases]
    r = requests.post(emb.url + "/v1/embeddings", json={"input": texts, "model": "x"}).json()
    assert [d["index"] for d in r["data"]] == list(range(len(texts)))
    for d, c in zip(r["data"], cases):
        assert cosine(d["embedding"], c["sentence_transformers"]) >= 0.99999
    assert r["usage"]["prompt_tokens"] == sum(len(c["input_ids"]) for c in cases)
    v = r["data"][0]["embedding"]
    assert max(abs(a - b) for a, b in zip(v, cli_embed(texts[0]))) < 1e-6  # the CLI prints 9 significant digits
    llama = requests.post(emb.url + "/embedding", json={"content": texts[0]}).json()
    # alone rather than in a batch of six: another kernel may run (short inputs), same numbers to 1e-6
    assert max(abs(a - b) for a, b in zip(llama[0]["embedding"][0], v)) < 1e-6


def test_base64_and_dimensions(emb):
    f = requests.post(emb.url + "/v1/embeddings", json={"input": "Hello there", "dimensions": 64}).json()["data"][0]["embedding"]
    b = requests.post(emb.url + "/v1/embeddings", json={"input": "Hello there", "dimensions": 64,
                                                        "encoding_format": "base64"}).json()["data"][0]["embedding"]
    raw = base64.b64decode(b)
    assert len(raw) == 64 * 4
    assert list(struct.unpack("<64f", raw)) == pytest.approx(f, abs=0)
    assert abs(norm(f) - 1) < 1e-5  # truncated, then normalized again
    full = requests.post(emb.url + "/v1/embeddings", json={"input": "Hello there"}).json()["data"][0]["embedding"]
    head = full[:64]
    assert max(abs(h / norm(head) - x) for h, x in zip(head, f)) < 1e-6


@pytest.mark.parametrize("body,needle", [
    ({"input": []}, "must not be empty"),
    ({"input": "   "}, "whitespace"),
    ({"input": ["ok", 3]}, "input[1]"),
    ({"input": "ok", "encoding_format": "int8"}, "encoding_format"),
    ({"input": "ok", "dimensions": 5000}, "dimensions"),
    ({}, "'input' is required"),
])
def test_embedding_bad_input(emb, body, needle):
    r = requests.post(emb.url + "/v1/embeddings", json=body)
    assert r.status_code == 400 and needle in r.json()["error"]["message"]


def test_embedding_server_has_no_chat(emb):
    r = requests.post(emb.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 501
    assert requests.get(emb.url + "/v1/models").json()["data"][0]["id"] == MINILM


def test_rerank_server_equals_cli():
    s = Server("-m", RERANK)
    try:
        q, docs = "what is a cat", ["the sky is blue", "a cat is an animal", "cats purr"]
        p = run("rerank", "-m", RERANK, "-q", q, *sum((["-d", d] for d in docs), []), "--json")
        assert p.returncode == 0, p.stderr
        cli = json.loads(p.stdout)["scores"]
        for route in ("/v1/rerank", "/rerank", "/reranking", "/v1/reranking"):
            r = requests.post(s.url + route, json={"query": q, "documents": docs, "top_n": 2, "return_documents": True}).json()
            res = r["results"]
            assert len(res) == 2
            order = sorted(range(3), key=lambda i: -cli[i])[:2]
            assert [x["index"] for x in res] == order
            for x in res:
                assert abs(x["relevance_score"] - cli[x["index"]]) < 1e-6
                assert x["document"]["text"] == docs[x["index"]]
        bad = requests.post(s.url + "/v1/rerank", json={"query": "q", "documents": []})
        assert bad.status_code == 400
        bad = requests.post(s.url + "/v1/rerank", json={"query": " ", "documents": ["x"]})
        assert bad.status_code == 400
        assert requests.post(s.url + "/v1/embeddings", json={"input": "x"}).status_code == 501
    finally:
        assert s.stop() == 0


def test_chat_model_with_side_models():
    real_model_path(MINILM)
    s = Server("-m", SMOL_REPO, "--embedding-model", MINILM, "--reranker-model", RERANK, "--parallel", "1", "--ctx-size", "1024")
    try:
        e = requests.post(s.url + "/v1/embeddings", json={"input": "Hello there"}).json()["data"][0]["embedding"]
        assert len(e) == 384
        r = requests.post(s.url + "/v1/rerank", json={"query": "cat", "documents": ["a cat", "a car"]}).json()
        assert len(r["results"]) == 2
        c = requests.post(s.url + "/completion", json={"prompt": "Hi", "n_predict": 2}).json()
        assert c["tokens_predicted"] == 2
    finally:
        assert s.stop() == 0


def test_compat_modes_need_their_provider():
    assert_clean_error(run("serve", "-m", SMOL_REPO, "--embedding", "--port", "0", timeout=120), "--embedding")
    assert_clean_error(run("serve", "-m", SMOL_REPO, "--pooling", "rank", "--port", "0", timeout=120), "--pooling rank")


def test_embedding_queue_full_503_and_timeout_504():
    import threading
    import time
    real_model_path(MINILM)
    s = Server("-m", MINILM, "--embedding-queue-depth", "1", "--embedding-request-timeout-secs", "1")
    try:
        # a request that keeps the worker busy for about 4 s on this binary and machine (sized
        # from a timed probe of 10 inputs: a sanitizer build is about ten times slower)
        text = "a long sentence about lighthouses and the sea " * 30
        t0 = time.monotonic()
        assert requests.post(s.url + "/v1/embeddings", json={"input": [text] * 10}).status_code == 200
        per_input = (time.monotonic() - t0) / 10
        long = {"input": [text] * max(10, min(2000, int(4.0 / per_input) + 1))}
        out = []
        t = threading.Thread(target=lambda: out.append(requests.post(s.url + "/v1/embeddings", json=long).status_code))
        t.start()
        time.sleep(0.5)  # the worker is busy with the long request
        waiter = []
        t2 = threading.Thread(target=lambda: waiter.append(requests.post(s.url + "/v1/embeddings", json={"input": "x"})))
        t2.start()
        time.sleep(0.2)
        full = requests.post(s.url + "/v1/embeddings", json={"input": "y"})  # the line (depth 1) is taken
        t2.join()
        t.join()
        assert full.status_code == 503
        assert waiter[0].status_code == 504
        assert out == [200]
    finally:
        assert s.stop() == 0
