#!/usr/bin/env python3
"""Speed of the recurrent families, mlxcel next to llama.cpp on the same files in one run.

Makes (once, cached under --work) two synthetic checkpoints with transformers: random weights
(seeded), Qwen3's vocabulary (the tokenizer from shared/testdata/tokenizers/qwen3):
  - mamba2: a Mamba-2 of 24 layers, hidden 1024 (32 heads of 64, state 128, one group);
  - qwen3_next: a Qwen3-Next-like hybrid of 16 layers, hidden 1024: 12 Gated DeltaNet layers (8 key
    heads, 16 value heads of 128) and 4 gated attention layers (8 / 2 heads of 128), each before 16
    experts of width 512 (top 4) and a shared expert.
Then, for each: llama.cpp's convert_hf_to_gguf.py writes a bf16 GGUF and llama-quantize makes
Q4_K_M (far past the last-level cache); prefill of a 512-token prompt (pp512) and decode of 128
tokens after it (tg128 at depth 512), median of --reps runs, mlxcel generate vs llama-bench (-d 512
for its tg128) with the same thread count; and the server's aggregate decode with 1 and 8 streams
(bench_server.py) on the Q4_K_M file.

llama.cpp comes from the llama-cpp-python sdist (bench_vs_llamacpp.py builds llama-bench; llama-quantize
beside it: bench_moe.py). Needs torch + transformers (the reference venv), about 6 GB of memory and
8 GB of disk under --work.

  /work/refvenv/bin/python scripts/bench_recurrent.py [--threads 2] [--reps 3] [--only mamba2,qwen3_next]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_moe import llama_run  # noqa: E402  (pp512, and tg128 at depth 512)
from bench_vs_llamacpp import ROOT, build_llama_bench, mlxcel_run, prompt_of  # noqa: E402

TOKENIZER = os.path.join(ROOT, "..", "shared", "testdata", "tokenizers", "qwen3")
COMMON = dict(vocab_size=151936, bos_token_id=151643, eos_token_id=151645, tie_word_embeddings=False)
SHAPES = {
    "mamba2": ("Mamba2Config", dict(hidden_size=1024, num_hidden_layers=24, num_heads=32, head_dim=64, expand=2, n_groups=1,
                                     state_size=128, conv_kernel=4, **COMMON)),
    "qwen3_next": ("Qwen3NextConfig", dict(hidden_size=1024, num_hidden_layers=16, num_attention_heads=8, num_key_value_heads=2,
                                            head_dim=128, linear_num_key_heads=8, linear_num_value_heads=16, linear_key_head_dim=128,
                                            linear_value_head_dim=128, linear_conv_kernel_dim=4, intermediate_size=2048,
                                            moe_intermediate_size=512, shared_expert_intermediate_size=512, num_experts=16,
                                            num_experts_per_tok=4, norm_topk_prob=True, max_position_embeddings=4096, **COMMON)),
}


def make_checkpoint(name, hf_dir, shapes=SHAPES):
    """Seeded random weights in bf16 for shapes[name] = (transformers config class, its arguments)."""
    if os.path.exists(os.path.join(hf_dir, "config.json")):
        return
    import torch
    import transformers
    torch.manual_seed(1234)
    cls, kw = shapes[name]
    model = transformers.AutoModelForCausalLM.from_config(getattr(transformers, cls)(**kw), dtype=torch.bfloat16)
    with torch.no_grad():  # (transformers leaves some of these uninitialised: seeded values of a sane size)
        for p in model.parameters():
            if not torch.isfinite(p).all():
                p.copy_(torch.randn_like(p, dtype=torch.float32).to(p.dtype) * 0.02)
    model.save_pretrained(hf_dir + ".tmp", max_shard_size="2GB")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOKENIZER, f), hf_dir + ".tmp")
    os.rename(hf_dir + ".tmp", hf_dir)


def make_gguf(name, hf_dir, work, bench, quant_type="Q4_K_M"):
    """llama.cpp's converter writes <name>-bf16.gguf once; llama-quantize makes <name>-<quant_type>.gguf."""
    src = os.path.dirname(os.path.dirname(os.path.dirname(bench)))  # .../llama.cpp/build/bin/llama-bench
    bf16 = os.path.join(work, f"{name}-bf16.gguf")
    if not os.path.exists(bf16):
        # (the synthetic Qwen3-Next has no MTP block: --no-mtp, which the converter otherwise needs a count for)
        subprocess.run([sys.executable, os.path.join(src, "convert_hf_to_gguf.py"), hf_dir, "--outtype", "bf16",
                        "--outfile", bf16 + ".tmp", *(["--no-mtp"] if name == "qwen3_next" else [])], check=True)
        os.rename(bf16 + ".tmp", bf16)
    quant = os.path.join(os.path.dirname(bench), "llama-quantize")
    if not os.path.exists(quant):
        subprocess.run(["cmake", "--build", os.path.join(src, "build"), "--target", "llama-quantize", "-j",
                        str(os.cpu_count() or 1)], check=True)
    out = os.path.join(work, f"{name}-{quant_type}.gguf")
    if not os.path.exists(out):
        subprocess.run([quant, bf16, out + ".tmp", quant_type], check=True, capture_output=True)
        os.rename(out + ".tmp", out)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--work", default="/tmp/mlxcel-bench")
    ap.add_argument("--llama-bench")
    ap.add_argument("--only", default=",".join(SHAPES))
    ap.add_argument("--no-server", action="store_true")
    a = ap.parse_args()
    bench = a.llama_bench or build_llama_bench(a.work)
    t = a.threads
    files = {}
    for name in a.only.split(","):
        work = os.path.join(a.work, "recurrent")
        os.makedirs(work, exist_ok=True)
        hf_dir = os.path.join(work, f"{name}-hf")
        make_checkpoint(name, hf_dir)
        files[name] = make_gguf(name, hf_dir, work, bench)
    print(f"Synthetic recurrent checkpoints as Q4_K_M, {t} threads, median of {a.reps}")
    print("| model | size GB | mlxcel pp512 tok/s | llama.cpp pp512 tok/s | ratio | mlxcel tg128 tok/s | llama.cpp tg128 tok/s | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for name, path in files.items():
        prompt = prompt_of(path, 512)
        runs = [mlxcel_run(path, prompt, t) for _ in range(a.reps)]
        pp, tg = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        lpp, ltg = llama_run(bench, path, t, a.reps)
        print(f"| {name} | {os.path.getsize(path) / 1e9:.2f} | {pp:.1f} | {lpp:.1f} | {pp / lpp:.2f} | {tg:.1f} | {ltg:.1f} | "
              f"{tg / ltg:.2f} |", flush=True)
    if not a.no_server:
        venv = os.path.join(ROOT, ".venv", "bin", "python")  # the test venv has the HTTP client bench_server uses
        for name, path in files.items():
            print(f"\n{name}:")
            subprocess.run([venv if os.path.exists(venv) else sys.executable, os.path.join(ROOT, "scripts", "bench_server.py"),
                            "--model", path, "--streams", "1,8", "--threads", str(t), "--reps", str(a.reps)], check=True)


if __name__ == "__main__":
    main()
