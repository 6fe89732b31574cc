#!/usr/bin/env python3
"""llama_server_tests.py - runs llama.cpp's own server test suite against `mlxcel-server`.

The suite (tools/server/tests) and the chat templates it reads (models/templates) come from the
llama.cpp that the PyPI llama-cpp-python source package vendors; they are unpacked under
build/llama-server-tests/ with their own virtualenv (tests/llama_server/requirements.txt), never
committed. tests/llama_server/mlxcel_adapter.py puts our bundled SmolLM2 GGUF in place of the
suite's downloads (and, for the infill preset, a tiny random-weight Qwen3 checkpoint, whose
vocabulary has FIM tokens, built here by tests/cli/tiny_checkpoint.py). Exits 1 when a test
that is not out of scope fails (scripts/test.sh runs it). Prints passed / failed / out-of-scope / skipped counts per file.

  python3 scripts/llama_server_tests.py [--bin build/mlxcel-server] [test_basic.py ...]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET

from bench_driver import model_store  # scripts/ is on sys.path when a script runs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "build", "llama-server-tests")
SDIST = "llama-cpp-python==0.3.36"
FILES = ["test_basic.py", "test_tokenize.py", "test_completion.py", "test_chat_completion.py", "test_template.py",
         "test_metrics.py", "test_compat_anthropic.py", "test_compat_oai_responses.py", "test_router.py", "test_infill.py",
         "test_slot_save.py", "test_sleep.py", "test_security.py"]
MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
EMBED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def sh(*cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def unpack():
    dst = os.path.join(WORK, "llama.cpp")
    if os.path.isdir(os.path.join(dst, "tools", "server", "tests")):
        return dst
    dl = os.path.join(WORK, "dl")
    os.makedirs(dl, exist_ok=True)
    if not glob.glob(os.path.join(dl, "llama_cpp_python-*.tar.gz")):
        sh(sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", SDIST, "-d", dl)
    tgz = glob.glob(os.path.join(dl, "llama_cpp_python-*.tar.gz"))[0]
    with tarfile.open(tgz) as t:
        top = t.getnames()[0].split("/")[0]
        want = [m for m in t.getmembers() if m.name.startswith((f"{top}/vendor/llama.cpp/tools/server/tests/",
                                                               f"{top}/vendor/llama.cpp/models/templates/"))]
        t.extractall(os.path.join(WORK, "x"), members=want, filter="data")
    os.rename(os.path.join(WORK, "x", top, "vendor", "llama.cpp"), dst)
    return dst


def venv():
    py = os.path.join(WORK, "venv", "bin", "python")
    if not os.path.exists(py):
        sh(sys.executable, "-m", "venv", os.path.join(WORK, "venv"))
    if subprocess.run([py, "-c", "import wget, pytest, openai, aiohttp"], capture_output=True).returncode:
        sh(py, "-m", "pip", "install", "-q", "-r", os.path.join(ROOT, "tests", "llama_server", "requirements.txt"))
    return py


def model_file(repo=None, pattern="*.gguf"):
    """A file of a bundled model in the store (the GGUF, or the directory holding `pattern`)."""
    repo = repo or MODEL
    files = glob.glob(os.path.join(model_store(), repo, pattern))
    if not files:
        sys.exit(f"error: {repo} is not in the model store (run scripts/fetch-models.sh)")
    return files[0] if pattern.endswith(".gguf") else os.path.dirname(files[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "mlxcel-server"))
    ap.add_argument("files", nargs="*", default=FILES)
    a = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    src = unpack()
    py = venv()
    tests = os.path.join(src, "tools", "server", "tests")
    infill_model = os.path.join(WORK, "tiny-qwen3-fim")
    if not os.path.exists(os.path.join(infill_model, "config.json")):  # (the project's venv has numpy)
        sh(os.path.join(ROOT, ".venv", "bin", "python"), "-c",
           "import json, sys; sys.path.insert(0, 'tests/cli'); from tiny_checkpoint import build_case_dir; "
           "c = next(c for c in json.load(open('tests/fixtures/checkpoint_json/reference.json'))['cases'] if c['tokenizer'] == 'qwen3'); "
           f"build_case_dir({infill_model!r}, c, {os.path.join(os.path.dirname(ROOT), 'shared', 'testdata')!r})", cwd=ROOT)
    junit = os.path.join(WORK, "junit.xml")
    env = dict(os.environ, MLXCEL_ADAPTER_MODEL=model_file(), MLXCEL_ADAPTER_BIN=os.path.abspath(a.bin),
               MLXCEL_ADAPTER_EMBED_MODEL=model_file(EMBED_MODEL, "config.json"),
               MLXCEL_ADAPTER_RERANK_MODEL=os.path.join(ROOT, "tests", "fixtures", "encoders", "bert-rerank"),
               MLXCEL_ADAPTER_INFILL_MODEL=infill_model,
               PYTHONPATH=os.path.join(ROOT, "tests", "llama_server"))
    subprocess.run([py, "-m", "pytest", "-p", "mlxcel_adapter", "-q", "--tb=line", f"--junitxml={junit}",
                    *[os.path.join("unit", f) for f in a.files]], cwd=tests, env=env)
    sys.path.insert(0, os.path.join(ROOT, "tests", "llama_server"))
    from mlxcel_adapter_scope import OUT_OF_SCOPE
    per = {}
    for tc in ET.parse(junit).getroot().iter("testcase"):
        f = tc.get("classname", "").split(".")[-1] + ".py"
        name = tc.get("name", "").split("[")[0]
        st = "passed"
        if tc.find("failure") is not None or tc.find("error") is not None:
            st = "out-of-scope" if f"{f}::{name}" in OUT_OF_SCOPE else "failed"
        elif tc.find("skipped") is not None:
            st = "skipped"
        per.setdefault(f, {"passed": 0, "failed": 0, "out-of-scope": 0, "skipped": 0})[st] += 1
    print("\n| file | passed | failed | out of scope | skipped |\n|---|---|---|---|---|")
    tot = {"passed": 0, "failed": 0, "out-of-scope": 0, "skipped": 0}
    for f in sorted(per):
        c = per[f]
        for k in tot:
            tot[k] += c[k]
        print(f"| {f} | {c['passed']} | {c['failed']} | {c['out-of-scope']} | {c['skipped']} |")
    print(f"| total | {tot['passed']} | {tot['failed']} | {tot['out-of-scope']} | {tot['skipped']} |")
    print(json.dumps(tot))
    return 1 if tot["failed"] or not tot["passed"] else 0


if __name__ == "__main__":
    sys.exit(main())
