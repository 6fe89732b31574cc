"""The OpenAI Responses API of `mlxcel serve`, driven by the unmodified OpenAI Python SDK: text
(equal to /v1/chat/completions at temperature 0), instructions, streaming (the event sequence,
deltas adding up to the final text), the store (retrieve, delete, input_items, previous_response_id
continuing a conversation, the entry cap, owners by API key, store=false), input_tokens,
function tools with a forced call and the function_call_output follow-up, and 400 / 404 errors."""
import json
import re
import time

import openai
import pytest
import requests

from server_util import Server, openai_client as client

# a Hermes-style (Qwen 2.5) tool template over SmolLM2's ChatML: <tool_call>{"name", "arguments"}</tool_call>
TOOL_TEMPLATE = """{%- if tools %}<|im_start|>system
You may call these functions: {{ tools | tojson }}
Call one as <tool_call>
{"name": NAME, "arguments": ARGS}
</tool_call><|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'tool' %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% elif m.tool_calls %}<|im_start|>assistant
{% for tc in m.tool_calls %}<tool_call>
{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% else %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}{#- a thinking model's tags: <think></think> #}"""

WEATHER = {"type": "function", "name": "get_weather", "description": "Weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "London"]}},
                          "required": ["city"]}}


@pytest.fixture(scope="module")
def srv():
    s = Server("--parallel", "2", "--ctx-size", "4096")
    yield s
    assert s.stop() == 0


def chat_text(s, messages, n):
    r = client(s).chat.completions.create(model="x", messages=messages, temperature=0, max_tokens=n)
    return r.choices[0].message.content, r.usage


def test_text_equals_chat_completions(srv):
    r = client(srv).responses.create(model="x", input="Name a color.", temperature=0, max_output_tokens=12)
    text, usage = chat_text(srv, [{"role": "user", "content": "Name a color."}], 12)
    assert r.object == "response" and r.id.startswith("resp_") and r.model
    assert r.output_text == text
    msg = r.output[0]
    assert msg.type == "message" and msg.role == "assistant" and msg.id.startswith("msg_")
    assert msg.content[0].type == "output_text" and msg.content[0].annotations == []
    assert r.usage.input_tokens == usage.prompt_tokens and r.usage.output_tokens == usage.completion_tokens
    assert r.usage.total_tokens == usage.total_tokens
    # 12 tokens is the cap: incomplete, as the API says for max_output_tokens
    if usage.completion_tokens == 12:
        assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    else:
        assert r.status == "completed"


def test_instructions_and_message_items_equal_chat(srv):
    c = client(srv)
    r = c.responses.create(model="x", instructions="Answer in one word.", temperature=0, max_output_tokens=10,
                           input=[{"role": "user", "content": [{"type": "input_text", "text": "Name a fruit."}]}])
    text, usage = chat_text(srv, [{"role": "system", "content": "Answer in one word."},
                                  {"role": "user", "content": "Name a fruit."}], 10)
    assert r.output_text == text and r.usage.input_tokens == usage.prompt_tokens
    assert r.instructions == "Answer in one word."
    # an earlier assistant turn given as an item (output_text parts) is part of the prompt
    items = [{"role": "user", "content": "Hi"}, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello!"}]},
             {"role": "user", "content": "Name a fruit."}]
    r = c.responses.create(model="x", input=items, temperature=0, max_output_tokens=10)
    text, usage = chat_text(srv, [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
                                  {"role": "user", "content": "Name a fruit."}], 10)
    assert r.output_text == text and r.usage.input_tokens == usage.prompt_tokens


