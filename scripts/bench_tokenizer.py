#!/usr/bin/env python3
"""bench_tokenizer.py - tokenizer encode throughput and load time: mlxcel next to Hugging Face
`tokenizers` (the PyPI Python binding) in the same run, one thread each.

Issue 4 (Speed): MB/s on a few MB of mixed text (English prose, code, CJK) for the Llama 3, Qwen 3
and Gemma 3 tokenizers (../shared/testdata/tokenizers), goal >= 2x HF; and the time to load each
tokenizer.json (Gemma 3's is 33 MB; goal < 300 ms).

The text is built from files every Debian machine has: English prose from
/usr/share/common-licenses and the English msgids of /usr/share/locale/*/LC_MESSAGES/*.mo, code
from the Python standard library, CJK from the ja / zh_CN / ko .mo translations (falling back to
the corpus' CJK lines if a machine lacks them). It is cut into documents of about 4 KB (split at
line ends), each encoded by one call: HF `Tokenizer.encode(doc, add_special_tokens=False)` with
encode_special_tokens on and RAYON_NUM_THREADS=1 / TOKENIZERS_PARALLELISM=false (no encode_batch),
mlxcel through scripts/bench_tokenizer_driver.c (compiled here against BUILD/libmlxcel.a) with no
special-token parsing and no post-processor. Both sides' ids are checked equal (count and hash).
Each figure is the median of REPS passes; load is the median of REPS fresh loads.

usage: scripts/bench_tokenizer.py [--build build] [--reps 5] [--mb 3] [--names llama3,qwen3,gemma3]
       (any Python with the `tokenizers` package: .venv/bin/python after scripts/setup.sh)
"""
import argparse
import gettext
import glob
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from bench_driver import build_driver  # scripts/ is on sys.path when a script runs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(os.path.dirname(ROOT), "shared", "testdata", "tokenizers")


def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return ""


def mo_strings(lang_dirs, want_ids):
    out = []
    for d in lang_dirs:
        for mo in sorted(glob.glob(os.path.join(d, "LC_MESSAGES", "*.mo"))):
            try:
                with open(mo, "rb") as f:
                    cat = gettext.GNUTranslations(f)._catalog
            except Exception:
                continue
            for k, v in cat.items():
                s = (k[0] if isinstance(k, tuple) else k) if want_ids else v
                if isinstance(s, str) and s.strip():
                    out.append(s)
    return out


def take(parts, budget):
    out, n = [], 0
    for p in parts:
        if n >= budget:
            break
        out.append(p)
        n += len(p.encode())
    return "\n".join(out)


def mixed_text(mb):
    third = int(mb * 1e6 / 3)
    prose = [read(p) for p in sorted(glob.glob("/usr/share/common-licenses/*"))]
    prose += mo_strings(sorted(glob.glob("/usr/share/locale/de/")), True)
    code = [read(p) for p in sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))]
    cjk = mo_strings([f"/usr/share/locale/{l}/" for l in ("ja", "zh_CN", "ko")], False)
    if sum(len(c) for c in cjk) < third // 3:
        import json
        with open(os.path.join(TESTDATA, "corpus.json"), encoding="utf-8") as f:
            lines = [t for t in json.load(f) if any(ord(ch) > 0x2E80 for ch in t)]
        cjk = lines * (third // max(1, sum(len(l.encode()) for l in lines)) + 1)
    return [take(prose, third), take(code, third), take(cjk, third)]


def documents(parts, size=4096):
    docs = []
    for text in parts:
        cur, n = [], 0
        for line in text.splitlines(keepends=True):
            cur.append(line)
            n += len(line.encode())
            if n >= size:
                docs.append("".join(cur))
                cur, n = [], 0
        if cur:
            docs.append("".join(cur))
    return [d.replace("\0", "") for d in docs]


def fnv(ids_lists):
    h = 1469598103934665603
    for ids in ids_lists:
        for i in ids:
            h = ((h ^ i) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def bench_hf(path, docs, reps):
    from tokenizers import Tokenizer
    loads = []
    for _ in range(reps):
        t0 = time.perf_counter()
        tok = Tokenizer.from_file(path)
        loads.append(time.perf_counter() - t0)
    tok.encode_special_tokens = True
    secs, ids = [], None
    for r in range(reps):
        t0 = time.perf_counter()
        out = [tok.encode(d, add_special_tokens=False).ids for d in docs]
        secs.append(time.perf_counter() - t0)
        if r == 0:
            ids = out
    return statistics.median(loads), statistics.median(secs), sum(len(i) for i in ids), fnv(ids)


def bench_mlxcel(exe, path, docs_file, reps):
    loads, secs, tokens, h = [], [], None, None
    for r in range(reps):
        out = subprocess.run([exe, path, docs_file, str(1 if r else reps)], check=True,
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, v = line.split()
            if k == "load":
                loads.append(float(v))
            elif k == "seconds":
                secs.append(float(v))
            elif k == "tokens":
                tokens = int(v)
            elif k == "hash":
                h = int(v)
    return statistics.median(loads), statistics.median(secs), tokens, h


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--mb", type=float, default=3.0)
    ap.add_argument("--names", default="llama3,qwen3,gemma3")
    a = ap.parse_args()
    import tokenizers
    docs = documents(mixed_text(a.mb))
    nbytes = sum(len(d.encode()) for d in docs)
    rows, bad = [], False
    with tempfile.TemporaryDirectory() as tmp:
        df = os.path.join(tmp, "docs.bin")
        with open(df, "wb") as f:
            f.write(b"\0".join(d.encode() for d in docs))
        exe = build_driver(a.build, tmp, "bench_tokenizer_driver")
        for name in a.names.split(","):
            path = os.path.join(TESTDATA, name, "tokenizer.json")
            hl, hs, hn, hh = bench_hf(path, docs, a.reps)
            ml, ms, mn, mh = bench_mlxcel(exe, path, df, a.reps)
            same = hn == mn and hh == mh
            bad |= not same
            rows.append((name, os.path.getsize(path) / 1e6, nbytes / 1e6 / ms, nbytes / 1e6 / hs, hs / ms,
                         ml * 1e3, hl * 1e3, same, mn))
    print(f"{nbytes / 1e6:.2f} MB in {len(docs)} documents (prose, code, CJK), one thread, median of {a.reps}; "
          f"HF tokenizers {tokenizers.__version__}")
    print("| tokenizer | json MB | mlxcel MB/s | HF MB/s | ratio | mlxcel load ms | HF load ms | ids equal |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:.1f} | {r[2]:.2f} | {r[3]:.2f} | {r[4]:.2f}x | {r[5]:.0f} | {r[6]:.0f} | "
              f"{'yes' if r[7] else 'NO'} ({r[8]} tokens) |")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
