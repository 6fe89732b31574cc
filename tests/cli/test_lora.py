"""`mlxcel generate --adapter` from outside, on the bundled SmolLM2 converted to a Hugging Face
directory (`mlxcel convert`), with PEFT adapters written here (safetensors by hand: header + raw
f32). The logits' truth (transformers + PEFT, mlx-lm, llama.cpp's GGUF conversion) is
tests/unit/test_lora.c's; here: the adapter changes the answer, a zero update leaves it
bit-identical, the same run twice gives the same text, and bad adapters give one clear line."""
import json
import os
import random
import struct

import pytest

from conftest import assert_clean_error, real_model_path, run
from server_util import SMOL_REPO

H, F, L, KV = 576, 1536, 30, 192  # SmolLM2-135M: hidden, MLP, layers, KV width


def write_safetensors(path, tensors):
    """tensors: name -> (shape, list of floats) as F32."""
    header, blobs, off = {}, [], 0
    for name, (shape, vals) in tensors.items():
        data = struct.pack(f"<{len(vals)}f", *vals)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def peft_adapter(d, r=4, zero_b=False, layers=range(L), config=None):
    os.makedirs(d, exist_ok=True)
    rng = random.Random(3)
    t = {}
    for i in layers:
        for mod, din, dout in (("self_attn.q_proj", H, H), ("self_attn.v_proj", H, KV), ("mlp.down_proj", F, H)):
            pre = f"base_model.model.model.layers.{i}.{mod}"
            t[pre + ".lora_A.weight"] = ((r, din), [rng.gauss(0, 0.2) for _ in range(r * din)])
            t[pre + ".lora_B.weight"] = ((dout, r), [0.0 if zero_b else rng.gauss(0, 0.2) for _ in range(dout * r)])
    write_safetensors(os.path.join(d, "adapter_model.safetensors"), t)
    cfg = {"peft_type": "LORA", "r": r, "lora_alpha": 2 * r, "target_modules": ["q_proj", "v_proj", "down_proj"]}
    cfg.update(config or {})
    with open(os.path.join(d, "adapter_config.json"), "w") as f:
        json.dump(cfg, f)
    return d


@pytest.fixture(scope="module")
def smol_hf(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("smol") / "hf")
    src = os.path.join(real_model_path(SMOL_REPO), "SmolLM2-135M-Instruct.Q4_1.gguf")
    p = run("convert", "-m", src, "-o", out, "--dtype", "f16", timeout=600)
    assert p.returncode == 0, p.stderr
    return out


