"""bench_driver.py - helpers of the benchmark and test scripts: compiles one of the
scripts/bench_*_driver.c timing drivers against a build's libmlxcel.a (bench_embed.py,
bench_tokenizer.py, bench_server.py), and finds the model store (as mlxcel does: MLXCEL_MODELS_DIR,
else MLXCEL_CACHE_DIR/models, else ~/.cache/mlxcel/models)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def model_store():
    """The model store directory."""
    return os.environ.get("MLXCEL_MODELS_DIR") or os.path.join(
        os.environ.get("MLXCEL_CACHE_DIR") or os.path.expanduser("~/.cache/mlxcel"), "models")


def build_driver(build, tmp, name):
    """Compiles scripts/<name>.c into tmp and returns the executable's path."""
    lib = os.path.join(ROOT, build, "libmlxcel.a")
    if not os.path.exists(lib):
        sys.exit(f"{lib} is missing: run make BUILD={build} first")
    exe = os.path.join(tmp, name)
    subprocess.check_call(["cc", "-std=c17", "-O2", "-D_GNU_SOURCE", "-I" + os.path.join(ROOT, "src"),
                           os.path.join(ROOT, "scripts", name + ".c"), lib, "-o", exe,
                           "-lmicrohttpd", "-ljansson", "-lpcre2-8", "-lutf8proc", "-lm", "-lpthread"])
    return exe
