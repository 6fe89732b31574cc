"""pytest plugin: runs llama.cpp's own server test suite (tools/server/tests, as vendored by the
PyPI llama-cpp-python sdist) against `mlxcel-server`, with our bundled real model in place of the
suite's downloads. Loaded by scripts/llama_server_tests.py with `-p mlxcel_adapter`.

What it changes, and only this:
- every ServerPreset uses MLXCEL_ADAPTER_MODEL (SmolLM2-135M-Instruct GGUF) - or, for the
  embedding / reranking presets, MLXCEL_ADAPTER_EMBED_MODEL (all-MiniLM-L6-v2) /
  MLXCEL_ADAPTER_RERANK_MODEL (our tiny BERT cross-encoder fixture) - and the MLXCEL_ADAPTER_BIN
  binary instead of downloading stories260K & co.;
- load_all() (the suite's model download) does nothing;
- a context budget below 512 tokens per slot is raised to 512 per slot, because mlxcel refuses
  smaller slots at startup by specification.
Tests whose assertions pin stories260K's exact words are listed in mlxcel_adapter_scope.py (the
issue puts them out of scope); they still run and are reported separately."""
import os

import pytest
import utils

MODEL = os.environ.get("MLXCEL_ADAPTER_MODEL")
EMBED_MODEL = os.environ.get("MLXCEL_ADAPTER_EMBED_MODEL")    # embedding presets (bert-bge-small)
RERANK_MODEL = os.environ.get("MLXCEL_ADAPTER_RERANK_MODEL")  # reranking presets (jina-reranker)
BIN = os.environ.get("MLXCEL_ADAPTER_BIN")

from mlxcel_adapter_scope import OUT_OF_SCOPE  # noqa: F401  (file::name -> reason)

utils.ServerPreset.load_all = staticmethod(lambda: None)
_orig_start = utils.ServerProcess.start


def _start(self, *a, **kw):
    if not MODEL or not BIN:
        raise RuntimeError("MLXCEL_ADAPTER_MODEL and MLXCEL_ADAPTER_BIN must be set")
    self.model_hf_repo = None
    self.model_hf_file = None
    self.model_url = None
    self.model_file = MODEL
    if self.server_embeddings and EMBED_MODEL:
        self.model_file = EMBED_MODEL
    if self.server_reranking and RERANK_MODEL:
        self.model_file = RERANK_MODEL
    self.server_path = BIN
    slots = self.n_slots or 1
    if self.n_ctx and self.n_ctx // slots < 512:
        self.n_ctx = 512 * slots
    return _orig_start(self, *a, **kw)


utils.ServerProcess.start = _start


