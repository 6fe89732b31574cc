#!/usr/bin/env python3
"""Speculative decoding, mlxcel next to plain decoding and next to llama.cpp's own speculative paths.

Workloads (greedy, raw prompts so both engines read the same tokens, stopped by EOS or --max-tokens,
on both bundled models):
  edit  the model rewrites a ~300-token Python file (rename a class, rename a method, add a comment),
        asked completion-style ("Original file: ... The same file with ...:")
  free  open questions and a story (text that does not copy the prompt), in SmolLM2's ChatML or as
        raw openings for the base Gemma model
Rows, each the median decode tokens/s of --reps runs, alternating engines within a rep:
  prompt lookup   mlxcel plain | mlxcel --prompt-lookup | llama-lookup (the same n-gram sizes and
                  block: --spec-draft-n-max 7) | llama-completion plain
  draft model     target SmolLM2 F16 (llama-quantize --allow-requantize of the bundled Q4_1 GGUF;
                  both engines read that file), draft the bundled Q4_1: mlxcel plain | mlxcel
                  --draft-model (block 4) | llama-speculative -md (--spec-draft-n-max 4) | llama-completion
Each mlxcel speculative run's text must equal its plain run's (the verification keeps the target's
own picks); the script says so per row. Acceptance (accepted / drafted) from each engine's counts.

llama.cpp comes from the llama-cpp-python sdist (bench_vs_llamacpp.py fetches and builds it with
the AVX-512 extensions named, not -march=native: AMX crashes these VMs); its examples are built
here beside llama-bench. mlxcel runs capped at AVX-512 VNNI (MXL_CPU_ISA=avx512), like for like.

  .venv/bin/python scripts/bench_speculate.py [--threads 2] [--reps 3] [--work /tmp/lcp]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_vs_llamacpp import MLXCEL, MODELS, STORE, build_llama_bench  # noqa: E402

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

CODE = '''import json
import os


class Inventory:
    """A small inventory of items with quantities and prices."""

    def __init__(self, path):
        self.path = path
        self.items = {}

    def load(self):
        if os.path.exists(self.path):
            with open(self.path) as f:
                self.items = json.load(f)

    def save(self):
        with open(self.path, "w") as f:
            json.dump(self.items, f, indent=2)

    def add(self, name, quantity, price):
        item = self.items.get(name, {"quantity": 0, "price": price})
        item["quantity"] += quantity
        item["price"] = price
        self.items[name] = item

    def remove(self, name, quantity):
        item = self.items[name]
        item["quantity"] -= quantity
        if item["quantity"] <= 0:
            del self.items[name]

    def total_value(self):
        total = 0
        for item in self.items.values():
            total += item["quantity"] * item["price"]
        return total


def main():
    inv = Inventory("inventory.json")
    inv.load()
    inv.add("apple", 10, 0.5)
    inv.add("pear", 4, 0.75)
    inv.remove("apple", 3)
    print(inv.total_value())
    inv.save()


if __name__ == "__main__":
    main()
'''

# edit: a completion-style request the models answer by rewriting the file (the bundled Gemma 3
# 270M is a base model without a chat template; SmolLM2-135M, asked in a chat to rewrite a file,
# mostly talks about it instead)
CHANGES = ["the class Inventory renamed to Stock", "the method total_value renamed to value",
           "a comment above the main function"]
EDIT = [f"Original file:\n```python\n{CODE}```\n\nThe same file with {c}:\n```python\n" for c in CHANGES]
FREE = [
    "What are the main causes of the seasons on Earth?",
    "Give me three tips for learning a new language.",
    "Write a short story about a robot learning to paint.",
]
FREE_RAW = [  # for the base model
    "The main causes of the seasons on Earth are",
    "Here are three tips for learning a new language:",
    "Once upon a time, a robot decided to learn to paint.",
]


def chatml(user):
    return f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


def build_examples(work):
    bench = build_llama_bench(work)
    build = os.path.dirname(os.path.dirname(bench))
    bins = {t: os.path.join(build, "bin", t) for t in ("llama-lookup", "llama-speculative", "llama-completion", "llama-quantize")}
    missing = [t for t, p in bins.items() if not os.path.exists(p)]
    if missing:
        src = os.path.dirname(build)
        subprocess.run(["cmake", "-S", src, "-B", build, "-DLLAMA_BUILD_EXAMPLES=ON", "-DLLAMA_BUILD_TOOLS=ON"], check=True)
        subprocess.run(["cmake", "--build", build, "--target", *missing, "-j", str(os.cpu_count() or 1)], check=True)
    return bins


def mlxcel(model, prompt, args, threads, n):
    env = dict(os.environ, MXL_CPU_ISA="avx512")
    r = subprocess.run([MLXCEL, "generate", "-m", model, "--no-chat-template", "-p", prompt, "-n", str(n), "--threads", str(threads),
                        "--profile", *args], capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit(f"mlxcel failed: {r.stderr}")
    tps = float(re.search(r"Decode: [\d.]+ ms \(([\d.]+) tok/s\)", r.stderr).group(1))
    m = re.search(r"Speculation: \d+ rounds, (\d+) drafted, (\d+) accepted", r.stderr)
    return tps, r.stdout, (int(m.group(1)), int(m.group(2))) if m else None


def llama(exe, model, prompt, args, threads, n):
    r = subprocess.run([exe, "-m", model, "-p", prompt, "-n", str(n), "-t", str(threads), "--temp", "0", "-c", "4096",
                        *args], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    out = r.stdout + r.stderr
    if r.returncode:
        sys.exit(f"{os.path.basename(exe)} failed: {out[-2000:]}")
    m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s", out)
    if m:
        tps = float(m.group(3))
    else:  # llama-completion: the eval line of its perf report
        m = re.search(r"eval time =\s+[\d.]+ ms /\s+(\d+) runs.*?([\d.]+) tokens per second", out.split("prompt eval time")[-1])
        tps = float(m.group(2))
    d = re.search(r"n_drafted\s*=\s*(\d+)", out)
    a = re.search(r"n_accept\s*=\s*(\d+)", out)
    return tps, (int(d.group(1)), int(a.group(1))) if d and a else None


def row(name, prompts, target, spec_args, ll_exe, ll_args, bins, threads, reps, n):
    res = {k: [] for k in ("plain", "spec", "ll", "llplain")}
    acc = {"spec": [0, 0], "ll": [0, 0]}
    same = True
    for _ in range(reps):
        for p in prompts:
            t_plain, text_plain, _ = mlxcel(target, p, [], threads, n)
            t_spec, text_spec, a = mlxcel(target, p, spec_args, threads, n)
            same &= text_plain == text_spec
            t_ll, b = llama(ll_exe, target, p, ll_args, threads, n)
            t_llp, _ = llama(bins["llama-completion"], target, p, ["-no-cnv", "--no-display-prompt"], threads, n)
            for k, v in (("plain", t_plain), ("spec", t_spec), ("ll", t_ll), ("llplain", t_llp)):
                res[k].append(v)
            for k, v in (("spec", a), ("ll", b)):
                if v:
                    acc[k][0] += v[0]
                    acc[k][1] += v[1]
    med = {k: statistics.median(v) for k, v in res.items()}
    rate = {k: (100.0 * v[1] / v[0] if v[0] else 0.0) for k, v in acc.items()}
    print(f"| {name} | {med['plain']:.1f} | {med['spec']:.1f} | **{med['spec'] / med['plain']:.2f}x** | {rate['spec']:.0f}% | "
          f"{med['ll']:.1f} | {rate['ll']:.0f}% | {med['llplain']:.1f} | **{med['spec'] / med['ll']:.2f}x** | {'yes' if same else 'NO'} |",
          flush=True)
    return same


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=400)
    ap.add_argument("--work", default="/tmp/lcp")
    args = ap.parse_args()
    bins = build_examples(args.work)
    q41 = os.path.join(STORE, MODELS["smollm2"])
    f16 = os.path.join(args.work, "SmolLM2-135M-Instruct.F16.gguf")
    if not os.path.exists(f16):
        subprocess.run([bins["llama-quantize"], "--allow-requantize", q41, f16, "F16"], check=True, capture_output=True)
    gemma = os.path.join(STORE, MODELS["gemma3"])
    print(f"threads {args.threads}, {args.reps} reps, median decode tokens/s, greedy, up to {args.max_tokens} tokens\n")
    print("| workload | mlxcel plain | mlxcel spec | spec / plain | accepted | llama.cpp spec | accepted | llama.cpp plain "
          "| mlxcel spec / llama.cpp spec | same text as plain |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ok = True
    look = ["--prompt-lookup"]
    ll_look = ["--spec-draft-n-max", "7"]
    for name, model, ps in (("prompt lookup, edit, SmolLM2 Q4_1", q41, EDIT), ("prompt lookup, free text, SmolLM2 Q4_1", q41, [chatml(p) for p in FREE]),
                            ("prompt lookup, edit, Gemma 3 270M Q4_K_M", gemma, EDIT), ("prompt lookup, free text, Gemma 3 270M Q4_K_M", gemma, FREE_RAW)):
        ok &= row(name, ps, model, look, bins["llama-lookup"], ll_look, bins, args.threads, args.reps, args.max_tokens)
    dm = ["--draft-model", q41]
    ll_dm = ["-md", q41, "--spec-draft-n-max", "4", "-td", str(args.threads)]
    for name, ps in (("draft model, edit, SmolLM2 F16 <- Q4_1", EDIT), ("draft model, free text, SmolLM2 F16 <- Q4_1", [chatml(p) for p in FREE])):
        ok &= row(name, ps, f16, dm, bins["llama-speculative"], ll_dm, bins, args.threads, args.reps, args.max_tokens)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
