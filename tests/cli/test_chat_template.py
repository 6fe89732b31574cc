"""`mlxcel chat-template`: renders real chat templates exactly as transformers does (every record of
../shared/testdata/templates/golden.jsonl through the CLI), the flag surface (--var JSON-or-string,
--tools-json, --add-generation-prompt, --now, -m model directories) and the error paths."""
import json
import os

import pytest

from conftest import ROOT, run

TESTDATA = os.path.join(os.path.dirname(ROOT), "shared", "testdata", "templates")


def _load_testdata():
    golden_path = os.path.join(TESTDATA, "golden.jsonl")
    conv_path = os.path.join(TESTDATA, "conversations.json")
    if not os.path.exists(golden_path) or not os.path.exists(conv_path):
        pytest.fail(f"test data missing: {TESTDATA}")
    with open(conv_path, encoding="utf-8") as f:
        convs = {c["id"]: c for c in json.load(f)}
    with open(golden_path, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    return convs, records


def _write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    return str(p)


def test_every_golden_record_through_the_cli(tmp_path):
    convs, records = _load_testdata()
    assert len(records) == 348
    conv_files = {cid: _write(tmp_path, f"{cid}.json", c) for cid, c in convs.items()}
    bad = []
    for rec in records:
        tpl = os.path.join(TESTDATA, "templates", rec["template"] + ".jinja")
        r = run("chat-template", "--template-file", tpl, "--messages-json", conv_files[rec["conversation"]],
                "--now", "2026-01-15T12:34:56")
        where = f'{rec["template"]}/{rec["conversation"]}'
        if "output" in rec:
            if r.returncode != 0 or r.stdout != rec["output"]:
                bad.append(f"{where}: rc={r.returncode} {r.stderr.strip()[:200]}")
        elif rec["error"].startswith("TemplateError: "):
            if r.returncode == 0 or not r.stderr.rstrip().endswith(rec["error"]):
                bad.append(f"{where}: expected {rec['error']!r}, got rc={r.returncode} {r.stderr.strip()[:200]}")
        elif r.returncode != 0:
            # Python failed for another reason; where we fail too it must be the same error
            if not r.stderr.rstrip().endswith(rec["error"]):
                bad.append(f"{where}: expected {rec['error']!r}, got {r.stderr.strip()[:200]}")
    assert not bad, "\n".join(bad)


def _template(tmp_path, text, name="t.jinja"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_var_values_are_json_when_they_parse(tmp_path):
    tpl = _template(tmp_path, "{{ b is boolean }} {{ b }} {{ n + 1 }} {{ l[0] }} {{ s }} {{ q }} {{ o.x }} {{ q is string }}")
    msgs = _write(tmp_path, "m.json", [])
    r = run("chat-template", "--template-file", tpl, "--messages-json", msgs, "--var", "b=false", "--var", "n=3",
            "--var", 'l=["a"]', "--var", "s=hello world", "--var", "q=", "--var", 'o={"x": 1.5}')
    assert r.returncode == 0, r.stderr
    assert r.stdout == "True False 4 a hello world  1.5 True"


def test_tools_generation_prompt_and_clock(tmp_path):
    tpl = _template(tmp_path, "{{ tools | map(attribute='function.name') | join(',') }}|{{ add_generation_prompt }}|"
                              "{{ strftime_now('%d %b %Y %H:%M') }}|{{ messages[0].content }}")
    msgs = _write(tmp_path, "m.json", [{"role": "user", "content": "héllo \"q\""}])
    tools = _write(tmp_path, "t.json", [{"type": "function", "function": {"name": "a"}},
                                        {"type": "function", "function": {"name": "b"}}])
    r = run("chat-template", "--template-file", tpl, "--messages-json", msgs, "--tools-json", tools,
            "--add-generation-prompt", "--now", "2026-01-15T12:34:56")
    assert r.returncode == 0, r.stderr
    assert r.stdout == 'a,b|True|15 Jan 2026 12:34|héllo "q"'
    r = run("chat-template", "--template-file", tpl, "--messages-json", msgs, "--now", "2026-01-15T12:34:56")
    assert r.returncode == 0, r.stderr
    assert r.stdout == '|False|15 Jan 2026 12:34|héllo "q"'


def test_model_directory_template_and_special_tokens(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": {"content": "<|begin|>", "lstrip": False},
        "eos_token": "<|end|>",
        "chat_template": [{"name": "default", "template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}"},
                          {"name": "tool_use", "template": "TOOLS{{ tools | length }}"}],
    }), encoding="utf-8")
    msgs = _write(tmp_path, "m.json", {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})
    r = run("chat-template", "-m", str(model), "--messages-json", msgs)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "<|begin|>x<|end|>"
    r = run("chat-template", "-m", str(model), "--messages-json", msgs, "--template-name", "tool_use")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "TOOLS1"
    r = run("chat-template", "-m", str(model), "--messages-json", msgs, "--var", "bos_token=[B]")
    assert r.stdout == "[B]x<|end|>"


