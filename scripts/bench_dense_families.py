#!/usr/bin/env python3
"""Decode and prefill speed of the dense families' shared blocks, mlxcel next to llama.cpp on the same
GGUF files in one run, and each family's read rate next to plain `llama`'s.

One synthetic checkpoint per shared block the dense-breadth work added, made (once, cached under
--work) with transformers: random weights (seeded), Qwen3's vocabulary, hidden 1024, 24 layers,
16 heads of 64, MLP width 4096, so every file is far past the last-level cache:
  - llama:       the baseline (RMSNorm, SwiGLU, sequential residual, full rotary);
  - gpt_neox:    parallel attention/MLP residual, LayerNorm with bias, partial rotary (25%);
  - phi:         one shared LayerNorm before parallel attention and MLP, biases, partial rotary (50%);
  - gpt_bigcode: multi-query attention (one K/V head), learned positions, LayerNorm with bias.
llama.cpp's convert_hf_to_gguf.py writes a bf16 GGUF (convert_bf16) and llama-quantize makes each --quants file;
prefill of a 512-token prompt (pp512) and decode of 128 tokens after it (tg128 at depth 512),
median of --reps runs, `mlxcel generate` vs llama-bench with the same thread count. "GB/s" is the
file size times the decode rate (the bytes a decode step reads, the embedding table aside); "vs
llama" divides it by the llama row's of the same quantization.

  /tmp/fx/bin/python scripts/bench_dense_families.py [--threads 2] [--reps 3] [--only llama,gpt_neox]
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_moe import llama_run  # noqa: E402  (pp512, and tg128 at depth 512)
from bench_recurrent import make_checkpoint, make_gguf  # noqa: E402
from bench_vs_llamacpp import build_llama_bench, mlxcel_run, prompt_of  # noqa: E402

COMMON = dict(vocab_size=151936, bos_token_id=151643, eos_token_id=151645, tie_word_embeddings=False)
SHAPES = {
    "llama": ("LlamaConfig", dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, num_key_value_heads=16,
                                  intermediate_size=2752, max_position_embeddings=4096, **COMMON)),
    "gpt_neox": ("GPTNeoXConfig", dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                                       rotary_pct=0.25, use_parallel_residual=True, max_position_embeddings=4096, **COMMON)),
    "phi": ("PhiConfig", dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                              partial_rotary_factor=0.5, max_position_embeddings=4096, **COMMON)),
    "gpt_bigcode": ("GPTBigCodeConfig", dict(n_embd=1024, n_layer=24, n_head=16, n_inner=4096, multi_query=True,
                                             n_positions=4096, **COMMON)),
}


def convert_bf16(src, hf_dir, out):
    """llama.cpp's convert_hf_to_gguf.py on hf_dir into out (bf16), in this process: its
    hyper-parameters come from AutoConfig(...).to_dict(), where transformers 5 keeps the rotary
    fraction only in rope_parameters, while its GPT-NeoX and Phi converters read the top-level key
    the released configs carry (rotary_pct, partial_rotary_factor): given back with the same value."""
    if os.path.exists(out):
        return
    sys.path.insert(0, src)
    import convert_hf_to_gguf as conv
    saved = conv.ModelBase.load_hparams

    def load_hparams(dir_model, is_mistral_format):
        hp = saved(dir_model, is_mistral_format)
        frac = (hp.get("rope_parameters") or {}).get("partial_rotary_factor", 1.0)
        key = {"gpt_neox": "rotary_pct", "phi": "partial_rotary_factor"}.get(hp.get("model_type"))
        if key and hp.get(key) is None:
            hp[key] = frac
        return hp

    conv.ModelBase.load_hparams = staticmethod(load_hparams)
    argv = sys.argv
    sys.argv = ["convert_hf_to_gguf.py", hf_dir, "--outtype", "bf16", "--outfile", out + ".tmp"]
    try:
        conv.main()
    finally:
        sys.argv = argv
        conv.ModelBase.load_hparams = staticmethod(saved)
    os.rename(out + ".tmp", out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--work", default="/tmp/mlxcel-bench")
    ap.add_argument("--llama-bench")
    ap.add_argument("--only", default=",".join(SHAPES))
    ap.add_argument("--quants", default="Q4_K_M,Q8_0")
    a = ap.parse_args()
    bench = a.llama_bench or build_llama_bench(a.work)
    work = os.path.join(a.work, "dense")
    os.makedirs(work, exist_ok=True)
    names = a.only.split(",")
    for name in names:
        make_checkpoint(name, os.path.join(work, f"{name}-hf"), SHAPES)
        src = os.path.dirname(os.path.dirname(os.path.dirname(bench)))  # .../llama.cpp/build/bin/llama-bench
        convert_bf16(src, os.path.join(work, f"{name}-hf"), os.path.join(work, f"{name}-bf16.gguf"))
    t = a.threads
    print(f"Synthetic dense checkpoints (hidden 1024, 24 layers), {t} threads, median of {a.reps}")
    print("| model | quant | size GB | mlxcel pp512 tok/s | llama.cpp pp512 tok/s | ratio | mlxcel tg128 tok/s | "
          "llama.cpp tg128 tok/s | ratio | mlxcel GB/s | vs llama |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for q in a.quants.split(","):
        base = None
        for name in names:
            path = make_gguf(name, os.path.join(work, f"{name}-hf"), work, bench, q)
            prompt = prompt_of(path, 512)
            runs = [mlxcel_run(path, prompt, t) for _ in range(a.reps)]
            pp, tg = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
            lpp, ltg = llama_run(bench, path, t, a.reps)
            gbs = os.path.getsize(path) / 1e9 * tg
            base = gbs if name == "llama" else base
            rel = f"{gbs / base:.2f}" if base else "-"
            print(f"| {name} | {q} | {os.path.getsize(path) / 1e9:.2f} | {pp:.1f} | {lpp:.1f} | {pp / lpp:.2f} | {tg:.1f} | "
                  f"{ltg:.1f} | {tg / ltg:.2f} | {gbs:.1f} | {rel} |", flush=True)


if __name__ == "__main__":
    main()
