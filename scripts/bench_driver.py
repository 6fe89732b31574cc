"""bench_driver.py - compiles one of the scripts/bench_*_driver.c timing drivers against a build's
libmlxcel.a, for the benchmark scripts (bench_embed.py, bench_tokenizer.py)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
