#!/usr/bin/env python3
"""bench_embed.py - MiniLM sentence-embedding throughput: mlxcel next to sentence-transformers.

Issue 8 (Speed): all-MiniLM-L6-v2 sentences/s at batch 16 on 1 and 2 threads, against PyPI
sentence-transformers (torch CPU, torch.set_num_threads(t)) in the same run; goal >= 1.5x.

Both sides embed the same 256 sentences (the 52 texts of tests/fixtures/embeddings/minilm.json -
English, code, CJK, inputs past the 256-token limit - cycled to 256), batch 16, normalized mean
pooling as the checkpoint says. mlxcel runs through scripts/bench_embed_driver.c (compiled here
against BUILD/libmlxcel.a) so its thread count is exact and model load is outside the timing; it
also does one warm-up pass, as sentence-transformers does below. Each number is the median of
REPS timed passes over all sentences; the two sides' outputs are compared (the first sentence's first
and the last sentence's last component, within 1e-4) and the script fails when they differ. No
network: the model comes from the local store.

usage: scripts/bench_embed.py [--build build] [--threads 1,2] [--reps 3] [--n 256]
       (run with /work/refvenv/bin/python or any Python that has sentence-transformers)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_driver import build_driver, model_store  # scripts/ is on sys.path when a script runs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"


def model_dir():
    return os.path.join(model_store(), MODEL_ID)


def sentences(n):
    with open(os.path.join(ROOT, "tests/fixtures/embeddings/minilm.json")) as f:
        texts = [c["text"] for c in json.load(f)["cases"]]
    return [texts[i % len(texts)] for i in range(n)]


def bench_mlxcel(exe, path, texts_file, threads, batch, reps):
    """(seconds per pass, checksum: the first sentence's first component + the last one's last)"""
    out = subprocess.run([exe, path, texts_file, str(threads), str(batch), str(reps)],
                         check=True, capture_output=True, text=True).stdout
    secs = [float(l.split()[1]) for l in out.splitlines() if l.startswith("seconds ")]
    check = [float(l.split()[1]) for l in out.splitlines() if l.startswith("checksum ")]
    return secs, check[0]


def bench_st(path, texts, threads, batch, reps):
    import torch
    from sentence_transformers import SentenceTransformer
    torch.set_num_threads(threads)
    model = SentenceTransformer(path, device="cpu")
    model.encode(texts, batch_size=batch, normalize_embeddings=False)  # warm-up
    secs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        emb = model.encode(texts, batch_size=batch)
        secs.append(time.perf_counter() - t0)
    return secs, float(emb[0][0]) + float(emb[-1][-1])  # the driver's checksum, from the reference


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--skip-st", action="store_true", help="mlxcel only")
    a = ap.parse_args()
    path = model_dir()
    if not os.path.exists(os.path.join(path, "model.safetensors")):
        sys.exit(f"{path}: model missing (scripts/fetch-models.sh)")
    texts = sentences(a.n)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tf = os.path.join(tmp, "sentences.txt")
        with open(tf, "w") as f:
            for t in texts:
                f.write(t.replace("\\", "\\\\").replace("\n", "\\n") + "\n")
        exe = build_driver(a.build, tmp, "bench_embed_driver")
        for t in [int(x) for x in a.threads.split(",")]:
            mx_secs, mx_check = bench_mlxcel(exe, path, tf, t, a.batch, a.reps)
            mx = statistics.median(mx_secs)
            st = None
            if not a.skip_st:
                st_secs, st_check = bench_st(path, texts, t, a.batch, a.reps)
                st = statistics.median(st_secs)
                # the timed outputs must be the same embeddings, or the comparison means nothing
                if abs(mx_check - st_check) > 1e-4:
                    sys.exit(f"outputs differ: mlxcel checksum {mx_check:.6f}, sentence-transformers {st_check:.6f}")
            rows.append((t, a.n / mx, None if st is None else a.n / st))
    print(f"all-MiniLM-L6-v2, {a.n} sentences, batch {a.batch}, median of {a.reps}")
    print(f"{'threads':>7}  {'mlxcel sent/s':>13}  {'sentence-transformers sent/s':>28}  {'ratio':>6}")
    for t, mx, st in rows:
        print(f"{t:>7}  {mx:>13.1f}  {'-' if st is None else f'{st:.1f}':>28}  "
              f"{'-' if st is None else f'{mx / st:.2f}x':>6}")


if __name__ == "__main__":
    main()
