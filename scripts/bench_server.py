#!/usr/bin/env python3
"""bench_server.py - load benchmark of `mlxcel serve` on loopback, bounded in time.

For 1, 2, 4 and 8 concurrent streams (every stream generates the same number of tokens with
ignore_eos): aggregate decode tokens/s - the tokens after each stream's first, over the span from
the earliest first token to the latest last one, so prefill and TTFT are not in it but the streams'
staggered starts and ends are - and its ratio to one stream; the same with the whole round's wall
time and every token (prefill included); time to first token p50/p99 under that load (each request's
prompt is unique, so TTFT includes its full prefill; --same-prompt measures prompt-cache hits instead
and the table says so). With --soak SECONDS, 64 clients keep sending requests for that long; failed requests and
the server's resident memory (VmRSS after warm-up vs at the end) are reported. With --reps R every
level runs R times (the levels interleaved) and the table gives medians (and the aggregate's range),
and the median over rounds of each round's ratio to its own one-stream run ("paired").

  .venv/bin/python scripts/bench_server.py [-m MODEL] [--tokens 64] [--reps 5] [--soak 600]
"""
import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start(binary, model, parallel, threads):
    cmd = [binary, "serve", "-m", model, "--port", "0", "--parallel", str(parallel), "--ctx-size", str(parallel * 1024),
           "--max-queue-depth", "256"]
    if threads:
        cmd += ["--threads", str(threads)]
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    url = None
    for line in p.stderr:
        m = re.search(r"listening on (\S+)", line)
        if m:
            url = m.group(1)
        if "ready:" in line:
            break
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
    return p, url


_PROMPT_SEQ = [0]
_PROMPT_LOCK = threading.Lock()
SAME_PROMPT = [False]


def next_prompt():
    """Each request's prompt differs from its first token on (a request number), so no slot or
    prompt-cache reuse shortens its prefill and TTFT includes it; with --same-prompt every request
    sends one prompt and TTFT is that of a prompt-cache hit (the table says which)."""
    base = "Write a long story about the sea and a lighthouse keeper."
    if SAME_PROMPT[0]:
        return base
    with _PROMPT_LOCK:
        _PROMPT_SEQ[0] += 1
        k = _PROMPT_SEQ[0]
    return f"Request {k}: {base}"