def gen(model, *args):
    p = run("generate", "-m", model, "-p", "Name three colors.", "-n", "16", *args, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_adapter_changes_the_answer_and_a_zero_update_does_not(smol_hf, tmp_path):
    base = gen(smol_hf)
    live = peft_adapter(str(tmp_path / "live"))
    with_adapter = gen(smol_hf, "--adapter", live)
    assert with_adapter != base
    assert gen(smol_hf, "--adapter", live) == with_adapter
    assert gen(smol_hf, "--adapter", peft_adapter(str(tmp_path / "zero"), zero_b=True)) == base


def test_bad_adapters(smol_hf, tmp_path):
    g = ["generate", "-m", smol_hf, "-p", "hi", "-n", "2"]
    assert_clean_error(run(*g, "--adapter", str(tmp_path / "missing")), "missing")
    assert_clean_error(run(*g, "--adapter", peft_adapter(str(tmp_path / "dora"), config={"use_dora": True})), "DoRA")
    wrong = str(tmp_path / "wrong")
    os.makedirs(wrong)
    write_safetensors(os.path.join(wrong, "adapter_model.safetensors"),
                      {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": ((2, 100), [0.0] * 200),
                       "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": ((H, 2), [0.0] * (H * 2))})
    with open(os.path.join(wrong, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "r": 2, "lora_alpha": 2}, f)
    assert_clean_error(run(*g, "--adapter", wrong), "q_proj", "[576, 100]")
    other = str(tmp_path / "other")
    os.makedirs(other)
    write_safetensors(os.path.join(other, "adapter_model.safetensors"),
                      {"base_model.model.lm_head.lora_A.weight": ((2, H), [0.0] * (2 * H))})
    with open(os.path.join(other, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "r": 2, "lora_alpha": 2}, f)
    assert_clean_error(run(*g, "--adapter", other), "lm_head")
    # a PEFT adapter on the GGUF itself: its Q / K rows are in llama.cpp's order
    gg = ["generate", "-m", SMOL_REPO, "-p", "hi", "-n", "2"]
    assert_clean_error(run(*gg, "--adapter", peft_adapter(str(tmp_path / "p2"))), "GGUF model")


def test_server_lora_adapters(smol_hf, tmp_path):
    import threading

    import requests
    from server_util import Server
    live = peft_adapter(str(tmp_path / "live"))
    ask = {"messages": [{"role": "user", "content": "Name three colors."}], "max_tokens": 16, "temperature": 0}

    def chat(s, **kw):
        r = requests.post(s.url + "/v1/chat/completions", json={**ask, **kw}, timeout=300)
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["message"]["content"]

    plain = Server("-m", smol_hf)
    try:
        base = chat(plain)
    finally:
        plain.stop()
    s = Server("-m", smol_hf, "--lora", live, "--parallel", "2")
    try:
        listed = requests.get(s.url + "/lora-adapters").json()
        assert listed == [{"id": 0, "path": live, "scale": 1.0}]
        tuned = chat(s)
        assert tuned != base
        assert chat(s, lora=[{"id": 0, "scale": 0.0}]) == base
        assert chat(s, lora=[]) == base  # (adapters a request does not name run at 0)
        # two at once, one with the adapter and one without: each its own answer
        outs = {}

        def go(k, kw):
            outs[k] = chat(s, **kw)

        ths = [threading.Thread(target=go, args=(0, {})), threading.Thread(target=go, args=(1, {"lora": []}))]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        assert outs == {0: tuned, 1: base}
        # the server's scale: off, then back on
        assert requests.post(s.url + "/lora-adapters", json=[{"id": 0, "scale": 0}]).json()[0]["scale"] == 0.0
        assert chat(s) == base
        requests.post(s.url + "/lora-adapters", json=[{"id": 0, "scale": 1}])
        assert chat(s) == tuned
        bad = requests.post(s.url + "/v1/chat/completions", json={**ask, "lora": [{"id": 3, "scale": 1}]})
        assert bad.status_code == 400 and "adapter id 3" in bad.text
        assert requests.post(s.url + "/lora-adapters", json={"id": 0}).status_code == 400
    finally:
        s.stop()
    s = Server("-m", smol_hf, "--lora-scaled", f"{live}:0.0")
    try:
        assert chat(s) == base and chat(s, lora=[{"id": 0, "scale": 1.0}]) == tuned
    finally:
        s.stop()


def test_server_lora_fuse(smol_hf, tmp_path):
    import requests
    from server_util import Server
    live = peft_adapter(str(tmp_path / "live"))
    ask = {"messages": [{"role": "user", "content": "Name three colors."}], "max_tokens": 16, "temperature": 0}
    outs = {}
    for name, args in (("unfused", []), ("fused", ["--lora-fuse"])):
        s = Server("-m", smol_hf, "--lora", live, *args)
        try:
            r = requests.post(s.url + "/v1/chat/completions", json=ask, timeout=300).json()
            outs[name] = r["choices"][0]["message"]["content"]
            if args:
                bad = requests.post(s.url + "/v1/chat/completions", json={**ask, "lora": [{"id": 0, "scale": 0}]})
                assert bad.status_code == 400 and "--lora-fuse" in bad.text
                assert requests.post(s.url + "/lora-adapters", json=[{"id": 0, "scale": 0}]).status_code == 400
        finally:
            s.stop()
    # the same update, merged into the f16 weights (rounded there) instead of beside them
    assert outs["fused"] == outs["unfused"]
    p = run("serve", "-m", SMOL_REPO, "--port", "0", "--lora", live, "--lora-fuse", timeout=120)
    assert p.returncode != 0 and "GGUF model" in p.stderr
