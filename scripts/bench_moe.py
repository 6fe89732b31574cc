#!/usr/bin/env python3
"""Speed of a mixture of experts, mlxcel next to llama.cpp on the same files in one run.

Makes (once, cached under --work) a synthetic Qwen3-MoE checkpoint with transformers: random
weights (seeded), 12 layers of hidden 2048, 16 query / 4 KV heads of 128, 32 experts of width
1024 with the top 4 renormalised, Qwen3's vocabulary (the tokenizer from
shared/testdata/tokenizers/qwen3) - 3.2 B parameters, 2.4 B of them experts. Then:
  - llama.cpp's convert_hf_to_gguf.py writes it as a bf16 GGUF and llama-quantize makes Q4_K_M
    (about 1.9 GB: far past any last-level cache), Q8_0 and MXFP4_MOE (the experts in MXFP4, as
    GPT-OSS's released files; --types picks);
  - `mlxcel convert -q` writes the MLX 4-bit (group 64) conversion;
  - prefill of a 512-token prompt (pp512) and decode of 128 tokens after it (tg128 at depth 512),
    median of --reps runs, mlxcel generate vs llama-bench (-d 512 for its tg128) with the same
    thread count (bench_vs_llamacpp.py's helpers for mlxcel);
  - the MLX 4-bit decode next to the GGUF's;
  - the server's aggregate decode with 1 and 8 streams (bench_server.py) on the Q4_K_M file.
The routed experts are packed (MLXCEL_EXPERT_STREAM=auto: they fit in memory); the script also
times decode with them streamed from the mapping (MLXCEL_EXPERT_STREAM=on).

llama.cpp comes from the llama-cpp-python sdist (bench_vs_llamacpp.py builds llama-bench;
llama-quantize is built beside it here). Needs torch + transformers (the reference venv) for the
checkpoint, about 8 GB of memory and 12 GB of disk under --work.

  /work/refvenv/bin/python scripts/bench_moe.py [--threads 2] [--reps 3] [--work /tmp/mlxcel-bench]
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_vs_llamacpp import MLXCEL, ROOT, build_llama_bench, mlxcel_run, prompt_of  # noqa: E402

TOKENIZER = os.path.join(ROOT, "..", "shared", "testdata", "tokenizers", "qwen3")
CONFIG = dict(vocab_size=151936, hidden_size=2048, num_hidden_layers=12, num_attention_heads=16, num_key_value_heads=4,
              head_dim=128, intermediate_size=6144, moe_intermediate_size=1024, num_experts=32, num_experts_per_tok=4,
              norm_topk_prob=True, decoder_sparse_step=1, max_position_embeddings=4096, rms_norm_eps=1e-6,
              tie_word_embeddings=False, bos_token_id=151643, eos_token_id=151645)


def llama_run(bench, model, threads, reps):
    """llama-bench's pp512, and tg128 after a 512-token context (-d 512): `mlxcel generate` decodes
    its 128 tokens after the 512-token prompt, so both sides attend over the same positions
    (llama-bench's plain tg128 starts from an empty context)."""
    p = subprocess.run([bench, "-m", model, "-p", "512", "-n", "0", "-t", str(threads), "-r", str(reps), "-o", "json"],
                       capture_output=True, text=True, check=True)
    pp = json.loads(p.stdout)[0]["avg_ts"]
    p = subprocess.run([bench, "-m", model, "-p", "0", "-n", "128", "-d", "512", "-t", str(threads), "-r", str(reps), "-o", "json"],
                       capture_output=True, text=True, check=True)
    return pp, json.loads(p.stdout)[0]["avg_ts"]


def make_checkpoint(hf_dir):
    if os.path.exists(os.path.join(hf_dir, "model.safetensors.index.json")) or os.path.exists(
            os.path.join(hf_dir, "model.safetensors")):
        return
    import torch
    import transformers
    torch.manual_seed(1234)
    cfg = transformers.Qwen3MoeConfig(**CONFIG)
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.save_pretrained(hf_dir, max_shard_size="2GB")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOKENIZER, f), hf_dir)


def llama_cpp_src(bench):
    return os.path.dirname(os.path.dirname(os.path.dirname(bench)))  # .../llama.cpp/build/bin/llama-bench


