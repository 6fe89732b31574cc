"""`mlxcel tune` (the CPU backend's knobs, backends/cpu/tune.h) and the autotune cache it writes
(engine/autotune.h): a short real tuning run on the bundled SmolLM2 shape, the cache's use under
MLXCEL_AUTOTUNE=cache giving the same greedy text as without it (also with non-default values
forced into the cache, so the tuned code paths really run), the refusals (CUDA-only ops, bad
values) as one line and exit 2, and a broken or foreign cache ignored with one warning line.
Every run points MLXCEL_CACHE_DIR at a temporary directory (the models stay where they are)."""
import json
import os

from conftest import assert_clean_error, real_model_path, run, store_root

SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
# tiny budgets: the whole tuning run takes well under a second on two cores
SMALL = ["--batch-sizes", "1,2", "--context-lengths", "64,256", "--sample-ms", "5", "--warmup-ms", "1",
         "--reps", "3", "--max-reps", "40", "--threads", "2"]
PROMPT = "The capital of France is"


def env_for(tmp_path, mode=None):
    e = {"MLXCEL_CACHE_DIR": str(tmp_path), "MLXCEL_MODELS_DIR": store_root()}
    if mode is not None:
        e["MLXCEL_AUTOTUNE"] = mode
    return e


def cache_file(tmp_path):
    return os.path.join(str(tmp_path), "autotune", "cpu.json")


def generate(tmp_path, mode=None):
    p = run("generate", "-m", SMOL, "--no-chat-template", "-p", PROMPT, "-n", "16", "--temp", "0", "--ignore-eos",
            "--threads", "2", env=env_for(tmp_path, mode), timeout=300)
    assert p.returncode == 0, p.stderr
    assert "Sanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr
    return p


def tune(tmp_path, *extra):
    p = run("tune", "-m", SMOL, *SMALL, *extra, env=env_for(tmp_path), timeout=300)
    assert p.returncode == 0, p.stderr
    return p


def test_tune_writes_cache_and_generate_uses_it(tmp_path):
    real_model_path(SMOL)
    p = tune(tmp_path)
    assert "shape head_dim 64, 9 query heads, 3 KV heads" in p.stdout, p.stdout
    for op in ("paged-decode-splits", "attn-head-group", "matmul-split"):
        assert f"-> " in p.stdout and op in p.stdout
    with open(cache_file(tmp_path)) as f:
        doc = json.load(f)
    assert doc["format"] == "mlxcel-autotune" and doc["version"] == 1
    ents = doc["entries"]
    # one entry per (attention op, context) and one matmul-split
    assert sorted((e["op"], e["context"]) for e in ents) == sorted(
        [("paged-decode-splits", 64), ("paged-decode-splits", 256), ("attn-head-group", 64),
         ("attn-head-group", 256), ("matmul-split", -1)])
    for e in ents:
        assert e["machine"]["threads"] == 2 and e["machine"]["cpu"] and e["machine"]["isa"]
        assert e["shape"] == {"head_dim": 64, "q_heads": 9, "kv_heads": 3, "block_size": 32}
    # a second run replaces its own entries rather than adding more
    tune(tmp_path, "--op", "matmul-split")
    with open(cache_file(tmp_path)) as f:
        assert len(json.load(f)["entries"]) == 5

    base = generate(tmp_path)
    assert "autotune" not in base.stderr  # MLXCEL_AUTOTUNE unset: the file is not read
    tuned = generate(tmp_path, "cache")
    assert "autotune: 5 tuned values applied" in tuned.stderr, tuned.stderr
    assert tuned.stdout == base.stdout


def test_forced_non_default_values_keep_greedy_output(tmp_path):
    """The cache's values are applied even when they are not the defaults: split-K decode from
    context 8 on, one head per group, the widest matmul split; the greedy text does not change."""
    real_model_path(SMOL)
    tune(tmp_path)
    with open(cache_file(tmp_path)) as f:
        doc = json.load(f)
    forced = {"paged-decode-splits": 4, "attn-head-group": 1, "matmul-split": 8}
    for e in doc["entries"]:
        e["value"] = forced[e["op"]]
        if e["context"] == 64:
            e["context"] = 8
    with open(cache_file(tmp_path), "w") as f:
        json.dump(doc, f)
    base = generate(tmp_path)
    for mode in ("cache", "1"):
        tuned = generate(tmp_path, mode)
        assert "autotune: 5 tuned values applied" in tuned.stderr, tuned.stderr
        assert tuned.stdout == base.stdout, (tuned.stdout, base.stdout)
    assert generate(tmp_path, "0").stderr.count("autotune") == 0


