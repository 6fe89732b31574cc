"""Starting and stopping a live `mlxcel serve` for the server tests."""
import os
import queue
import re
import signal
import subprocess
import threading
import time

import pytest

from conftest import mlxcel_bin, real_model_path

SMOL_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"


class Server:
    def __init__(self, *args, env=None, wait_ready=True, binary=None):
        real_model_path(SMOL_REPO)  # fails (never skips) when the model is missing
        e = dict(os.environ)
        if env:
            e.update(env)
        cmd = [binary or mlxcel_bin()]
        if not binary:
            cmd.append("serve")
        has_model = any(a in ("-m", "--model") for a in args)
        cmd += ([] if has_model else ["-m", SMOL_REPO]) + ["--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
        self.lines = []
        self.url = None
        # a reader thread keeps the pipe drained (the server logs until it exits)
        self._q = queue.Queue()
        self._tail = []
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.time() + 120
        ready_lines = 0
        want = sum(1 for a in args if a in ("--embedding-model", "--reranker-model")) + 1  # one "ready:" line per model
        while time.time() < deadline:
            try:
                line = self._q.get(timeout=max(0.01, deadline - time.time()))
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            # the socket opens before the models load (routes that need them answer 503 until
            # then); the "listening" line comes once they are loaded, before the "ready:" lines
            m = re.search(r"loading .*; (\S+) answers 503", line)
            if m and not wait_ready:
                self.url = m.group(1)
                return
            m = re.search(r"listening on (\S+)", line)
            if m:
                self.url = m.group(1)
            if "ready:" in line:
                ready_lines += 1
                if ready_lines == want:
                    return
        self.stop()
        pytest.fail("server did not start: " + "".join(self.lines))

    def _read(self):
        for line in self.proc.stderr:
            self._q.put(line)
        self._q.put(None)

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                pytest.fail("server did not exit after the signal")
        err = ""
        while True:
            try:
                line = self._q.get(timeout=5)
            except queue.Empty:
                break
            if line is None:
                break
            err += line
        self.lines.append(err)
        assert "Sanitizer" not in err and "runtime error" not in err, err
        return self.proc.returncode


def metrics(s):
    """The server's /metrics (--metrics) as {name without "llamacpp:": value}."""
    import requests
    text = requests.get(s.url + "/metrics", timeout=30).text
    return {l.split()[0].split(":", 1)[1]: float(l.split()[1]) for l in text.splitlines() if l.startswith("llamacpp:")}


def openai_client(s, key="none"):
    """The unmodified OpenAI SDK pointed at a live Server (no retries: a failure shows at once)."""
    import openai
    return openai.OpenAI(base_url=s.url + "/v1", api_key=key, max_retries=0, timeout=300)