def make_gguf(hf_dir, work, bench, types):
    src = llama_cpp_src(bench)
    bf16 = os.path.join(work, "moe-bf16.gguf")
    if not os.path.exists(bf16):
        subprocess.run([sys.executable, os.path.join(src, "convert_hf_to_gguf.py"), hf_dir, "--outtype", "bf16",
                        "--outfile", bf16], check=True)
    quant = glob.glob(os.path.join(src, "build", "**", "llama-quantize"), recursive=True)
    if not quant:
        subprocess.run(["cmake", "--build", os.path.join(src, "build"), "--target", "llama-quantize", "-j",
                        str(os.cpu_count() or 1)], check=True)
        quant = glob.glob(os.path.join(src, "build", "**", "llama-quantize"), recursive=True)
    out = {}
    for q in types:
        path = os.path.join(work, f"moe-{q}.gguf")
        if not os.path.exists(path):
            subprocess.run([quant[0], bf16, path, q], check=True, capture_output=True)
        out[q] = path
    return out


def make_mlx(hf_dir, work):
    out = os.path.join(work, "moe-mlx4")
    if not os.path.exists(os.path.join(out, "config.json")):
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([MLXCEL, "convert", "-m", hf_dir, "-o", out, "-q", "--q-bits", "4", "--q-group-size", "64"],
                       check=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--work", default="/tmp/mlxcel-bench")
    ap.add_argument("--llama-bench")
    ap.add_argument("--no-server", action="store_true")
    ap.add_argument("--types", default="Q4_K_M,Q8_0,MXFP4_MOE",
                    help="llama-quantize types (MXFP4_MOE: the experts in MXFP4, as GPT-OSS's files); Q4_K_M is always made")
    a = ap.parse_args()
    work = os.path.join(a.work, "moe")
    os.makedirs(work, exist_ok=True)
    bench = a.llama_bench or build_llama_bench(a.work)
    hf_dir = os.path.join(work, "hf")
    make_checkpoint(hf_dir)
    ggufs = make_gguf(hf_dir, work, bench, ["Q4_K_M"] + [q for q in a.types.split(",") if q and q != "Q4_K_M"])
    mlx = make_mlx(hf_dir, work)
    t = a.threads
    prompt = prompt_of(ggufs["Q4_K_M"], 512)
    print(f"Synthetic Qwen3-MoE: {CONFIG['num_hidden_layers']} layers, {CONFIG['num_experts']} experts, "
          f"top {CONFIG['num_experts_per_tok']}, {t} threads, median of {a.reps}")
    print("| file | size GB | mlxcel pp512 tok/s | llama.cpp pp512 tok/s | ratio | mlxcel tg128 tok/s | llama.cpp tg128 tok/s | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for q, path in ggufs.items():
        runs = [mlxcel_run(path, prompt, t) for _ in range(a.reps)]
        pp, tg = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        lpp, ltg = llama_run(bench, path, t, a.reps)
        print(f"| {q} | {os.path.getsize(path) / 1e9:.2f} | {pp:.1f} | {lpp:.1f} | {pp / lpp:.2f} | {tg:.1f} | {ltg:.1f} | "
              f"{tg / ltg:.2f} |", flush=True)
    os.environ["MLXCEL_EXPERT_STREAM"] = "on"
    runs = [mlxcel_run(ggufs["Q4_K_M"], prompt, t) for _ in range(a.reps)]
    print(f"| Q4_K_M, experts streamed (mlxcel only) | - | {statistics.median(r[0] for r in runs):.1f} | - | - | "
          f"{statistics.median(r[1] for r in runs):.1f} | - | - |", flush=True)
    del os.environ["MLXCEL_EXPERT_STREAM"]
    runs = [mlxcel_run(mlx, prompt, t) for _ in range(a.reps)]
    size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(mlx, "*.safetensors")))
    print(f"| MLX 4-bit g64 (mlxcel only) | {size / 1e9:.2f} | {statistics.median(r[0] for r in runs):.1f} | - | - | "
          f"{statistics.median(r[1] for r in runs):.1f} | - | - |", flush=True)
    if not a.no_server:
        print()
        venv = os.path.join(ROOT, ".venv", "bin", "python")  # the test venv has the HTTP client bench_server uses
        subprocess.run([venv if os.path.exists(venv) else sys.executable, os.path.join(ROOT, "scripts", "bench_server.py"),
                        "--model", ggufs["Q4_K_M"],
                        "--streams", "1,8", "--threads", str(t), "--reps", str(a.reps)], check=True)


if __name__ == "__main__":
    main()