def test_model_without_template_uses_generic_format(tmp_path):
    model = tmp_path / "base"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")
    msgs = _write(tmp_path, "m.json", [{"role": "user", "content": "hi"}])
    r = run("chat-template", "-m", str(model), "--messages-json", msgs, "--add-generation-prompt")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert "no chat template" in r.stderr


def test_raise_exception_fails_with_message(tmp_path):
    tpl = _template(tmp_path, "ok\n{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}")
    msgs = _write(tmp_path, "m.json", [{"role": "system", "content": "s"}])
    r = run("chat-template", "--template-file", tpl, "--messages-json", msgs)
    assert r.returncode == 1
    assert r.stdout == ""
    assert "TemplateError: System role not supported" in r.stderr
    assert "t.jinja:2" in r.stderr


def test_syntax_error_reports_line_and_column(tmp_path):
    tpl = _template(tmp_path, "line one\n{% for m in messages %}\n{{ m.content + }}\n{% endfor %}")
    msgs = _write(tmp_path, "m.json", [])
    r = run("chat-template", "--template-file", tpl, "--messages-json", msgs)
    assert r.returncode == 1
    assert "t.jinja:3:16:" in r.stderr and "expected" in r.stderr


def test_runaway_template_stops_with_budget_error(tmp_path):
    tpl = _template(tmp_path, "{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}")
    msgs = _write(tmp_path, "m.json", [])
    r = run("chat-template", "--template-file", tpl, "--messages-json", msgs, timeout=30)
    assert r.returncode == 1
    assert "BudgetExceeded" in r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--template-file", "x.jinja"], "--messages-json"),
    (["--template-file", "x.jinja", "-m", "y", "--messages-json", "m.json"], "exactly one"),
    (["--messages-json", "m.json"], "exactly one"),
    (["--template-file", "x.jinja", "--messages-json", "m.json", "--now", "noon"], "--now"),
])
def test_usage_errors(args, needle):
    r = run("chat-template", *args)
    assert r.returncode == 2
    assert needle in r.stderr


def test_bad_inputs_fail_cleanly(tmp_path):
    tpl = _template(tmp_path, "{{ messages | length }}")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("[{", encoding="utf-8")
    r = run("chat-template", "--template-file", tpl, "--messages-json", str(bad_json))
    assert r.returncode == 1 and "bad.json" in r.stderr
    r = run("chat-template", "--template-file", str(tmp_path / "missing.jinja"), "--messages-json", str(bad_json))
    assert r.returncode == 1 and "missing.jinja" in r.stderr
    scalar = _write(tmp_path, "scalar.json", 5)
    r = run("chat-template", "--template-file", tpl, "--messages-json", scalar)
    assert r.returncode == 1 and "messages" in r.stderr


def test_gguf_model_templates(tmp_path):
    vocab = os.path.join(os.path.dirname(ROOT), "shared", "testdata", "llama-cpp-vocab")
    qwen2 = os.path.join(vocab, "ggml-vocab-qwen2.gguf")
    command_r = os.path.join(vocab, "ggml-vocab-command-r.gguf")
    if not os.path.exists(qwen2) or not os.path.exists(command_r):
        pytest.fail(f"test data missing: {vocab}")
    msgs = _write(tmp_path, "m.json", [{"role": "user", "content": "Hello GGUF"}])
    r = run("chat-template", "-m", qwen2, "--messages-json", msgs, "--add-generation-prompt")
    assert r.returncode == 0, r.stderr
    assert r.stdout.endswith("<|im_start|>user\nHello GGUF<|im_end|>\n<|im_start|>assistant\n")
    # command-r ships default, tool_use and rag templates; its BOS token comes from the GGUF vocab
    r = run("chat-template", "-m", command_r, "--messages-json", msgs)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("<BOS_TOKEN>") and "Hello GGUF" in r.stdout
    r = run("chat-template", "-m", command_r, "--template-name", "tool_use", "--messages-json", msgs)
    assert r.returncode == 0, r.stderr
    assert "## Available Tools" in r.stdout
    r = run("chat-template", "-m", command_r, "--template-name", "nope", "--messages-json", msgs)
    assert r.returncode == 1 and "nope" in r.stderr