def stream_one(url, tokens, out):
    """One streamed /completion of `tokens` tokens: (TTFT s, tokens, first token time, last token time).
    The client reads the SSE stream with http.client and parses each event's JSON, no more: the
    clients share the machine's cores with the server, so their own cost is kept small (requests'
    line iterator cost about twice the CPU per event)."""
    body = json.dumps({"prompt": next_prompt(), "n_predict": tokens,
                       "temperature": 0, "ignore_eos": True, "stream": True})
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    t0 = time.time()
    first = last = None
    n = 0
    conn.request("POST", "/completion", body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    buf = b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        *events, buf = buf.split(b"\n\n")
        for e in events:
            if not e.startswith(b"data: "):
                continue
            ev = json.loads(e[6:])
            if ev.get("tokens"):
                n += len(ev["tokens"])
                last = time.time()
                if first is None:
                    first = last
    conn.close()
    out.append((first - t0 if first else float("nan"), n, first, last))


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def engine_table(a):
    """The engine's decode step with 1, 2, 4, 8 sequences (medians over rounds of median steps)."""
    import tempfile
    from bench_driver import build_driver, model_store  # scripts/ is on sys.path when a script runs
    path = a.model if os.path.exists(a.model) else os.path.join(model_store(), a.model)
    if os.path.isdir(path):
        ggufs = sorted(f for f in os.listdir(path) if f.endswith(".gguf"))
        path = os.path.join(path, ggufs[0]) if ggufs else path
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_driver(a.build, tmp, "bench_step_driver")
        out = subprocess.run([exe, path, str(a.threads or 2), str(max(a.tokens, 16)), str(max(a.reps, 3))],
                             capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"bench_step_driver failed: {out.stderr.strip()}")
    steps = {}
    for line in out.stdout.splitlines():
        f = line.split()
        steps.setdefault(int(f[1]), []).append(float(f[3]))
    one = statistics.median(steps[1])
    print("| sequences per step | engine step ms | tok/s | x one sequence |")
    print("|---|---|---|---|")
    for n in sorted(steps):
        ms = statistics.median(steps[n])
        print(f"| {n} | {ms:.2f} | {n * 1e3 / ms:.1f} | {n * one / ms:.2f} |")
    print()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", default="HuggingFaceTB/SmolLM2-135M-Instruct-GGUF")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "mlxcel"))
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--streams", default="1,2,4,8")
    ap.add_argument("--soak", type=int, default=0, help="seconds of a 64-client soak (0: none)")
    ap.add_argument("--engine", action="store_true",
                    help="also time the engine's decode step alone (scripts/bench_step_driver.c: 1, 2, 4, 8 sequences, no HTTP)")
    ap.add_argument("--build", default="build", help="build directory whose libmlxcel.a the --engine driver links")
    ap.add_argument("--reps", type=int, default=1, help="runs per level, interleaved; medians reported (shared machines are noisy)")
    ap.add_argument("--same-prompt", action="store_true",
                    help="every request sends the same prompt: TTFT is then a prompt-cache hit's (default: unique prompts)")
    a = ap.parse_args()
    SAME_PROMPT[0] = a.same_prompt
    if a.engine:
        engine_table(a)
    levels = [int(x) for x in a.streams.split(",")]
    proc, url = start(a.bin, a.model, max(levels + [8]), a.threads)
    try:
        # warm-up: every slot once (the first use of a slot's KV blocks faults their pages in)
        warm = [threading.Thread(target=stream_one, args=(url, 8, [])) for _ in range(max(levels))]
        for t in warm:
            t.start()
        for t in warm:
            t.join()
        ttft = "TTFT (prompt-cache hit)" if a.same_prompt else "TTFT (full prefill)"
        print(f"| streams | aggregate decode tok/s | x one stream | x one stream, paired | wall tok/s | wall x one, paired | "
              f"{ttft} p50 ms | {ttft} p99 ms | client CPU / wall |")
        print(f"|---|---|---|---|---|---|---|---|---|")
        # per run: (decode aggregate, TTFT p50, TTFT p99, client CPU share, wall aggregate)
        runs = {n: [] for n in levels}
        for _ in range(a.reps):  # the levels interleaved, so a slow spell of the machine hits each alike
            for n in levels:
                out = []
                th = [threading.Thread(target=stream_one, args=(url, a.tokens, out)) for _ in range(n)]
                t0, c0 = time.time(), time.process_time()
                for t in th:
                    t.start()
                for t in th:
                    t.join()
                wall = time.time() - t0
                cpu = time.process_time() - c0  # this client's own share of the machine's cores
                ttft = sorted(o[0] * 1e3 for o in out)
                p99 = ttft[min(len(ttft) - 1, int(round(0.99 * (len(ttft) - 1))))]
                if any(o[2] is None or o[1] < 2 for o in out):
                    sys.exit(f"a stream of the {n}-stream round returned fewer than 2 tokens")
                span = max(o[3] for o in out) - min(o[2] for o in out)
                decode = sum(o[1] - 1 for o in out) / span
                runs[n].append((decode, statistics.median(ttft), p99, cpu / wall, sum(o[1] for o in out) / wall))
        base = statistics.median(r[0] for r in runs[levels[0]])
        for n in levels:
            agg = statistics.median(r[0] for r in runs[n])
            spread = f" ({min(r[0] for r in runs[n]):.0f}-{max(r[0] for r in runs[n]):.0f})" if a.reps > 1 else ""
            # each round's ratio to the same round's first level (seconds apart, so a slow or fast
            # spell of a shared machine hits both), then the median over rounds
            paired = statistics.median(r[0] / r0[0] for r, r0 in zip(runs[n], runs[levels[0]]))
            wall_agg = statistics.median(r[4] for r in runs[n])
            wall_paired = statistics.median(r[4] / r0[4] for r, r0 in zip(runs[n], runs[levels[0]]))
            print(f"| {n} | {agg:.1f}{spread} | {agg / base:.2f} | {paired:.2f} | {wall_agg:.1f} | {wall_paired:.2f} | "
                  f"{statistics.median(r[1] for r in runs[n]):.0f} | "
                  f"{statistics.median(r[2] for r in runs[n]):.0f} | {100 * statistics.median(r[3] for r in runs[n]):.0f}% |",
                  flush=True)
        if a.soak:
            fails = [0]
            done = [0]
            stop = time.time() + a.soak
            rss = []

            def client():
                while time.time() < stop:
                    try:
                        r = requests.post(url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "Say hi."}],
                                                                             "max_tokens": 16}, timeout=600)
                        if r.status_code != 200:
                            fails[0] += 1
                        else:
                            done[0] += 1
                    except Exception:
                        fails[0] += 1

            th = [threading.Thread(target=client) for _ in range(64)]
            for t in th:
                t.start()
            while time.time() < stop:
                time.sleep(10)
                rss.append(rss_kb(proc.pid))
            for t in th:
                t.join()
            warm = rss[min(2, len(rss) - 1)] if rss else 0
            print(f"soak {a.soak}s x 64 clients: {done[0]} ok, {fails[0]} failed; RSS after warm-up {warm / 1024:.0f} MiB, "
                  f"end {rss[-1] / 1024 if rss else 0:.0f} MiB, max {max(rss) / 1024 if rss else 0:.0f} MiB")
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    sys.exit(main())