def test_stream_events_and_deltas(srv):
    c = client(srv)
    whole = c.responses.create(model="x", input="Name a color.", temperature=0, max_output_tokens=12)
    events = list(c.responses.create(model="x", input="Name a color.", temperature=0, max_output_tokens=12, stream=True))
    types = [e.type for e in events]
    assert types[:5] == ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
                         "response.output_text.delta"]
    assert types[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed" if whole.status == "completed" else "response.incomplete"]
    assert set(types[4:-4]) == {"response.output_text.delta"}
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1].response
    assert deltas == final.output_text == whole.output_text
    assert events[-4].text == deltas
    assert final.usage.output_tokens == whole.usage.output_tokens
    # the streamed response is stored as it finished
    got = c.responses.retrieve(final.id)
    assert got.status == final.status and got.output_text == deltas


def sse_data(resp):
    return [json.loads(line[6:]) for line in resp.iter_lines(decode_unicode=True) if line.startswith("data: ") and line[6:] != "[DONE]"]


def test_llama_server_telemetry_on_streams(srv):
    """llama-server's extensions: return_progress sends the prefill's progress (response.in_progress
    with prompt_progress and timings on a Responses stream), timings_per_token puts the timings so
    far on each text delta (Responses, chat and /completion streams), and the stream's end has them."""
    prompt = "Tell me about the sea. " * 20
    r = requests.post(srv.url + "/v1/responses", json={"input": prompt, "max_output_tokens": 6, "temperature": 0, "stream": True,
                                                        "return_progress": True, "timings_per_token": True}, stream=True, timeout=120)
    ev = sse_data(r)
    progress = [e for e in ev if "prompt_progress" in e]
    assert progress and all(e["type"] == "response.in_progress" for e in progress), ev[:3]
    p = progress[-1]["prompt_progress"]
    assert p["total"] > 100 and p["processed"] == p["total"] and p["processed"] >= p["cache"], p
    deltas = [e for e in ev if e["type"] == "response.output_text.delta"]
    assert deltas and all("predicted_per_second" in e["timings"] and "prompt_per_second" in e["timings"] for e in deltas)
    assert [d["timings"]["predicted_n"] for d in deltas] == sorted(d["timings"]["predicted_n"] for d in deltas)
    assert ev[-1]["type"] in ("response.completed", "response.incomplete") and ev[-1]["timings"]["predicted_n"] == 6
    # without the flags: no progress events, no timings on the deltas
    ev = sse_data(requests.post(srv.url + "/v1/responses", json={"input": prompt, "max_output_tokens": 3, "stream": True}, stream=True, timeout=120))
    assert not [e for e in ev if "prompt_progress" in e or (e["type"] == "response.output_text.delta" and "timings" in e)]
    chat = sse_data(requests.post(srv.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": prompt}], "max_tokens": 4,
                                                                          "stream": True, "timings_per_token": True}, stream=True, timeout=120))
    assert chat and "timings" not in chat[0] and all("timings" in c for c in chat[1:]), chat[:2]  # (the role chunk has none)
    comp = sse_data(requests.post(srv.url + "/completion", json={"prompt": prompt, "n_predict": 4, "stream": True, "timings_per_token": True},
                                  stream=True, timeout=120))
    assert comp and all("timings" in c for c in comp), comp[:2]


def test_output_text_logprobs(srv):
    """include ["message.output_text.logprobs"] with top_logprobs: each output_text carries its
    tokens' logprobs, the chat route's for the same messages; a stream's deltas carry them too."""
    c = client(srv)
    r = c.responses.create(model="x", input="Name a color.", temperature=0, max_output_tokens=6, include=["message.output_text.logprobs"],
                           top_logprobs=2)
    part = r.output[0].content[0]
    lp = [{"token": t.token, "logprob": t.logprob, "top": [(a.token, a.logprob) for a in t.top_logprobs]} for t in part.logprobs]
    assert len(lp) == r.usage.output_tokens and "".join(t["token"] for t in lp) == part.text
    chat = requests.post(srv.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "Name a color."}], "max_tokens": 6,
                                                                 "temperature": 0, "logprobs": True, "top_logprobs": 2}).json()
    want = [{"token": t["token"], "logprob": t["logprob"], "top": [(a["token"], a["logprob"]) for a in t["top_logprobs"]]}
            for t in chat["choices"][0]["logprobs"]["content"]]
    assert lp == want
    events = list(c.responses.create(model="x", input="Name a color.", temperature=0, max_output_tokens=6, stream=True,
                                     include=["message.output_text.logprobs"], top_logprobs=2))
    streamed = [t.token for e in events if e.type == "response.output_text.delta" for t in e.logprobs]
    assert streamed == [t["token"] for t in lp]
    assert [t.token for t in events[-1].response.output[0].content[0].logprobs] == streamed
    plain = c.responses.create(model="x", input="Name a color.", temperature=0, max_output_tokens=6)
    assert plain.output[0].content[0].logprobs == []
    for bad in ({"include": "x"}, {"include": [1]}, {"top_logprobs": 21}):
        assert requests.post(srv.url + "/v1/responses", json={"input": "x", **bad}).status_code == 400