def test_dry_run_prints_matrix_and_writes_nothing(tmp_path):
    p = run("tune", "--dry-run", env=env_for(tmp_path))
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "head_dim 128, 32 query heads, 8 KV heads, block size 32" in out
    for op in ("paged-decode-splits", "attn-head-group", "matmul-split"):
        assert f"op {op}" in out
    assert "1 (default), 2, 4, 8" in out
    for ctx in ("1024", "4096", "16384"):
        assert ctx in out
    assert not os.path.exists(os.path.join(str(tmp_path), "autotune"))
    p = run("tune", "--dry-run", "--op", "attn-head-group", "--head-dim", "64", "--context-lengths", "512",
            env=env_for(tmp_path))
    assert p.returncode == 0 and "op attn-head-group" in p.stdout and "paged-decode-splits" not in p.stdout


def test_refusals_are_one_line_exit_2(tmp_path):
    e = env_for(tmp_path)
    for args, needle in [
        (["--op", "qmm-tile"], "CUDA-only"),
        (["--op", "qmv-multirow"], "CUDA-only"),
        (["--qmm-tile-cap", "64"], "CUDA-only"),
        (["--op", "nope"], "unknown operation 'nope'"),
        (["--batch-sizes", "1,x"], "--batch-sizes"),
        (["--batch-sizes", ""], "--batch-sizes"),
        (["--context-lengths", "0"], "out of range"),
        (["--context-lengths", "1024,1024"], "twice"),
        (["--head-dim", "-5"], "head-dim"),
        (["--head-dim", "72"], "multiple of 16"),
        (["--q-heads", "30", "--kv-heads", "8"], "not a multiple"),
        (["--min-improvement", "abc"], "--min-improvement"),
        (["--min-improvement", "2"], "out of range"),
        (["--sample-ms", "nan"], "--sample-ms"),
        (["--reps", "10", "--max-reps", "5"], "--max-reps"),
        (["-m", SMOL, "--head-dim", "64"], "both give the shape"),
        (["stray"], ""),
    ]:
        p = run("tune", "--dry-run", *args, env=e)
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        assert_clean_error(p, needle)
    assert not os.path.exists(os.path.join(str(tmp_path), "autotune"))


def test_broken_or_foreign_cache_is_ignored_with_a_warning(tmp_path):
    real_model_path(SMOL)
    base = generate(tmp_path)
    os.makedirs(os.path.join(str(tmp_path), "autotune"))
    path = cache_file(tmp_path)
    entry = {"machine": {"cpu": "Another CPU 9000", "isa": "avx2", "threads": 2},
             "shape": {"head_dim": 64, "q_heads": 9, "kv_heads": 3, "block_size": 32},
             "op": "paged-decode-splits", "context": 0, "value": 4, "default": 1}
    cases = [
        ("{not json", "not valid JSON"),
        (json.dumps({"format": "mlxcel-autotune", "version": 99, "entries": []}), "version 99"),
        (json.dumps({"format": "something-else", "version": 1, "entries": []}), "not an mlxcel autotune file"),
        (json.dumps({"format": "mlxcel-autotune", "version": 1, "entries": [dict(entry, op="qmm-tile")]}), "not a knob"),
        (json.dumps({"format": "mlxcel-autotune", "version": 1, "entries": [entry]}), "another machine"),
    ]
    for text, needle in cases:
        with open(path, "w") as f:
            f.write(text)
        p = generate(tmp_path, "cache")
        warns = [l for l in p.stderr.splitlines() if l.startswith("warning:")]
        assert len(warns) == 1 and needle in warns[0], (needle, p.stderr)
        assert "tuned value" not in p.stderr
        assert p.stdout == base.stdout
    p = generate(tmp_path, "sometimes")
    assert "MLXCEL_AUTOTUNE=sometimes" in p.stderr and p.stdout == base.stdout
