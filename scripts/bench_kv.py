#!/usr/bin/env python3
"""bench_kv.py - decode and prefill speed of each KV cache mode at a long context, side by side.

Runs `mlxcel generate` on one model with a prompt of about --ctx tokens (the KL text of
tests/fixtures/kv_quant, repeated) for each --kv-cache-mode, interleaved round by round so the
machine's drift falls on every mode alike, and prints the median decode and prefill tokens/s of
each mode and their ratio to fp16's, with the KV bytes per token `inspect` reports.

Usage: python3 scripts/bench_kv.py [--model REPO_OR_PATH] [--ctx 4000] [--rounds 3] [-n 64]
           [--modes fp16,q8_0,int8,q4_0,turbo4,turbo3,fp16+turbo4]   (MXL_CPU_ISA caps the level)
"""
import argparse
import json
import os
import re
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct-GGUF")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "mlxcel"))
    ap.add_argument("--ctx", type=int, default=4000, help="prompt tokens, about")
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default="fp16,q8_0,int8,q4_0,turbo4,turbo3,fp16+turbo4")
    a = ap.parse_args()
    text = open(os.path.join(ROOT, "tests", "fixtures", "kv_quant", "kl_text.txt")).read()
    prompt = (text + "\n") * max(1, round(a.ctx / 2000))  # (the text is about 2000 tokens)
    modes = a.modes.split(",")
    dec = {m: [] for m in modes}
    pre = {m: [] for m in modes}
    n_prompt = 0
    for _ in range(a.rounds):
        for m in modes:
            p = subprocess.run([a.bin, "generate", "-m", a.model, "-p", prompt, "--no-chat-template", "-n", str(a.n), "--temp", "0",
                                "--ignore-eos", "--kv-cache-mode", m], capture_output=True, text=True, check=True)
            g = re.search(r"\(([\d.]+) tok/s\); prompt (\d+) tokens, prefill ([\d.]+) tok/s", p.stderr)
            dec[m].append(float(g.group(1)))
            n_prompt = int(g.group(2))
            pre[m].append(float(g.group(3)))
    base_d, base_p = statistics.median(dec["fp16"]), statistics.median(pre["fp16"]) if "fp16" in modes else (None, None)
    print(f"model {a.model}, prompt {n_prompt} tokens, {a.n} decoded, medians of {a.rounds}, "
          f"MXL_CPU_ISA={os.environ.get('MXL_CPU_ISA', '(native)')}")
    print("| KV mode | bytes / token | decode tok/s | vs fp16 | prefill tok/s | vs fp16 |")
    print("|---|---|---|---|---|---|")
    for m in modes:
        j = json.loads(subprocess.run([a.bin, "inspect", "-m", a.model, "--json", "-n", "1", "--kv-cache-mode", m],
                                      capture_output=True, text=True, check=True).stdout)
        d, p = statistics.median(dec[m]), statistics.median(pre[m])
        print(f"| {m} | {j['kv_bytes_per_token']} | {d:.1f} | {d / base_d:.2f}x | {p:.1f} | {p / base_p:.2f}x |")


if __name__ == "__main__":
    main()
