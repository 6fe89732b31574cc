#!/usr/bin/env python3
"""Prefill and decode speed of every quantization format, mlxcel next to llama.cpp on the same
files in one run, with the read rate of our decode next to the machine's measured read bandwidth.

The checkpoint (made once, cached under --work): a Llama-3.2-1B-shaped model with random weights
(seeded, bf16) from transformers - hidden 2048, 16 layers, 32 query / 8 KV heads of 64, MLP 8192,
tied embeddings, Qwen3's vocabulary - so every file is far past the last-level cache. llama.cpp's
convert_hf_to_gguf.py writes it as bf16 and llama-quantize makes each GGUF format (--gguf); our
`mlxcel convert -q` makes each MLX mode (--mlx: bits, group 64). An MLX row is compared with the
llama.cpp file of the nearest size (MLX_PEER).

Per row and ISA level (--isa: amx is the default dispatch on a CPU with AMX; avx512 and avx2 set
MXL_CPU_ISA): a 256-token prompt (pp256) then 64 decoded tokens (tg64, attending over the
prompt), as `mlxcel generate --profile` reports them; llama-bench's pp256 and tg64 at depth 256,
runs interleaved rep by rep, medians. "GB/s" is the file's bytes times our decode rate (what a
decode step reads, the tied table as the LM head), "% read" that over the STREAM-style read of
`mlxcel bench kernels` at the same thread count.

llama.cpp comes from the llama-cpp-python source package, built outside the repository with the
AVX-512 options named (bench_vs_llamacpp.build_llama_bench; its AMX build dies on these machines).
Needs torch + transformers for the checkpoint (any venv: --python).

  python3 scripts/bench_quant_formats.py [--threads 2] [--reps 3] [--gguf Q4_K_M,Q5_K_M] [--mlx 3,4]
                                         [--isa amx,avx512,avx2] [--python /path/to/venv/bin/python]
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_vs_llamacpp import MLXCEL, ROOT, build_llama_bench, prompt_of  # noqa: E402

GGUF = ["Q2_K", "Q3_K_M", "Q4_0", "Q4_1", "Q4_K_M", "Q5_0", "Q5_1", "Q5_K_M", "Q6_K", "Q8_0", "IQ4_NL", "IQ4_XS",
        "TQ1_0", "TQ2_0", "BF16", "F16"]
MLX = [2, 3, 4, 5, 6, 8]
MLX_PEER = {2: "Q2_K", 3: "Q3_K_M", 4: "Q4_0", 5: "Q5_0", 6: "Q6_K", 8: "Q8_0"}
TOKENIZER = os.path.join(ROOT, "..", "shared", "testdata", "tokenizers", "qwen3")
MAKE_CHECKPOINT = r'''
import os, shutil, sys, torch, transformers
out, tok = sys.argv[1], sys.argv[2]
torch.manual_seed(1234)
cfg = transformers.LlamaConfig(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                               head_dim=64, intermediate_size=8192, vocab_size=151936, tie_word_embeddings=True,
                               max_position_embeddings=4096, rope_theta=500000.0, bos_token_id=151643, eos_token_id=151645)
model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
model.save_pretrained(out + ".tmp", max_shard_size="4GB")
for f in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(os.path.join(tok, f), out + ".tmp")
os.rename(out + ".tmp", out)
'''


def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)


def make_files(a, bench):
    """The checkpoint, its GGUF formats and MLX modes: {row label: (path, bytes, peer label)}."""
    os.makedirs(a.work, exist_ok=True)
    hf = os.path.join(a.work, "llama1b-hf")
    if not os.path.exists(os.path.join(hf, "config.json")):
        subprocess.run([a.python, "-c", MAKE_CHECKPOINT, hf, TOKENIZER], check=True)
    src = os.path.dirname(os.path.dirname(os.path.dirname(bench)))  # .../llama.cpp/build/bin/llama-bench
    bf16 = os.path.join(a.work, "llama1b-BF16.gguf")
    if not os.path.exists(bf16):
        subprocess.run([a.python, os.path.join(src, "convert_hf_to_gguf.py"), hf, "--outtype", "bf16", "--outfile",
                        bf16 + ".tmp"], check=True)
        os.rename(bf16 + ".tmp", bf16)
    quant = os.path.join(os.path.dirname(bench), "llama-quantize")
    if not os.path.exists(quant):
        subprocess.run(["cmake", "--build", os.path.join(src, "build"), "--target", "llama-quantize", "-j",
                        str(os.cpu_count() or 1)], check=True)
    files = {}
    for q in a.gguf:
        out = os.path.join(a.work, f"llama1b-{q}.gguf")
        if not os.path.exists(out):
            run([quant, bf16, out + ".tmp", q])
            os.rename(out + ".tmp", out)
        files[q] = (out, os.path.getsize(out), q)
    for bits in a.mlx:
        out = os.path.join(a.work, f"llama1b-mlx{bits}")
        if not os.path.exists(os.path.join(out, "config.json")):
            run([MLXCEL, "convert", "-m", hf, "-o", out + ".tmp", "-q", "--q-bits", str(bits), "--q-group-size", "64"])
            os.rename(out + ".tmp", out)
        size = sum(os.path.getsize(f) for f in glob.glob(os.path.join(out, "*.safetensors")))
        peer = MLX_PEER[bits]
        if peer not in files:  # the peer's GGUF is measured too
            path = os.path.join(a.work, f"llama1b-{peer}.gguf")
            if not os.path.exists(path):
                run([quant, bf16, path + ".tmp", peer])
                os.rename(path + ".tmp", path)
            files[peer] = (path, os.path.getsize(path), peer)
        files[f"MLX {bits}-bit g64"] = (out, size, peer)
    return files


def mlxcel_once(path, prompt, threads, isa):
    env = dict(os.environ)
    if isa != "amx":
        env["MXL_CPU_ISA"] = isa
    p = run([MLXCEL, "generate", "-m", path, "--no-chat-template", "-p", prompt, "-n", "64", "--ignore-eos", "--profile",
             "--threads", str(threads)], env)
    pp = float(re.search(r"Prefill: [\d.]+ ms \(([\d.]+) tok/s\)", p.stderr).group(1))
    tg = float(re.search(r"Decode: [\d.]+ ms \(([\d.]+) tok/s\)", p.stderr).group(1))
    return pp, tg


def llama_once(bench, path, threads):
    pp = json.loads(run([bench, "-m", path, "-p", "256", "-n", "0", "-t", str(threads), "-r", "1", "-o", "json"]).stdout)
    tg = json.loads(run([bench, "-m", path, "-p", "0", "-n", "64", "-d", "256", "-t", str(threads), "-r", "1", "-o",
                         "json"]).stdout)
    return pp[0]["avg_ts"], tg[0]["avg_ts"]


def stream_read(threads):
    out = run([MLXCEL, "bench", "kernels", "--no-gemm", "-t", str(threads), "--reps", "3"]).stdout
    m = re.search(r"STREAM-style read of .*", out)
    rates = dict((int(n), float(v)) for n, v in re.findall(r"(\d+) threads? ([\d.]+) GB/s", m.group(0)))
    return rates[threads]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--gguf", default=",".join(GGUF))
    ap.add_argument("--mlx", default=",".join(map(str, MLX)))
    ap.add_argument("--isa", default="amx,avx512,avx2")
    ap.add_argument("--work", default="/tmp/mlxcel-bench/quant")
    ap.add_argument("--llama-bench")
    ap.add_argument("--python", default=sys.executable, help="a Python with torch and transformers")
    a = ap.parse_args()
    a.gguf = [q for q in a.gguf.split(",") if q]
    a.mlx = [int(b) for b in a.mlx.split(",") if b]
    bench = a.llama_bench or build_llama_bench(os.path.dirname(a.work))
    files = make_files(a, bench)
    isas = a.isa.split(",")
    read = stream_read(a.threads)
    prompt = prompt_of(files[next(iter(files))][0], 256)
    # every run interleaved: per rep, each row's mlxcel levels then its llama.cpp file
    ours = {(row, isa): [] for row in files for isa in isas}
    peer_runs = {files[row][2]: [] for row in files}
    for _ in range(a.reps):
        for row, (path, _, peer) in files.items():
            for isa in isas:
                ours[(row, isa)].append(mlxcel_once(path, prompt, a.threads, isa))
            if row == peer:
                peer_runs[peer].append(llama_once(bench, path, a.threads))
    med = lambda runs, i: statistics.median(r[i] for r in runs)  # noqa: E731
    print(f"Llama-3.2-1B-shaped synthetic checkpoint, {a.threads} threads, pp256 / tg64 at depth 256, median of {a.reps}; "
          f"STREAM-style read {read:.1f} GB/s")
    print("| format | level | size GB | mlxcel pp256 | llama.cpp pp256 | ratio | mlxcel tg64 | llama.cpp tg64 | ratio | "
          "decode GB/s | % read |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row, (path, size, peer) in files.items():
        lpp, ltg = med(peer_runs[peer], 0), med(peer_runs[peer], 1)
        for isa in isas:
            pp, tg = med(ours[(row, isa)], 0), med(ours[(row, isa)], 1)
            label = row if peer == row else f"{row} (vs {peer})"
            print(f"| {label} | {isa} | {size / 1e9:.2f} | {pp:.1f} | {lpp:.1f} | {pp / lpp:.2f} | {tg:.1f} | {ltg:.1f} | "
                  f"{tg / ltg:.2f} | {size * tg / 1e9:.1f} | {100 * size * tg / 1e9 / read:.0f}% |")


if __name__ == "__main__":
    main()
