"""The OpenAI Conversations API of `mlxcel serve`, driven by the unmodified OpenAI Python SDK:
create / retrieve / update / delete, the items (add, list with order and pagination, retrieve,
delete), responses.create(conversation=...) continuing a conversation exactly as the whole history
sent explicitly would (temperature 0), the store's cap and TTL, owners by API key, 400 / 404."""
import time

import openai
import pytest
import requests

from server_util import Server, openai_client as client


@pytest.fixture(scope="module")
def srv():
    s = Server("--parallel", "2", "--ctx-size", "4096")
    yield s
    assert s.stop() == 0


def user(text):
    return {"type": "message", "role": "user", "content": text}


def test_create_retrieve_update_delete(srv):
    c = client(srv)
    conv = c.conversations.create(metadata={"topic": "demo"}, items=[user("Hello")])
    assert conv.id.startswith("conv_") and conv.object == "conversation" and conv.metadata == {"topic": "demo"}
    assert abs(conv.created_at - time.time()) < 60
    got = c.conversations.retrieve(conv.id)
    assert got.id == conv.id and got.created_at == conv.created_at and got.metadata == {"topic": "demo"}
    up = c.conversations.update(conv.id, metadata={"topic": "other", "k": "v"})
    assert up.id == conv.id and up.metadata == {"topic": "other", "k": "v"}
    assert c.conversations.retrieve(conv.id).metadata == {"topic": "other", "k": "v"}
    d = c.conversations.delete(conv.id)
    assert d.id == conv.id and d.object == "conversation.deleted" and d.deleted is True
    for call in (lambda: c.conversations.retrieve(conv.id), lambda: c.conversations.delete(conv.id),
                 lambda: c.conversations.items.list(conv.id)):
        with pytest.raises(openai.NotFoundError):
            call()
    empty = c.conversations.create()
    assert empty.metadata == {} and c.conversations.items.list(empty.id).data == []


def test_items_add_list_order_pagination_retrieve_delete(srv):
    c = client(srv)
    conv = c.conversations.create(items=[user("one"), {"role": "assistant", "content": "two"}])
    added = c.conversations.items.create(conv.id, items=[user("three"), user("four"), user("five")])
    assert [i.content[0].text for i in added.data] == ["three", "four", "five"]
    assert all(i.id.startswith("msg_") for i in added.data) and added.first_id == added.data[0].id and added.last_id == added.data[-1].id
    asc = c.conversations.items.list(conv.id, order="asc")
    texts = [i.content[0].text for i in asc.data]
    assert texts == ["one", "two", "three", "four", "five"] and not asc.has_more
    assert asc.data[1].role == "assistant" and asc.data[1].content[0].type == "output_text"
    assert asc.data[0].content[0].type == "input_text" and asc.data[0].status == "completed"
    ids = [i.id for i in asc.data]
    assert len(set(ids)) == 5
    desc = c.conversations.items.list(conv.id)  # desc by default, as OpenAI
    assert [i.id for i in desc.data] == ids[::-1]
    # pages of two, after the last id of the page before
    page = c.conversations.items.list(conv.id, order="asc", limit=2)
    assert [i.id for i in page.data] == ids[:2] and page.has_more and page.last_id == ids[1]
    page2 = c.conversations.items.list(conv.id, order="asc", limit=2, after=page.last_id)
    assert [i.id for i in page2.data] == ids[2:4] and page2.has_more
    page3 = c.conversations.items.list(conv.id, order="asc", limit=2, after=page2.last_id)
    assert [i.id for i in page3.data] == ids[4:] and not page3.has_more
    # the SDK's auto-pagination walks the same pages
    assert [i.id for i in c.conversations.items.list(conv.id, order="asc", limit=2)] == ids
    it = c.conversations.items.retrieve(ids[2], conversation_id=conv.id)
    assert it.id == ids[2] and it.content[0].text == "three"
    after_del = c.conversations.items.delete(ids[2], conversation_id=conv.id)
    assert after_del.id == conv.id and after_del.object == "conversation"
    assert [i.id for i in c.conversations.items.list(conv.id, order="asc")] == ids[:2] + ids[3:]
    for call in (lambda: c.conversations.items.retrieve(ids[2], conversation_id=conv.id),
                 lambda: c.conversations.items.delete(ids[2], conversation_id=conv.id),
                 lambda: c.conversations.items.retrieve("msg_nope", conversation_id="conv_nope")):
        with pytest.raises(openai.NotFoundError):
            call()


def test_two_turns_equal_the_explicit_history(srv):
    c = client(srv)
    conv = c.conversations.create(items=[{"type": "message", "role": "system", "content": "You are terse."}])
    r1 = c.responses.create(model="x", conversation=conv.id, input="Name a color.", temperature=0, max_output_tokens=8)
    assert r1.conversation.id == conv.id
    r2 = c.responses.create(model="x", conversation={"id": conv.id}, input="Name another one.", temperature=0, max_output_tokens=8)
    history = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a color."},
               {"role": "assistant", "content": r1.output_text}, {"role": "user", "content": "Name another one."}]
    e2 = c.responses.create(model="x", input=history, temperature=0, max_output_tokens=8)
    assert r2.usage.input_tokens == e2.usage.input_tokens and r2.output_text == e2.output_text
    ch = c.chat.completions.create(model="x", messages=history, temperature=0, max_tokens=8)
    assert r2.usage.input_tokens == ch.usage.prompt_tokens and r2.output_text == ch.choices[0].message.content
    # the conversation holds every turn's input and output items, in order
    items = list(c.conversations.items.list(conv.id, order="asc"))
    assert [(i.type, i.role) for i in items] == [("message", "system"), ("message", "user"), ("message", "assistant"),
                                                 ("message", "user"), ("message", "assistant")]
    assert items[2].id == r1.output[0].id and items[2].content[0].text == r1.output_text
    assert items[4].id == r2.output[0].id and items[4].content[0].text == r2.output_text
    # a streamed turn joins it too
    events = list(c.responses.create(model="x", conversation=conv.id, input="And a third?", temperature=0, max_output_tokens=4, stream=True))
    final = events[-1].response
    assert final.status in ("completed", "incomplete") and final.conversation.id == conv.id
    items = list(c.conversations.items.list(conv.id, order="asc"))
    assert len(items) == 7 and items[-1].id == final.output[0].id