def test_retrieve_delete_and_input_items(srv):
    c = client(srv)
    r = c.responses.create(model="x", input="Say hi.", max_output_tokens=4, metadata={"k": "v"})
    got = c.responses.retrieve(r.id)
    assert got.id == r.id and got.output_text == r.output_text and got.metadata == {"k": "v"} and got.store is True
    items = c.responses.input_items.list(r.id)
    assert len(items.data) == 1 and items.data[0].type == "message" and items.data[0].role == "user"
    assert items.data[0].content[0].text == "Say hi." and items.data[0].id
    c.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        c.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        c.responses.delete(r.id)
    # store=false: answered, never stored
    r = c.responses.create(model="x", input="Say hi.", max_output_tokens=4, store=False)
    assert r.store is False
    with pytest.raises(openai.NotFoundError):
        c.responses.retrieve(r.id)
    # a finished response cannot be cancelled (400), an unknown one is 404
    r = c.responses.create(model="x", input="Say hi.", max_output_tokens=2)
    with pytest.raises(openai.BadRequestError):
        c.responses.cancel(r.id)
    with pytest.raises(openai.NotFoundError):
        c.responses.cancel("resp_nope")


def test_previous_response_id_continues_the_conversation(srv):
    c = client(srv)
    r1 = c.responses.create(model="x", input="My name is Ada.", temperature=0, max_output_tokens=8, instructions="Be kind.")
    r2 = c.responses.create(model="x", previous_response_id=r1.id, input="What is my name?", temperature=0, max_output_tokens=8)
    assert r2.previous_response_id == r1.id
    # the prompt is the earlier turn, its answer and the new input (the earlier instructions do not carry over)
    msgs = [{"role": "user", "content": "My name is Ada."}, {"role": "assistant", "content": r1.output_text},
            {"role": "user", "content": "What is my name?"}]
    n = requests.post(srv.url + "/v1/chat/completions/input_tokens", json={"messages": msgs}).json()["input_tokens"]
    assert r2.usage.input_tokens == n > r1.usage.input_tokens
    text, _ = chat_text(srv, msgs, 8)
    assert r2.output_text == text
    counted = c.responses.input_tokens.count(model="x", previous_response_id=r1.id, input="What is my name?")
    assert counted.input_tokens == n
    with pytest.raises(openai.NotFoundError):
        c.responses.create(model="x", previous_response_id="resp_missing", input="x")


