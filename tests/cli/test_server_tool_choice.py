"""tool_choice on /v1/chat/completions, /v1/messages and /v1/responses: "none" keeps the tools out
of the prompt, "required" / a named function (Anthropic "any" / "tool") force one call by a grammar
over the template's own call syntax. SmolLM2 with templates of each syntax the chat parser reads
(Hermes, Qwen3 XML, Mistral [ARGS] and JSON-array, Llama 3 JSON, GPT-OSS harmony): whatever the
small model would say, the forced answer must come back as a parsed call of the right function
with arguments that satisfy its schema (checked with the PyPI `jsonschema` package)."""
import json

import jsonschema
import pytest
import requests

from server_util import Server

CHATML = """{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

TEMPLATES = {
    # Hermes (Qwen 2.5), with a thinking model's tags so the optional think block is in the grammar
    "hermes": "{%- if tools %}<|im_start|>system\nTools: {{ tools | tojson }}\nCall one as <tool_call>\n"
              "{\"name\": NAME, \"arguments\": ARGS}\n</tool_call><|im_end|>\n{% endif %}" + CHATML + "{#- <think></think> #}",
    "qwen3-xml": "{%- if tools %}<|im_start|>system\n<tools>{{ tools | tojson }}</tools>\nCall as <tool_call>\n<function=NAME>\n"
                 "<parameter=P>\nVALUE\n</parameter>\n</function>\n</tool_call><|im_end|>\n{% endif %}" + CHATML,
    "mistral-args": "{%- if tools %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}"
                    "{%- for m in messages %}[INST]{{ m.content }}[/INST]{% endfor %}{#- calls: [TOOL_CALLS]NAME[ARGS]{...} #}",
    "mistral-json": "{%- if tools %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}"
                    "{%- for m in messages %}[INST]{{ m.content }}[/INST]{% endfor %}{#- calls: [TOOL_CALLS][{...}] #}",
    "llama3": "{%- for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content }}<|eot_id|>{% endfor %}"
              "{%- if tools %}<|start_header_id|>ipython<|end_header_id|>\n\n{{ tools | tojson }}<|eot_id|>{% endif %}"
              "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}",
    "gpt-oss": "{%- for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}"
               "{%- if tools %}<|start|>developer<|message|># Tools\n{{ tools | tojson }}<|end|>{% endif %}"
               "{% if add_generation_prompt %}<|start|>assistant{% endif %}{#- answers: <|channel|>final<|message|>... #}",
}

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "London"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "days"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "description": "Local time of a time zone", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string", "maxLength": 12}}, "required": ["zone"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris for the next 3 days?"}]


@pytest.fixture(scope="module", params=sorted(TEMPLATES))
def tsrv(request, tmp_path_factory):
    tpl = tmp_path_factory.mktemp("tpl") / (request.param + ".jinja")
    tpl.write_text(TEMPLATES[request.param])
    s = Server("--chat-template-file", str(tpl), "--ctx-size", "4096", "--parallel", "1")
    s.kind = request.param
    yield s
    assert s.stop() == 0


def chat(s, **kw):
    r = requests.post(s.url + "/v1/chat/completions", json={"messages": ASK, "temperature": 0, "max_tokens": 160, **kw}, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()


def check_call(call, tool):
    fn = tool["function"]
    assert call["type"] == "function" and call["id"] and call["function"]["name"] == fn["name"], call
    jsonschema.validate(json.loads(call["function"]["arguments"]), fn["parameters"])


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_time"}}])
def test_forced_call_in_each_syntax(tsrv, choice):
    j = chat(tsrv, tools=[WEATHER, TIME], tool_choice=choice)
    msg, finish = j["choices"][0]["message"], j["choices"][0]["finish_reason"]
    calls = msg.get("tool_calls") or []
    assert finish == "tool_calls" and len(calls) == 1, (tsrv.kind, j)
    if choice == "required":
        check_call(calls[0], WEATHER if calls[0]["function"]["name"] == "get_weather" else TIME)
    else:
        check_call(calls[0], TIME)


def test_none_keeps_the_tools_out(tsrv):
    j = chat(tsrv, tools=[WEATHER], tool_choice="none", max_tokens=4, verbose=True)
    assert "get_weather" not in j["__verbose"]["prompt"]
    j = chat(tsrv, tools=[WEATHER], tool_choice="auto", max_tokens=4, verbose=True)
    assert "get_weather" in j["__verbose"]["prompt"]


def test_bad_choices_are_400(tsrv):
    for body, needle in [({"tools": [WEATHER], "tool_choice": "sometimes"}, "'tool_choice' must be"),
                         ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "'nope', which is not in 'tools'"),
                         ({"tool_choice": "required"}, "'tools' has no function")]:
        r = requests.post(tsrv.url + "/v1/chat/completions", json={"messages": ASK, "max_tokens": 4, **body})
        assert r.status_code == 400 and needle in r.json()["error"]["message"], (body, r.text)


def test_request_grammar_wins_over_the_forced_call(tsrv):
    j = chat(tsrv, tools=[WEATHER], tool_choice="required", grammar='root ::= "plain words"', max_tokens=8)
    assert j["choices"][0]["message"]["content"] == "plain words" and not j["choices"][0]["message"].get("tool_calls")


@pytest.fixture(scope="module")
def hermes(tmp_path_factory):
    tpl = tmp_path_factory.mktemp("tpl") / "hermes.jinja"
    tpl.write_text(TEMPLATES["hermes"])
    s = Server("--chat-template-file", str(tpl), "--ctx-size", "4096", "--parallel", "1")
    yield s
    assert s.stop() == 0


def test_anthropic_tool_choice(hermes):
    tsrv = hermes  # (one syntax is enough for the Anthropic shapes: the grammar is shared)
    tools = [{"name": f["function"]["name"], "description": f["function"]["description"], "input_schema": f["function"]["parameters"]}
             for f in (WEATHER, TIME)]
    base = {"model": "x", "max_tokens": 160, "temperature": 0, "messages": ASK, "tools": tools}
    r = requests.post(tsrv.url + "/v1/messages", json={**base, "tool_choice": {"type": "tool", "name": "get_weather"}}, timeout=300)
    assert r.status_code == 200, r.text
    uses = [c for c in r.json()["content"] if c["type"] == "tool_use"]
    assert r.json()["stop_reason"] == "tool_use" and len(uses) == 1 and uses[0]["name"] == "get_weather", r.json()
    jsonschema.validate(uses[0]["input"], WEATHER["function"]["parameters"])
    r = requests.post(tsrv.url + "/v1/messages", json={**base, "tool_choice": {"type": "any"}}, timeout=300)
    assert r.status_code == 200 and r.json()["stop_reason"] == "tool_use", r.text
    r = requests.post(tsrv.url + "/v1/messages", json={**base, "tool_choice": {"type": "sometimes"}})
    assert r.status_code == 400 and "'tool_choice' must be" in r.json()["error"]["message"], r.text
