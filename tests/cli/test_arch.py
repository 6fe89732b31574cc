"""test_arch.py - `mlxcel arch` against the spec.

Every architecture key is extracted from ../shared/spec/supported-models.md by parsing its tables
(and the prose that names keys), independently of the registry in src/models/registry.c, and must
appear in some family's model_types in `mlxcel arch --json`. Also checks the JSON shape and that
the text listing groups families by category.

Run: MLXCEL_BIN=build-registry/mlxcel .venv/bin/python -m pytest tests/cli/test_arch.py
"""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO.parent / "shared" / "spec" / "supported-models.md"
BIN = Path(os.environ.get("MLXCEL_BIN", "build/mlxcel"))
if not BIN.is_absolute():
    BIN = REPO / BIN

KEY_COLUMNS = {"architecture key (model_type)", "detection key", "detection", "model_type"}
# English words that share a cell with the keys ("qwen3 embedding architecture/layout",
# "Non-causal ministral3", "or compatible RT-DETRv2 config", ...).
STOPWORDS = {"or", "also", "and", "a", "an", "the", "architecture", "embedding", "layout",
             "bidirectional", "retrieval", "non-causal", "compatible", "text", "tensors"}
TOKEN = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*[A-Za-z0-9]$")


def run(*args):
    assert BIN.exists(), f"mlxcel binary not found at {BIN} (set MLXCEL_BIN)"
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=60)


def split_row(line):
    # Cells are separated by '|' not preceded by a backslash ("<\|bos\|>" stays in one cell).
    cells = re.split(r"(?<!\\)\|", line.strip())
    return [c.strip() for c in cells[1:-1]] if line.strip().endswith("|") else [c.strip() for c in cells[1:]]


def looks_like_key(tok):
    if not TOKEN.match(tok):
        return False
    if tok.endswith((".safetensors", ".json")):
        return False
    # model_type spellings are lower-case, or wholly capitalized ("GOT", "Klear"); CamelCase
    # class names (LlamaBidirectionalModel) and mixed forms (RT-DETRv2) are not keys.
    if not (tok.islower() or tok.isupper() or (tok[0].isupper() and tok[1:].islower())):
        return False
    return tok.lower() not in STOPWORDS


def keys_in_cell(cell):
    cell = cell.replace("\\|", "|")
    if "model_type:" in cell:
        cell = cell.split("model_type:", 1)[1]
    cell = re.sub(r"architectures:\s*\[[^\]]*\]", " ", cell)
    # "hunyuan (with num_experts > 1)", "gemma3 with vision_config", "lfm2 with Lfm2BidirectionalModel":
    # what follows "with" is a condition, not a key.
    cell = re.split(r"\bwith\b", cell, maxsplit=1)[0]
    # "istftnet config", "compatible RT-DETRv2 config": a config description, not a key.
    cell = re.sub(r"\S+\s+config\b", " ", cell)
    return {t.lower() for t in re.split(r"[\s,()]+", cell) if t and looks_like_key(t)}


def spec_keys():
    text = SPEC.read_text(encoding="utf-8")
    lines = text.splitlines()
    keys = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|\s*-", lines[i + 1]):
            header = [h.lower() for h in split_row(line)]
            cols = [j for j, h in enumerate(header) if h in KEY_COLUMNS]
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                row = split_row(lines[i])
                for j in cols:
                    if j < len(row):
                        for k in keys_in_cell(row[j]):
                            keys.setdefault(k, f"table row: {lines[i][:80]}")
                i += 1
            continue
        # Prose that names keys: the image-generation families "FLUX.2 Klein (flux2), ..." and the
        # page-OCR pipeline "IndicOCR (indic_ocr)".
        if line.startswith("Image-generation checkpoints") or "IndicOCR (indic_ocr)" in line:
            for k in re.findall(r"\(([a-z0-9_]+)\)", line):
                keys.setdefault(k, f"prose: {line[:80]}")
        for k in re.findall(r"model_type:\s*([A-Za-z0-9_.\-]*[A-Za-z0-9])", line):
            keys.setdefault(k.lower(), f"prose: {line[:80]}")
        i += 1
    return keys