def test_item_reference_repeats_an_earlier_item(srv):
    """An input item {"type": "item_reference", "id": ...} is the earlier item of that id (here the
    previous response's user message): the prompt is as if the message were sent again."""
    c = client(srv)
    r1 = c.responses.create(model="x", input="My name is Ada.", temperature=0, max_output_tokens=8)
    first = c.responses.input_items.list(r1.id).data[0]
    assert first.type == "message" and first.role == "user"
    r2 = c.responses.create(model="x", previous_response_id=r1.id, input=[{"type": "item_reference", "id": first.id}],
                            temperature=0, max_output_tokens=8)
    msgs = [{"role": "user", "content": "My name is Ada."}, {"role": "assistant", "content": r1.output_text},
            {"role": "user", "content": "My name is Ada."}]
    text, _ = chat_text(srv, msgs, 8)
    assert r2.output_text == text
    items = c.responses.input_items.list(r2.id).data
    assert [(i.type, i.role, i.content[0].text) for i in items] == [("message", "user", "My name is Ada.")]
    with pytest.raises(openai.NotFoundError):
        c.responses.create(model="x", previous_response_id=r1.id, input=[{"type": "item_reference", "id": "msg_missing"}])
    with pytest.raises(openai.NotFoundError):  # nothing earlier to refer to
        c.responses.create(model="x", input=[{"type": "item_reference", "id": first.id}])


def test_input_tokens(srv):
    c = client(srv)
    r = c.responses.create(model="x", input="Count me.", instructions="Be terse.", max_output_tokens=1)
    assert c.responses.input_tokens.count(model="x", input="Count me.", instructions="Be terse.").input_tokens == r.usage.input_tokens


def test_another_key_cannot_read(srv):
    alice, bob = client(srv, "alice"), client(srv, "bob")
    r = alice.responses.create(model="x", input="secret", max_output_tokens=2)
    assert alice.responses.retrieve(r.id).id == r.id
    for call in (lambda: bob.responses.retrieve(r.id), lambda: bob.responses.delete(r.id), lambda: bob.responses.input_items.list(r.id),
                 lambda: bob.responses.create(model="x", previous_response_id=r.id, input="x", max_output_tokens=1)):
        with pytest.raises(openai.NotFoundError):
            call()
    assert alice.responses.retrieve(r.id).id == r.id  # bob's delete did nothing


