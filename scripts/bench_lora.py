#!/usr/bin/env python3
"""Decode speed with an unfused LoRA adapter next to the base model alone (mlxcel generate).

Makes (once, under --work) SmolLM2-135M as a Hugging Face directory (`mlxcel convert --dtype f16`
of the bundled Q4_1 GGUF), a PEFT adapter of rank --rank on the --targets projections of every layer (default all seven)
(random A and B, seeded) and its GGUF form (llama.cpp's convert_lora_to_gguf.py). Then, --reps
times, alternating: the Q4_1 GGUF with and without the GGUF adapter, and the f16 directory with and
without the PEFT adapter; the figure is the median decode tokens/s and its ratio to the base.

SmolLM2 with its adapter stays in the last-level cache, where an adapter's bytes weigh most (at
rank 16 on all seven projections it is 10% of the Q4_1 file). --llama1b DIR adds a row for a
model past the cache: the Llama-3.2-1B-shaped random checkpoint of bench_quant_formats.py (DIR its
--work, holding llama1b-hf and llama1b-Q4_K_M.gguf), its Q4_K_M GGUF with a GGUF adapter made the
same way.

  /tmp/fx/bin/python scripts/bench_lora.py [--reps 3] [--rank 16] [--targets q_proj,v_proj] [--work /tmp/lorabench]
                                           [--llama-cpp DIR] [--llama1b /tmp/mlxcel-bench/quant]
(torch, transformers, peft; DIR holds convert_lora_to_gguf.py and gguf-py/.)
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_vs_llamacpp import MLXCEL, MODELS, STORE  # noqa: E402

ALL = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
PROMPT = "Write a short story about a robot learning to paint."


def adapters(hf, work, rank, lcpp, targets):
    """The PEFT adapter for the Hugging Face directory hf (under work) and its GGUF form."""
    tag = f"r{rank}" + ("" if len(targets) == 7 else "_" + "_".join(t.split("_")[0] for t in targets))
    peft_dir = os.path.join(work, f"peft_{tag}")
    gguf_lora = os.path.join(work, f"lora_{tag}.gguf")
    if not os.path.exists(os.path.join(peft_dir, "adapter_config.json")):
        import torch
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32)
        pm = get_peft_model(model, LoraConfig(r=rank, lora_alpha=rank, target_modules=list(targets)))
        g = torch.Generator().manual_seed(5)
        with torch.no_grad():
            for n, p in sorted(pm.named_parameters()):
                if "lora_" in n:
                    p.copy_(0.02 * torch.randn(p.shape, generator=g))
        pm.save_pretrained(peft_dir, safe_serialization=True)
    if not os.path.exists(gguf_lora):
        subprocess.run([sys.executable, os.path.join(lcpp, "convert_lora_to_gguf.py"), "--outtype", "f16", "--base", hf, "--outfile",
                        gguf_lora, peft_dir], check=True, capture_output=True, env=dict(os.environ, PYTHONPATH=os.path.join(lcpp, "gguf-py")))
    return peft_dir, gguf_lora


def make(work, rank, lcpp, targets):
    q41 = os.path.join(STORE, MODELS["smollm2"])
    hf = os.path.join(work, "smollm2_f16")
    if not os.path.exists(os.path.join(hf, "config.json")):
        subprocess.run([MLXCEL, "convert", "-m", q41, "-o", hf, "--dtype", "f16"], check=True)
    return (q41, hf) + adapters(hf, work, rank, lcpp, targets)


def decode_tps(model, extra, n):
    r = subprocess.run([MLXCEL, "generate", "-m", model, "-p", PROMPT, "-n", str(n), "--ignore-eos", "--profile", *extra],
                       capture_output=True, text=True, env=dict(os.environ, MXL_CPU_ISA="avx512"))
    if r.returncode:
        sys.exit(r.stderr)
    return float(re.search(r"Decode: [\d.]+ ms \(([\d.]+) tok/s\)", r.stderr).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--targets", default=",".join(ALL), help="projections the adapter updates (default: all seven)")
    ap.add_argument("--work", default="/tmp/lorabench")
    ap.add_argument("--llama-cpp", default="/tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp")
    ap.add_argument("--llama1b", help="bench_quant_formats.py's --work: adds its Llama-3.2-1B-shaped Q4_K_M")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    targets = [t for t in a.targets.split(",") if t]
    if not targets or any(t not in ALL for t in targets):
        sys.exit(f"--targets: a comma-separated list of {', '.join(ALL)}")
    q41, hf, peft_dir, gguf_lora = make(a.work, a.rank, a.llama_cpp, targets)
    rows = [("SmolLM2 Q4_1 GGUF + GGUF LoRA", q41, gguf_lora), ("SmolLM2 f16 safetensors + PEFT", hf, peft_dir)]
    if a.llama1b:
        base, hf1 = os.path.join(a.llama1b, "llama1b-Q4_K_M.gguf"), os.path.join(a.llama1b, "llama1b-hf")
        if not os.path.exists(base) or not os.path.exists(os.path.join(hf1, "config.json")):
            sys.exit(f"--llama1b: {a.llama1b} lacks llama1b-hf or llama1b-Q4_K_M.gguf (bench_quant_formats.py --gguf Q4_K_M makes them)")
        work1 = os.path.join(a.work, "llama1b")
        os.makedirs(work1, exist_ok=True)
        rows.append(("Llama-3.2-1B-shaped Q4_K_M GGUF + GGUF LoRA", base, adapters(hf1, work1, a.rank, a.llama_cpp, targets)[1]))
    print(f"rank {a.rank} on {'/'.join(t.split('_')[0] for t in targets)} of every layer, {a.n} tokens, median of {a.reps}, decode tokens/s\n")
    print("| model | base | with adapter (unfused) | ratio |")
    print("|---|---|---|---|")
    for name, model, adapter in rows:
        base, lora = [], []
        for _ in range(a.reps):
            base.append(decode_tps(model, [], a.n))
            lora.append(decode_tps(model, ["--adapter", adapter], a.n))
        b, l = statistics.median(base), statistics.median(lora)
        print(f"| {name} | {b:.1f} | {l:.1f} | **{l / b:.2f}x** |", flush=True)


if __name__ == "__main__":
    main()
