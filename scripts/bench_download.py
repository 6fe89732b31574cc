#!/usr/bin/env python3
"""bench_download.py - download throughput of `mlxcel download` against huggingface_hub's
snapshot_download, side by side on the same local Hub-compatible server (tests/hub/hub_server.py)
over loopback: a repository with one large file and one with many small files.

Each round empties both caches and downloads with each tool in turn (order alternating); the table
gives medians over the rounds and the ratio of throughputs (>1: mlxcel faster).

  .venv/bin/python scripts/bench_download.py [--big-mb 500] [--small-files 200] [--rounds 5]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--big-mb", type=int, default=500)
    ap.add_argument("--small-files", type=int, default=200)
    ap.add_argument("--small-kb", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "mlxcel"))
    ap.add_argument("--workdir", default=None)
    a = ap.parse_args()

    work = a.workdir or tempfile.mkdtemp(prefix="bench-dl-")
    repos = os.path.join(work, "repos")
    big = os.path.join(repos, "bench", "big", "main")
    small = os.path.join(repos, "bench", "small", "main")
    if not os.path.isdir(big):
        os.makedirs(big)
        with open(os.path.join(big, "config.json"), "w") as f:
            f.write("{}\n")
        with open(os.path.join(big, "model.safetensors"), "wb") as f:
            for _ in range(a.big_mb):
                f.write(os.urandom(1 << 20))
    if not os.path.isdir(small):
        os.makedirs(small)
        for i in range(a.small_files):
            with open(os.path.join(small, f"f{i:04d}.json"), "wb") as f:
                f.write(os.urandom(a.small_kb * 1024))
    srv = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "hub", "hub_server.py"), "--root", repos],
                           stdout=subprocess.PIPE, text=True)
    port = int(srv.stdout.readline().split()[1])
    env = dict(os.environ, HF_ENDPOINT=f"http://127.0.0.1:{port}", HF_HUB_DISABLE_PROGRESS_BARS="1",
               HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_ENABLE_HF_TRANSFER="0")
    for k in ("HF_TOKEN", "HF_HUB_OFFLINE", "MLXCEL_MODELS_DIR"):
        env.pop(k, None)

    def run_mlxcel(repo, cache):
        e = dict(env, HF_HUB_CACHE=os.path.join(cache, "hf"), MLXCEL_CACHE_DIR=os.path.join(cache, "mx"))
        t = time.perf_counter()
        subprocess.run([a.bin, "download", repo, "--quiet"], env=e, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t

    def run_hf(repo, cache):
        e = dict(env, HF_HUB_CACHE=os.path.join(cache, "hf"))
        code = ("import time, huggingface_hub as h\nt=time.perf_counter()\n"
                f"h.snapshot_download('{repo}')\nprint(time.perf_counter()-t)")
        r = subprocess.run([sys.executable, "-c", code], env=e, check=True, capture_output=True, text=True)
        return float(r.stdout.strip().splitlines()[-1])  # the call itself, without Python's start-up

    try:
        # warm the server's digest cache (it hashes a revision on first use)
        warm = os.path.join(work, "warm")
        run_mlxcel("bench/big", warm)
        run_mlxcel("bench/small", warm)
        shutil.rmtree(warm)
        rows = []
        for repo, size in (("bench/big", a.big_mb * (1 << 20) + 3), ("bench/small", a.small_files * a.small_kb * 1024)):
            tm, th = [], []
            for r in range(a.rounds):
                for who in (("m", "h") if r % 2 == 0 else ("h", "m")):
                    cache = os.path.join(work, f"c-{who}")
                    shutil.rmtree(cache, ignore_errors=True)
                    (tm if who == "m" else th).append((run_mlxcel if who == "m" else run_hf)(repo, cache))
                    shutil.rmtree(cache, ignore_errors=True)
            mm, mh = statistics.median(tm), statistics.median(th)
            rows.append((repo, size, mm, mh))
        print(f"{'repository':14} {'bytes':>12} {'mlxcel s':>9} {'MB/s':>8} {'hf_hub s':>9} {'MB/s':>8} {'ratio':>6}")
        for repo, size, mm, mh in rows:
            print(f"{repo:14} {size:12d} {mm:9.3f} {size / mm / 1e6:8.1f} {mh:9.3f} {size / mh / 1e6:8.1f} {mh / mm:6.2f}")
        print(f"(medians of {a.rounds} rounds; ratio = mlxcel throughput / huggingface_hub throughput)")
    finally:
        srv.terminate()
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
