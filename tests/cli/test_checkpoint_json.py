"""Hugging Face directories as published: each real tokenizer of ../shared/testdata/tokenizers
beside tiny weights of its vocabulary's size, and checkpoint JSON files with the quirks Python's
json accepts (a BOM, duplicate keys, NaN / Infinity, integers past int64), generate what
transformers generates from them (tests/fixtures/checkpoint_json/reference.json, made by
gen_checkpoint_json_fixtures.py; the directories are rebuilt here byte for byte by
tiny_checkpoint.py).

Each case runs `mlxcel run` greedily through the directory's chat template (Llama 2's base
tokenizer has none: raw prompt) with the template clock pinned by SOURCE_DATE_EPOCH, and checks
the prompt's token count and the printed text against transformers: the whole text, or, where
transformers' top-2 margin at some step is a near tie, the text of the tokens before it."""
import json
import os

import pytest

from conftest import ROOT, assert_clean_error, run
from tiny_checkpoint import build_case_dir

TESTDATA = os.path.join(os.path.dirname(ROOT), "shared", "testdata")
with open(os.path.join(ROOT, "tests", "fixtures", "checkpoint_json", "reference.json"), encoding="utf-8") as _f:
    REF = json.load(_f)
CASES = {c["name"]: c for c in REF["cases"]}
ENV = {"SOURCE_DATE_EPOCH": str(REF["source_date_epoch"])}


def generate(directory, case):
    args = ["run", str(directory), "-p", REF["prompt"], "-n", str(len(case["margins"])), "--temp", "0", "--profile"]
    if not case.get("chat", True):
        args.append("--no-chat-template")
    return run(*args, env=ENV, timeout=600)


@pytest.mark.parametrize("name", list(CASES))
def test_checkpoint_generates_as_transformers(name, tmp_path):
    case = CASES[name]
    if not os.path.isdir(os.path.join(TESTDATA, "tokenizers", case["tokenizer"])):
        pytest.fail(f"testdata missing: {TESTDATA}/tokenizers/{case['tokenizer']}")
    build_case_dir(tmp_path, case, TESTDATA)
    p = generate(tmp_path, case)
    assert p.returncode == 0, p.stderr
    assert f"Prompt tokens: {len(case['prompt_ids'])}\n" in p.stderr, p.stderr
    text = p.stdout[:-1] if p.stdout.endswith("\n") else p.stdout
    tie = next((i for i, m in enumerate(case["margins"]) if m < REF["near_tie"]), None)
    if tie is None:
        assert text == case["text"], (text, case["text"])
        # the EOS that ends generation is not counted (nor printed)
        shown = len(case["new_ids"]) - (1 if case["stopped_at_eos"] else 0)
        assert f"Generated tokens: {shown}\n" in p.stderr, p.stderr
    else:
        want = case["prefix_texts"][tie]
        assert tie >= 4 and text.startswith(want), (text, want, tie)


def test_config_value_no_field_can_use_is_refused_by_name(tmp_path):
    """Python's json reads "rms_norm_eps": NaN (transformers would run and print NaN logits);
    mlxcel refuses the field by name, in one line."""
    case = dict(CASES["llama3"])
    cfg = json.loads(case["config_text"])
    case["config_text"] = json.dumps(dict(cfg, rms_norm_eps=float("nan")))
    assert "NaN" in case["config_text"]
    build_case_dir(tmp_path, case, TESTDATA)
    assert_clean_error(generate(tmp_path, case), "rms_norm_eps", "not finite")