def test_conversation_errors(srv):
    c = client(srv)
    conv = c.conversations.create()
    r = c.responses.create(model="x", input="hi", max_output_tokens=1)
    with pytest.raises(openai.BadRequestError, match="previous_response_id"):
        c.responses.create(model="x", conversation=conv.id, previous_response_id=r.id, input="x", max_output_tokens=1)
    with pytest.raises(openai.NotFoundError):
        c.responses.create(model="x", conversation="conv_nope", input="x", max_output_tokens=1)
    with pytest.raises(openai.BadRequestError):
        c.responses.create(model="x", conversation={"nope": 1}, input="x", max_output_tokens=1)
    with pytest.raises(openai.BadRequestError):
        c.conversations.create(items=[user(str(i)) for i in range(21)])
    with pytest.raises(openai.BadRequestError):
        c.conversations.items.create(conv.id, items=[{"type": "bogus"}])
    with pytest.raises(openai.BadRequestError):
        c.conversations.create(metadata={"k": 1})
    with pytest.raises(openai.BadRequestError):
        c.conversations.update(conv.id, metadata={str(i): "v" for i in range(17)})
    # a failed turn adds nothing
    assert c.conversations.items.list(conv.id).data == []
    u = srv.url + "/v1/conversations"
    for method, path, body in [("POST", "", "not json"), ("POST", "", "[1]"), ("POST", "", '{"items": "x"}'),
                               ("POST", "", '{"items": [1]}'), ("POST", "", '{"items": [{"role": "robot", "content": "x"}]}'),
                               ("POST", "/" + conv.id, "{}"), ("POST", "/" + conv.id + "/items", "{}"),
                               ("POST", "/" + conv.id + "/items", '{"items": [{"type": "message", "role": "user", "content": 5}]}')]:
        res = requests.request(method, u + path, data=body, headers={"Content-Type": "application/json"})
        assert res.status_code == 400, (path, body, res.text)
        assert res.json()["error"]["type"] == "invalid_request_error"
    for method, path in [("GET", "/conv_nope"), ("GET", "/conv_nope/items"), ("POST", "/" + conv.id + "/nope"),
                         ("GET", "/" + conv.id + "/items/msg_nope"), ("GET", "/" + conv.id + "/items/a/b")]:
        res = requests.request(method, u + path)
        assert res.status_code == 404, (path, res.text)
    assert requests.put(u + "/" + conv.id).status_code == 405
    assert requests.get(u).status_code == 405
    assert c.conversations.retrieve(conv.id).id == conv.id  # still served


def test_another_key_cannot_read(srv):
    alice, bob = client(srv, "alice"), client(srv, "bob")
    conv = alice.conversations.create(items=[user("secret")])
    item = alice.conversations.items.list(conv.id).data[0]
    for call in (lambda: bob.conversations.retrieve(conv.id), lambda: bob.conversations.update(conv.id, metadata={}),
                 lambda: bob.conversations.delete(conv.id), lambda: bob.conversations.items.list(conv.id),
                 lambda: bob.conversations.items.create(conv.id, items=[user("x")]),
                 lambda: bob.conversations.items.retrieve(item.id, conversation_id=conv.id),
                 lambda: bob.conversations.items.delete(item.id, conversation_id=conv.id),
                 lambda: bob.responses.create(model="x", conversation=conv.id, input="x", max_output_tokens=1)):
        with pytest.raises(openai.NotFoundError):
            call()
    assert [i.id for i in alice.conversations.items.list(conv.id)] == [item.id]  # bob changed nothing


def test_cap_evicts_the_oldest():
    s = Server("--conversation-store-max-entries", "2")
    try:
        c = client(s)
        ids = [c.conversations.create().id for _ in range(3)]
        with pytest.raises(openai.NotFoundError):
            c.conversations.retrieve(ids[0])
        assert [c.conversations.retrieve(i).id for i in ids[1:]] == ids[1:]
    finally:
        assert s.stop() == 0


def test_ttl_expires_and_env():
    s = Server(env={"LLAMA_ARG_CONVERSATION_STORE_TTL_SECS": "1", "LLAMA_ARG_CONVERSATION_STORE_MAX_ENTRIES": "5"})
    try:
        c = client(s)
        conv = c.conversations.create()
        assert c.conversations.retrieve(conv.id).id == conv.id
        time.sleep(2.5)
        with pytest.raises(openai.NotFoundError):
            c.conversations.retrieve(conv.id)
    finally:
        assert s.stop() == 0


def test_store_off():
    s = Server("--conversation-store-max-entries", "0")
    try:
        with pytest.raises(openai.BadRequestError):
            client(s).conversations.create()
    finally:
        assert s.stop() == 0