@pytest.fixture(scope="module")
def arch_json():
    r = run("arch", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def registry_keys(arch_json):
    return {k for f in arch_json["families"] for k in f["model_types"]}


def test_spec_parser_finds_the_tables():
    keys = spec_keys()
    # The spec has well over a hundred keys; these spot checks prove the parser reads each kind
    # of cell ("X or Y", "(also Z)", "with num_experts > 1", capitalized keys, detection column,
    # prose), not what the registry holds.
    assert len(keys) > 150, len(keys)
    for k in ["llama", "mistral", "qwen3_5_text", "phi-msft", "hunyuan", "klear", "got", "deepseek_v3.2",
              "unlimited-ocr", "moondream1", "bert", "whisper", "yolo11", "flux2", "indic_ocr",
              "nemotron_parse", "llama_bidirec", "embedding_gemma2_text", "granite_vision"]:
        assert k in keys, k
    for not_key in ["with", "or", "vision_config", "num_experts", "lfm2bidirectionalmodel", "istftnet",
                    "architecture", "rt-detrv2", "non-causal"]:
        assert not_key not in keys, not_key


def test_every_spec_key_is_registered(registry_keys):
    missing = {k: where for k, where in spec_keys().items() if k not in registry_keys}
    assert not missing, "spec keys missing from `mlxcel arch --json`:\n" + "\n".join(
        f"  {k}  ({w})" for k, w in sorted(missing.items()))


def test_registered_keys_come_from_the_spec(registry_keys):
    # Keys the registry holds beyond the spec's literal spellings: the transformers key of a family
    # the spec names only by its class (RTDetrV2ForObjectDetection), and transformers' model_type of
    # the Hunyuan MoE the spec keys as hunyuan (HunYuanMoEV1ForCausalLM: hunyuan_v1_moe).
    text = SPEC.read_text(encoding="utf-8").lower()
    # and Llama 4's text decoder (Llama4ForCausalLM: llama4_text) under the spec's llama4 row, and
    # Qwen 3.5 MoE's (Qwen3_5MoeForCausalLM: qwen3_5_moe_text) under qwen3_5_moe's.
    extra = {"rt_detr_v2", "hunyuan_v1_moe", "llama4_text", "qwen3_5_moe_text"}
    unknown = sorted(k for k in registry_keys if k not in extra and k not in text)
    assert not unknown, f"registry keys not found in the spec: {unknown}"


def test_json_shape(arch_json):
    v = run("--version")
    assert v.returncode == 0
    assert arch_json["mlxcel_version"] == v.stdout.split()[-1]
    fams = arch_json["families"]
    assert isinstance(fams, list) and fams
    ids = [f["id"] for f in fams]
    assert len(ids) == len(set(ids)), "duplicate ids"
    expected = {"id", "display_name", "category", "model_types", "aliases", "runtimes", "modalities_in",
                "output", "backends", "tensor_parallel", "pipeline_parallel", "drafters", "kv_modes",
                "implemented"}
    for f in fams:
        assert set(f) == expected, f["id"]
        assert re.fullmatch(r"[a-z][a-z0-9_]*", f["id"]), f["id"]
        for k in ("display_name", "category", "output"):
            assert isinstance(f[k], str) and f[k], (f["id"], k)
        for k in ("model_types", "aliases", "runtimes", "modalities_in", "drafters", "kv_modes"):
            assert isinstance(f[k], list) and all(isinstance(x, str) and x for x in f[k]), (f["id"], k)
        assert f["runtimes"], f["id"]
        assert f["modalities_in"] and set(f["modalities_in"]) <= {"text", "image", "audio", "video"}, f["id"]
        assert all(k == k.lower() for k in f["model_types"]), f["id"]
        assert set(f["backends"]) == {"cpu", "cuda"}, f["id"]
        assert all(s in {"supported", "partial", "planned"} for s in f["backends"].values()), f["id"]
        for k in ("tensor_parallel", "pipeline_parallel", "implemented"):
            assert isinstance(f[k], bool), (f["id"], k)
        runs = any(s != "planned" for s in f["backends"].values())
        assert f["implemented"] == runs, f["id"]


def test_json_known_families(arch_json):
    by_id = {f["id"]: f for f in arch_json["families"]}
    by_key = {}
    for f in arch_json["families"]:
        for k in f["model_types"]:
            by_key.setdefault(k, []).append(f)
    # spec: "llama or mistral" share the dense runtime; Gemma 3 has a text and a VLM form
    assert {"llama", "mistral"} <= set(by_id["llama"]["model_types"])
    assert any("image" in f["modalities_in"] for f in by_key["gemma3"])
    assert any(f["modalities_in"] == ["text"] for f in by_key["gemma3"])
    assert any("embed" in f["runtimes"] for f in by_key["bert"])
    assert any("rerank" in f["runtimes"] for f in by_key["bert"])
    assert any(f["output"] == "audio" for f in arch_json["families"] if f["category"] == "Text-to-speech")


def test_text_groups_by_category(arch_json):
    r = run("arch")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Supported Model Architectures:"
    groups, order, current = {}, [], None
    for line in lines[1:]:
        if not line.strip():
            break
        if line.startswith("  - "):
            assert current is not None
            groups[current].append(line[4:])
        else:
            assert line.endswith(":") and not line.startswith(" "), line
            current = line[:-1]
            assert current not in groups, f"category {current} printed twice (not grouped)"
            groups[current] = []
            order.append(current)
    want = {}
    for f in arch_json["families"]:
        name = f["display_name"] + ("" if f["implemented"] else " (not yet runnable)")
        want.setdefault(f["category"], []).append(name)
    assert groups == want
    # categories appear in the order of their first family
    first_seen = list(dict.fromkeys(f["category"] for f in arch_json["families"]))
    assert order == first_seen
    for cat in ("Llama", "Qwen", "Gemma", "Embedding", "Reranker", "Speech-to-text", "Text-to-speech", "Other VLM"):
        assert cat in groups, cat


def test_help_and_bad_flag():
    r = run("arch", "--help")
    assert r.returncode == 0 and "--json" in r.stdout
    r = run("arch", "--nope")
    assert r.returncode == 2 and "--nope" in r.stderr
    r = run("supported", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["families"]
