#!/usr/bin/env python3
"""Soak test of `mlxcel serve` on loopback: N clients send a mix of streaming chat completions,
completions, embeddings, streams they drop mid-way and malformed requests, for a set duration,
against one server holding a chat model and an embedding model. Then either the clients stop and
the server is checked at rest, or (--sigterm) the server gets SIGTERM under the load and must drain.

Reports (text, and JSON with --json FILE) the requests by kind and outcome, the unexpected ones
(a 5xx, a reset, a stream cut off without its end, a 2xx with a wrong body, a malformed request not
answered 4xx), the server's RSS after the warm-up and at the end, its open descriptors before the
load and at the end, and the slots still busy at the end. Exits 1 when a check fails: any unexpected
outcome, descriptors above their start count, a busy slot, RSS above --rss-tolerance over the
warm-up figure (with --check-rss), or with --sigterm: a request neither completed nor refused with
503 "the server is shutting down", an exit status other than 0, or a drain past --shutdown-timeout.

  scripts/soak.py [--bin build/mlxcel] [--clients 64] [--duration 1800] [--warmup 60] [--check-rss]
                  [--sigterm] [--shutdown-timeout 30] [--kv-cache-budget BYTES] [--json FILE] [--seed 1]
"""
import argparse
import http.client
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter

CHAT = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
EMBED = "sentence-transformers/all-MiniLM-L6-v2"
WORDS = ("lighthouse storm river engine fox garden winter signal copper harbor lantern orbit meadow "
         "violin glacier compass ember thunder quiet market").split()

# malformed requests and the 4xx each must get
MALFORMED = [
    ("POST", "/v1/chat/completions", b"{not json", 400),
    ("POST", "/v1/chat/completions", b'{"messages": "hi"}', 400),
    ("POST", "/v1/chat/completions", b'{"messages": [{"role": "wizard", "content": "hi"}]}', 400),
    ("POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": "lots"}', 400),
    ("POST", "/v1/chat/completions", b'{"messages": []}', 400),
    ("POST", "/v1/completions", b'{"prompt": "hi", "temperature": -3}', 400),
    ("POST", "/v1/embeddings", b'{"input": 42}', 400),
    ("POST", "/completion", b'{"prompt": "hi", "grammar": "root ::= ("}', 400),
    ("POST", "/no/such/route", b"{}", 404),
    ("GET", "/v1/chat/completions", b"", 405),
]


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_targets(pid):
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return sorted(out)


