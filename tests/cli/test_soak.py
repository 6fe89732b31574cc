"""Short forms of scripts/soak.py (the long runs' figures are in the issue notes): 16 clients of
mixed chat streaming, completions, embeddings, dropped streams and malformed requests against one
live server; at rest afterwards every outcome was expected, the descriptors are back to their start
count and no slot is busy; with SIGTERM under the load every request begun before the signal
completed or got its clean 503, and the server exited 0 within its --shutdown-timeout."""
import json
import os
import subprocess
import sys

from conftest import ROOT, mlxcel_bin, real_model_path
from server_util import SMOL_REPO

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def soak(tmp_path, *args):
    real_model_path(SMOL_REPO)
    real_model_path(MINILM)
    out = tmp_path / "soak.json"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "soak.py"), "--bin", mlxcel_bin(), "--clients", "16",
                        "--parallel", "4", "--json", str(out), *args], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(out.read_text())


def test_soak_at_rest(tmp_path):
    rep = soak(tmp_path, "--duration", "25", "--warmup", "5")
    assert rep["unexpected"] == 0 and rep["failures"] == []
    assert rep["fds_end"] <= rep["fds_start"] and rep["slots_busy_end"] == 0
    kinds = {k.split("/")[0] for k, n in rep["outcomes"].items() if k.endswith(("/ok", "/dropped")) and n > 0}
    assert kinds == {"chat_stream", "completion", "llama_completion", "embedding", "cancel", "malformed"}, rep["outcomes"]


def test_soak_sigterm_under_load(tmp_path):
    rep = soak(tmp_path, "--duration", "10", "--warmup", "2", "--sigterm", "--shutdown-timeout", "20")
    assert rep["unexpected"] == 0 and rep["exit_status"] == 0 and rep["drain_s"] < 35
    assert any(k.endswith("/refused_shutting_down") for k in rep["outcomes"]), rep["outcomes"]