@pytest.mark.parametrize("body,needle", [
    ({"input": [{"type": "bogus"}]}, "bogus"),
    ({"input": [{"role": "narrator", "content": "x"}]}, "role"),
    ({"input": [{"role": "user", "content": [{"type": "input_audio"}]}]}, "input_audio"),
    ({"input": 5}, "input"),
    ({}, "input"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "function"),
    ({"input": "x", "tool_choice": "required"}, "tool"),
    ({"input": "x", "text": {"format": {"type": "json_schema", "schema": 3}}}, "schema"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": [{"type": "function_call", "name": "f"}]}, "call_id"),
])
def test_bad_requests_are_400(srv, body, needle):
    r = requests.post(srv.url + "/v1/responses", json={"model": "x", **body})
    assert r.status_code == 400, r.text
    e = r.json()["error"]
    assert e["type"] == "invalid_request_error" and needle in e["message"], e


def test_unknown_ids_and_routes(srv):
    assert requests.get(srv.url + "/v1/responses/resp_nope").status_code == 404
    assert requests.get(srv.url + "/v1/responses/resp_nope/input_items").status_code == 404
    assert requests.delete(srv.url + "/responses/resp_nope").status_code == 404
    assert requests.get(srv.url + "/v1/responses/resp_nope/other").status_code == 404
    assert requests.put(srv.url + "/v1/responses/resp_nope").status_code == 405
    assert requests.get(srv.url + "/v1/responses").status_code == 405


def test_json_schema_format(srv):
    schema = {"type": "object", "properties": {"color": {"type": "string", "enum": ["red", "blue"]}}, "required": ["color"],
              "additionalProperties": False}
    r = client(srv).responses.create(model="x", input="Pick a color as JSON.", max_output_tokens=40,
                                     text={"format": {"type": "json_schema", "name": "c", "schema": schema, "strict": True}})
    assert json.loads(r.output_text)["color"] in ("red", "blue")


@pytest.fixture(scope="module")
def tool_srv(tmp_path_factory):
    tpl = tmp_path_factory.mktemp("tpl") / "hermes.jinja"
    tpl.write_text(TOOL_TEMPLATE)
    s = Server("--chat-template-file", str(tpl), "--ctx-size", "4096")
    yield s
    assert s.stop() == 0


@pytest.mark.parametrize("choice", ["required", {"type": "function", "name": "get_weather"}])
def test_forced_function_call_and_its_output(tool_srv, choice):
    c = client(tool_srv)
    r = c.responses.create(model="x", input="What is the weather in Paris?", tools=[WEATHER], tool_choice=choice, temperature=0,
                           max_output_tokens=100)
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1, r.output
    call = calls[0]
    assert call.name == "get_weather" and call.call_id and call.id.startswith("fc_")
    assert json.loads(call.arguments)["city"] in ("Paris", "London")
    # the follow-up: the call's output continues the stored conversation
    r2 = c.responses.create(model="x", previous_response_id=r.id, tools=[WEATHER], max_output_tokens=8, extra_body={"verbose": True},
                            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"}])
    prompt = r2.model_extra["__verbose"]["prompt"]
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": ' in prompt
    assert "<tool_response>\nsunny, 21 C\n</tool_response>" in prompt
    # the same conversation sent whole (the call as an input item) renders the same prompt
    items = [{"role": "user", "content": "What is the weather in Paris?"},
             {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
             {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"}]
    r3 = c.responses.create(model="x", input=items, tools=[WEATHER], max_output_tokens=1, extra_body={"verbose": True})
    assert r3.model_extra["__verbose"]["prompt"] == prompt


def test_forced_function_call_streams(tool_srv):
    events = list(client(tool_srv).responses.create(model="x", input="Weather in London?", tools=[WEATHER], tool_choice="required",
                                                    temperature=0, max_output_tokens=100, stream=True))
    types = [e.type for e in events]
    assert "response.function_call_arguments.delta" in types and "response.function_call_arguments.done" in types
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert json.loads(done.arguments)["city"] in ("Paris", "London")
    final = events[-1].response
    assert types[-1] == "response.completed"
    assert [o.type for o in final.output] == ["function_call"] and final.output[0].arguments == done.arguments


def test_tool_choice_none_renders_no_tools(tool_srv):
    r = client(tool_srv).responses.create(model="x", input="Hi", tools=[WEATHER], tool_choice="none", max_output_tokens=1,
                                          extra_body={"verbose": True})
    assert "You may call these functions" not in r.model_extra["__verbose"]["prompt"]


def test_reasoning_item(tool_srv):
    # the grammar makes the model think, then answer
    grammar = 'root ::= "<think>\\nThe user greets.\\n</think>\\n\\nHello there."'
    c = client(tool_srv)
    r = c.responses.create(model="x", input="Hi", max_output_tokens=40, extra_body={"grammar": grammar})
    assert [o.type for o in r.output] == ["reasoning", "message"], r.output
    assert r.output[0].content[0].text == "The user greets." and r.output_text == "Hello there."
    events = list(c.responses.create(model="x", input="Hi", max_output_tokens=40, stream=True, extra_body={"grammar": grammar}))
    assert "".join(e.delta for e in events if e.type == "response.reasoning_text.delta") == "The user greets."
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "Hello there."
    final = events[-1].response
    assert events[-1].type == "response.completed" and [o.type for o in final.output] == ["reasoning", "message"]
    assert final.output[0].content[0].text == "The user greets." and final.output_text == "Hello there."


def test_cancel_a_streaming_response(srv):
    c = client(srv)
    events, rid, cancelled = [], None, None
    for e in c.responses.create(model="x", input="Write a long story.", max_output_tokens=1500, stream=True,
                                extra_body={"ignore_eos": True}):
        events.append(e)
        if e.type == "response.created":
            rid = e.response.id
        if e.type == "response.output_text.delta" and cancelled is None:
            assert c.responses.retrieve(rid).status == "in_progress"
            cancelled = c.responses.cancel(rid)
    assert cancelled.status == "cancelled"
    assert events[-1].type == "response.incomplete" and events[-1].response.status == "cancelled"
    assert events[-1].response.usage.output_tokens < 1500
    got = c.responses.retrieve(rid)
    assert got.status == "cancelled" and got.output_text == events[-1].response.output_text
    with pytest.raises(openai.BadRequestError):
        c.responses.cancel(rid)


def test_store_cap_evicts_the_oldest_and_key_is_required():
    s = Server("--responses-store-max-entries", "2", "--api-key", "k1")
    try:
        c = client(s, "k1")
        ids = [c.responses.create(model="x", input="hi", max_output_tokens=1).id for _ in range(3)]
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(ids[0])
        assert [c.responses.retrieve(i).id for i in ids[1:]] == ids[1:]
        assert requests.get(s.url + "/v1/responses/" + ids[2]).status_code == 401
        with pytest.raises(openai.AuthenticationError):
            client(s, "k2").responses.retrieve(ids[2])
    finally:
        assert s.stop() == 0


def test_store_ttl_expires_entries():
    s = Server("--responses-store-ttl-secs", "1")
    try:
        c = client(s)
        r = c.responses.create(model="x", input="hi", max_output_tokens=1)
        time.sleep(2.5)
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(r.id)
    finally:
        assert s.stop() == 0


def test_store_disabled():
    s = Server("--responses-store-max-entries", "0")
    try:
        c = client(s)
        r = c.responses.create(model="x", input="hi", max_output_tokens=1)
        assert r.output
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(r.id)
    finally:
        assert s.stop() == 0


def wait_status(c, rid, until=("completed", "incomplete", "cancelled", "failed"), timeout=120):
    deadline = time.time() + timeout
    while True:
        r = c.responses.retrieve(rid)
        if r.status in until:
            return r
        assert time.time() < deadline, r.status
        time.sleep(0.1)


def test_background_response_is_polled(srv):
    c = client(srv)
    r = c.responses.create(model="x", input="Name a color.", temperature=0, max_output_tokens=12, background=True)
    assert r.background is True and r.status in ("queued", "in_progress") and r.output == []
    done = wait_status(c, r.id)
    fg = c.responses.create(model="x", input="Name a color.", temperature=0, max_output_tokens=12)
    assert done.background is True and done.status == fg.status and done.output_text == fg.output_text
    assert done.usage.output_tokens == fg.usage.output_tokens


def test_background_response_is_cancelled(srv):
    c = client(srv)
    r = c.responses.create(model="x", input="Write a long story about the sea.", temperature=0, max_output_tokens=2000,
                           background=True, extra_body={"ignore_eos": True})
    cancelled = c.responses.cancel(r.id)
    assert cancelled.status == "cancelled"
    done = wait_status(c, r.id)
    assert done.status == "cancelled" and (done.usage is None or done.usage.output_tokens < 2000)


@pytest.mark.parametrize("extra,needle", [({"store": False}, "must be stored"), ({"stream": True}, "'background' with 'stream'"),
                                          ({"background": "yes"}, "'background' must be a boolean")])
def test_background_refusals(srv, extra, needle):
    body = {"model": "x", "input": "hi", "background": True, **extra}
    r = requests.post(srv.url + "/v1/responses", json=body)
    assert r.status_code == 400 and needle in r.json()["error"]["message"], r.text


def test_background_responses_finish_before_shutdown():
    s = Server("--parallel", "1", "--ctx-size", "1024", "--shutdown-timeout", "2")
    try:
        c = client(s)
        r = c.responses.create(model="x", input="Count to twenty.", temperature=0, max_output_tokens=900, background=True,
                               extra_body={"ignore_eos": True})
        assert r.status in ("queued", "in_progress")
    finally:
        # SIGTERM: the drain waits for it (then cancels it), the shutdown lets it store its end first
        assert s.stop() == 0
    # (the create request itself may still be counted in flight for a moment after its answer)
    assert re.search(r"draining: [12] requests? in flight", s.lines[-1]), s.lines[-1]