def prompt(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


class Soak:
    def __init__(self, a):
        self.a = a
        self.outcomes = Counter()
        self.unexpected = []
        self.mu = threading.Lock()
        self.stop = threading.Event()
        self.signalled = threading.Event()
        self.server_gone = threading.Event()

    # --- the server ------------------------------------------------------------------------------
    def start_server(self):
        cmd = [self.a.bin, "serve", "-m", CHAT, "--embedding-model", EMBED, "--host", "127.0.0.1", "--port", "0",
               "--parallel", str(self.a.parallel), "--ctx-size", str(512 * self.a.parallel),
               "--max-queue-depth", str(4 * self.a.clients), "--shutdown-timeout", str(self.a.shutdown_timeout),
               "--kv-cache-budget", str(self.a.kv_cache_budget)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        url, ready = None, 0
        deadline = time.time() + 300
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"listening on http://([\d.]+):(\d+)", line)
            if m:
                url = (m.group(1), int(m.group(2)))
            ready += "ready:" in line
            if url and ready == 2:
                break
            if time.time() > deadline:
                break
        if not url or ready < 2:
            self.proc.kill()
            sys.exit("soak: the server did not start:\n" + "".join(self.log[-20:]))
        self.host, self.port = url
        threading.Thread(target=lambda: [self.log.append(l) for l in self.proc.stderr], daemon=True).start()

    # --- one request ----------------------------------------------------------------------------
    def note(self, kind, outcome, detail=None):
        with self.mu:
            self.outcomes[(kind, outcome)] += 1
            if outcome == "unexpected" and len(self.unexpected) < 50:
                self.unexpected.append(f"{kind}: {detail}")

    def request(self, method, path, body, headers=None, timeout=600):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        c.request(method, path, body=body, headers=dict({"Content-Type": "application/json"}, **(headers or {})))
        return c, c.getresponse()

    def shutting_down(self, status, text):
        return status == 503 and "the server is shutting down" in text

    def one(self, rng):
        kind = rng.choices(["chat_stream", "completion", "llama_completion", "embedding", "cancel", "malformed"],
                           weights=[30, 15, 10, 20, 10, 15])[0]
        began_before_signal = not self.signalled.is_set()
        try:
            getattr(self, "do_" + kind)(rng, kind)
        except (ConnectionRefusedError, ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected) as e:
            # a request sent after SIGTERM may meet the closed listener (refused) or be reset from its
            # backlog when the drain ends, as with any server that exits; one begun before must
            # complete or get its clean 503
            if not began_before_signal:
                self.note(kind, "refused_after_exit")
                time.sleep(0.05)
            else:
                self.note(kind, "unexpected", repr(e))
        except Exception as e:  # a wrong body, a timeout
            self.note(kind, "unexpected", repr(e))

    def finish(self, kind, status, text, check):
        if status == 200:
            err = check(text)
            self.note(kind, "ok" if err is None else "unexpected", err)
        elif self.signalled.is_set() and self.shutting_down(status, text):
            self.note(kind, "refused_shutting_down")
        else:
            self.note(kind, "unexpected", f"HTTP {status}: {text[:200]}")

    def stream_text(self, resp, kind):
        """The stream's events until [DONE]; an error event (the drain's 503) ends it cleanly."""
        content, done, error = [], False, None
        for raw in resp:
            line = raw.decode().rstrip("\r\n")
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                done = True
                break
            ev = json.loads(line[6:])
            if "error" in ev:
                error = ev["error"]
                break
            for ch in ev.get("choices", []):
                content.append(ch.get("delta", {}).get("content") or "")
        return "".join(content), done, error

    def do_chat_stream(self, rng, kind):
        body = {"messages": [{"role": "user", "content": prompt(rng, rng.randint(3, 30))}], "max_tokens": rng.randint(4, 48),
                "stream": True, "temperature": rng.choice([0, 0.7])}
        c, r = self.request("POST", "/v1/chat/completions", json.dumps(body))
        if r.status != 200:
            return self.finish(kind, r.status, r.read().decode(), None)
        text, done, error = self.stream_text(r, kind)
        c.close()
        if done:
            self.note(kind, "ok")
        elif error and self.signalled.is_set() and error.get("code") == 503:
            self.note(kind, "cancelled_by_shutdown")
        else:
            self.note(kind, "unexpected", f"stream ended without [DONE]: error={error}")

    def do_completion(self, rng, kind):
        body = {"prompt": prompt(rng, rng.randint(3, 40)), "max_tokens": rng.randint(1, 24), "temperature": 0}
        c, r = self.request("POST", "/v1/completions", json.dumps(body))
        text = r.read().decode()
        c.close()
        self.finish(kind, r.status, text, lambda t: None if json.loads(t)["choices"][0]["finish_reason"] in ("length", "stop") else t[:200])

    def do_llama_completion(self, rng, kind):
        body = {"prompt": prompt(rng, rng.randint(3, 40)), "n_predict": rng.randint(1, 24), "cache_prompt": rng.random() < 0.5}
        c, r = self.request("POST", "/completion", json.dumps(body))
        text = r.read().decode()
        c.close()
        self.finish(kind, r.status, text, lambda t: None if json.loads(t)["stop"] is True else t[:200])

    def do_embedding(self, rng, kind):
        inputs = [prompt(rng, rng.randint(1, 60)) for _ in range(rng.randint(1, 4))]
        c, r = self.request("POST", "/v1/embeddings", json.dumps({"input": inputs, "model": EMBED}))
        text = r.read().decode()
        c.close()

        def check(t):
            d = json.loads(t)["data"]
            if len(d) != len(inputs):
                return f"{len(d)} embeddings for {len(inputs)} inputs"
            for e in d:
                v = e["embedding"]
                if len(v) != 384 or not all(math.isfinite(x) for x in v) or abs(sum(x * x for x in v) - 1) > 1e-3:
                    return "an embedding is not a unit vector of 384 finite numbers"
            return None
        self.finish(kind, r.status, text, check)

    def do_cancel(self, rng, kind):
        """A stream the client drops after a few events (its slot must come back)."""
        body = {"messages": [{"role": "user", "content": prompt(rng, 10)}], "max_tokens": 200, "stream": True}
        c, r = self.request("POST", "/v1/chat/completions", json.dumps(body))
        if r.status != 200:
            return self.finish(kind, r.status, r.read().decode(), None)
        want = rng.randint(1, 6)
        for raw in r:
            if raw.startswith(b"data: "):
                want -= 1
                if want == 0:
                    break
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
        self.note(kind, "dropped")

    def do_malformed(self, rng, kind):
        method, path, body, want = rng.choice(MALFORMED)
        c, r = self.request(method, path, body or None)
        text = r.read().decode()
        c.close()
        if r.status == want:
            try:
                ok = isinstance(json.loads(text)["error"]["message"], str)
            except (ValueError, KeyError, TypeError):
                ok = False
            self.note(kind, "ok" if ok else "unexpected", None if ok else f"{path}: no JSON error: {text[:200]}")
        elif self.signalled.is_set() and self.shutting_down(r.status, text):
            self.note(kind, "refused_shutting_down")
        else:
            self.note(kind, "unexpected", f"{method} {path} {body[:60]!r}: HTTP {r.status} (want {want}): {text[:200]}")

    def client(self, i):
        rng = random.Random(self.a.seed * 1000 + i)
        # with --sigterm the clients go on through the drain (503 "shutting down") until the exit
        while not self.stop.is_set() and not self.server_gone.is_set():
            self.one(rng)

    # --- the run --------------------------------------------------------------------------------
    def slots_busy(self):
        c, r = self.request("GET", "/slots", None, timeout=30)
        slots = json.loads(r.read())
        c.close()
        return sum(1 for s in slots if s.get("is_processing"))

    def run(self):
        a = self.a
        self.start_server()
        pid = self.proc.pid
        fd_start = fds(pid)
        self.fd_start_targets = fd_targets(pid)
        rss_start = rss_kb(pid)
        t0 = time.time()
        threads = [threading.Thread(target=self.client, args=(i,), daemon=True) for i in range(a.clients)]
        for t in threads:
            t.start()
        time.sleep(min(a.warmup, a.duration))
        rss_warm = rss_kb(pid)
        while time.time() - t0 < a.duration:
            time.sleep(1)
            if self.proc.poll() is not None:
                break
        rep = {"clients": a.clients, "duration_s": round(time.time() - t0, 1), "rss_kb_start": rss_start,
               "rss_kb_after_warmup": rss_warm, "fds_start": fd_start}
        if a.sigterm:
            ts = time.time()
            self.signalled.set()
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(a.shutdown_timeout + 60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = "killed: did not exit"
            self.server_gone.set()
            rep.update({"exit_status": rc, "drain_s": round(time.time() - ts, 2)})
            for t in threads:
                t.join(60)
        else:
            self.stop.set()
            for t in threads:
                t.join(600)
            time.sleep(1)
            deadline = time.time() + 30
            while time.time() < deadline and fds(pid) > fd_start:
                time.sleep(0.5)  # connections the clients closed are being reaped
            rep.update({"rss_kb_end": rss_kb(pid), "fds_end": fds(pid), "fd_targets_end": fd_targets(pid)})
            rep["slots_busy_end"] = self.slots_busy()  # (after counting: its own connection is one more)
            self.proc.send_signal(signal.SIGTERM)
            rep["exit_status"] = self.proc.wait(120)
        rep["outcomes"] = {f"{k}/{o}": n for (k, o), n in sorted(self.outcomes.items())}
        rep["requests"] = sum(self.outcomes.values())
        rep["unexpected"] = sum(n for (k, o), n in self.outcomes.items() if o == "unexpected")
        rep["unexpected_examples"] = self.unexpected[:20]
        rep["sanitizer_reports"] = sum(("Sanitizer" in l or "runtime error" in l) for l in self.log)
        return rep

    def verdict(self, rep):
        bad = []
        if rep["unexpected"]:
            bad.append(f"{rep['unexpected']} unexpected outcomes")
        if rep["sanitizer_reports"]:
            bad.append("sanitizer reports in the server's log")
        if rep["exit_status"] != 0:
            bad.append(f"exit status {rep['exit_status']}")
        if self.a.sigterm:
            if rep["drain_s"] > self.a.shutdown_timeout + 15:
                bad.append(f"the drain took {rep['drain_s']} s")
        else:
            if rep["fds_end"] > rep["fds_start"]:
                bad.append(f"descriptors {rep['fds_start']} -> {rep['fds_end']} (at the start {self.fd_start_targets}, "
                           f"at the end {rep['fd_targets_end']})")
            if rep["slots_busy_end"]:
                bad.append(f"{rep['slots_busy_end']} slots busy at the end")
            growth = rep["rss_kb_end"] / max(1, rep["rss_kb_after_warmup"]) - 1
            rep["rss_growth_after_warmup"] = round(growth, 4)
            if self.a.check_rss and growth > self.a.rss_tolerance:
                bad.append(f"RSS grew {100 * growth:.1f}% after the warm-up")
        return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "mlxcel"))
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--duration", type=float, default=1800, help="seconds of load")
    ap.add_argument("--warmup", type=float, default=60, help="seconds before the RSS reference is taken")
    ap.add_argument("--parallel", type=int, default=8, help="the server's slots")
    ap.add_argument("--shutdown-timeout", type=int, default=30)
    ap.add_argument("--kv-cache-budget", type=int, default=128 << 20,
                    help="the server's KV pool in bytes: the prompt cache fills it during the warm-up, so RSS after it is the plateau "
                         "(0: the server's auto size, which grows for as long as the cache keeps filling)")
    ap.add_argument("--sigterm", action="store_true", help="end with SIGTERM under the load (a drain) instead of at rest")
    ap.add_argument("--check-rss", action="store_true", help="fail when RSS at the end exceeds the warm-up figure")
    ap.add_argument("--rss-tolerance", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the report here")
    a = ap.parse_args()
    s = Soak(a)
    rep = s.run()
    bad = s.verdict(rep)
    rep["failures"] = bad
    for k, v in rep.items():
        if k not in ("outcomes", "unexpected_examples"):
            print(f"{k}: {v}")
    print("outcomes:")
    for k, v in rep["outcomes"].items():
        print(f"  {k}: {v}")
    for u in rep["unexpected_examples"]:
        print("  unexpected:", u)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rep, f, indent=1)
    print("soak: " + ("FAILED: " + "; ".join(bad) if bad else "ok"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
