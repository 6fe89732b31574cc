"""Constrained output on `mlxcel serve` (issue 7): `grammar`, `json_schema` and `response_format`
on the OpenAI and llama-server routes, the server-wide --grammar / --json-schema flags, and the
400s for bad constraints.

Truth: the output under each schema of tests/fixtures/grammar/schemas.json ("generate" cases) is
parsed as JSON and validated with the PyPI `jsonschema` package (Draft 2020-12), independently of
the converter that made the grammar. Greedy decoding, at most 64 tokens."""
import json
import os
import re

import jsonschema
import pytest
import requests

from conftest import ROOT, assert_clean_error, run
from server_util import SMOL_REPO, Server

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "grammar", "schemas.json")
CASES = [c for c in json.load(open(FIXTURE))["cases"] if c["generate"]]


@pytest.fixture(scope="module")
def srv():
    s = Server("--parallel", "2", "--ctx-size", "4096")
    yield s
    assert s.stop() == 0


def chat(s, body, **kw):
    b = {"messages": [{"role": "user", "content": kw.pop("prompt", "Give an example value as JSON.")}], "temperature": 0,
         "max_tokens": 64}
    b.update(body)
    return requests.post(s.url + "/v1/chat/completions", json=b, timeout=300)


def validate(schema, text):
    inst = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    jsonschema.validate(inst, schema, cls=jsonschema.Draft202012Validator)
    return inst


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_json_schema_output_validates(srv, case):
    r = chat(srv, {"response_format": {"type": "json_schema", "json_schema": {"name": case["name"], "schema": case["schema"]}}})
    assert r.status_code == 200, r.text
    ch = r.json()["choices"][0]
    assert ch["finish_reason"] == "stop", ch  # the grammar ended the JSON within 64 tokens
    validate(case["schema"], ch["message"]["content"])


def test_json_object_and_schema_forms(srv):
    # {"type": "json_object"}: any JSON object
    r = chat(srv, {"response_format": {"type": "json_object"}})
    assert r.status_code == 200, r.text
    text = r.json()["choices"][0]["message"]["content"]
    if r.json()["choices"][0]["finish_reason"] == "stop":
        assert isinstance(json.loads(text), dict)
    else:
        assert text.lstrip().startswith("{")
    # {"type": "json_object", "schema": S} and llama-server's top-level json_schema on chat
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    for body in ({"response_format": {"type": "json_object", "schema": schema}}, {"json_schema": schema}):
        r = chat(srv, body)
        assert r.status_code == 200, r.text
        validate(schema, r.json()["choices"][0]["message"]["content"])
    # the llama.cpp server suite's const case
    r = chat(srv, {"response_format": {"type": "json_schema", "json_schema": {"schema": {"const": "foooooo"}}}, "max_tokens": 10})
    assert json.loads(r.json()["choices"][0]["message"]["content"]) == "foooooo"


def test_grammar_on_every_route(srv):
    g = 'root ::= "a"{5,5}'
    r = chat(srv, {"grammar": g, "max_tokens": 6})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "aaaaa"
    r = requests.post(srv.url + "/completion", json={"prompt": "Say something:", "grammar": 'root ::= ("yes" | "no") "!"',
                                                      "n_predict": 8, "temperature": 0})
    assert r.status_code == 200, r.text
    assert re.fullmatch(r"(yes|no)!", r.json()["content"]), r.json()
    r = requests.post(srv.url + "/completion", json={"prompt": "A number:", "json_schema": {"type": "integer", "minimum": 0, "maximum": 99},
                                                      "n_predict": 8, "temperature": 0})
    assert r.status_code == 200, r.text
    validate({"type": "integer", "minimum": 0, "maximum": 99}, r.json()["content"])
    r = requests.post(srv.url + "/v1/completions", json={"prompt": "JSON:", "max_tokens": 64, "temperature": 0,
                                                         "response_format": {"type": "json_schema", "json_schema": {"schema": CASES[0]["schema"]}}})
    assert r.status_code == 200, r.text
    validate(CASES[0]["schema"], r.json()["choices"][0]["text"])
    # streaming carries the same constrained text
    r = requests.post(srv.url + "/v1/chat/completions", stream=True, timeout=300,
                      json={"messages": [{"role": "user", "content": "hi"}], "grammar": g, "max_tokens": 6, "temperature": 0, "stream": True})
    text = ""
    for line in r.iter_lines():
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            d = json.loads(line[6:])
            if d["choices"]:
                text += d["choices"][0]["delta"].get("content") or ""
    assert text == "aaaaa"


@pytest.mark.parametrize("body,needle", [
    ({"grammar": "root ::= this is (not valid GBNF"}, "grammar"),
    ({"grammar": "root ::= x"}, "x"),
    ({"grammar": 5}, "grammar"),
    ({"grammar": 'root ::= "a"', "json_schema": {}}, "not both"),
    ({"response_format": {"type": "sound"}}, "sound"),
    ({"response_format": {"type": "json_object", "schema": 123}}, "schema"),
    ({"response_format": {"type": "json_object", "schema": {"type": 123}}}, "type"),
    ({"response_format": {"type": "json_object", "schema": {"type": "hiccup"}}}, "hiccup"),
    ({"json_schema": {"$ref": "https://example.com/s.json"}}, "$ref"),
])
def test_bad_constraints_are_400(srv, body, needle):
    r = chat(srv, body)
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]["message"], r.json()
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_bad_constraint_on_llama_route_is_400(srv):
    r = requests.post(srv.url + "/completion", json={"prompt": "x", "grammar": "root ::= (", "n_predict": 4})
    assert r.status_code == 400 and "grammar" in r.json()["error"]["message"], r.text


def test_server_wide_schema_and_request_override(tmp_path):
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 5}}, "required": ["n"]}
    f = tmp_path / "s.json"
    f.write_text(json.dumps(schema))
    s = Server("--parallel", "1", "--ctx-size", "2048", "--json-schema-file", str(f))
    try:
        r = chat(s, {})
        assert r.status_code == 200, r.text
        validate(schema, r.json()["choices"][0]["message"]["content"])
        # a request's own constraint wins over the server's
        r = chat(s, {"grammar": 'root ::= "ok"', "max_tokens": 4})
        assert r.json()["choices"][0]["message"]["content"] == "ok"
        r = requests.post(s.url + "/completion", json={"prompt": "Value:", "n_predict": 48, "temperature": 0})
        validate(schema, r.json()["content"])
    finally:
        assert s.stop() == 0
    g = tmp_path / "g.gbnf"
    g.write_text('root ::= "b"{3}\n')
    s = Server("--parallel", "1", "--ctx-size", "2048", "--grammar-file", str(g))
    try:
        assert chat(s, {"max_tokens": 5}).json()["choices"][0]["message"]["content"] == "bbb"
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("args,needle", [
    (["--grammar", "root ::= ("], "--grammar"),
    (["--json-schema", '{"type": "hiccup"}'], "--json-schema"),
    (["--json-schema", "{not json"], "--json-schema"),
    (["--grammar-file", "/nonexistent/g.gbnf"], "--grammar-file"),
    (["--grammar", 'root ::= "a"', "--json-schema", "{}"], "mutually exclusive"),
])
def test_bad_server_flags(args, needle):
    p = run("serve", "-m", SMOL_REPO, "--port", "0", *args)
    assert_clean_error(p, needle)
