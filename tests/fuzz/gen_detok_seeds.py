#!/usr/bin/env python3
"""gen_detok_seeds.py - writes the seed corpus of tests/fuzz/fuzz_detok.c (tests/fuzz/corpus/detok/).

Token ids of real texts come from llama.cpp's vocabulary test vectors in ../shared/testdata/
llama-cpp-vocab (<name>.gguf.out, one line of ids per input of <name>.gguf.inp): llama-spm's ids
are the harness's tokenizer 2's (the Llama 2 tokenizer.json here, 1, numbers its ordinary pieces
otherwise - 15043 is '▁discovery' in it - but its <0xXX> byte tokens 3..258 agree, so those
seeds still stream the same bytes), qwen2's are Qwen3's ordinary tokens (0),
bert-bge's (3) and gemma-4's (4) their own. The rest are hand-made: byte runs that complete,
stay incomplete or turn invalid after text was streamed (the ByteFallback rewrite), special
tokens with and without skip_special, and out-of-range / edge ids.

Input format (see fuzz_detok.c): byte 0 = tokenizer | skip_special << 3; then items:
  0x00 b       the token of byte b
  0x40 k       the k-th special token
  0x80|hi m l  raw id (hi << 16 | m << 8 | l) modulo n_vocab + 64
  0xC0|e       edge id e (-1, INT32_MIN, n_vocab, bos, eos, ...)

    python3 tests/fuzz/gen_detok_seeds.py      (from the repository root)"""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCAB = os.path.join(ROOT, "..", "shared", "testdata", "llama-cpp-vocab")
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus", "detok")
QWEN3, LLAMA2, SPM, BERT, GEMMA4 = range(5)


def raw(*ids):
    b = bytearray()
    for i in ids:
        b += bytes([0x80 | (i >> 16), (i >> 8) & 0xFF, i & 0xFF])
    return bytes(b)


def byt(*bs):
    return b"".join(bytes([0x00, x]) for x in bs)


def spec(*ks):
    return b"".join(bytes([0x40, k]) for k in ks)


def edge(*es):
    return bytes(0xC0 | e for e in es)


def out_line(name, n):
    with open(os.path.join(VOCAB, f"ggml-vocab-{name}.gguf.out")) as f:
        return [int(x) for x in f.read().split("\n")[n - 1].split()]


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {}
    # real texts: line 22 Khmer (byte tokens), 33 mixed CJK / emoji, 29 leading spaces and newline
    for name, cases in (("qwen2", [QWEN3]), ("llama-spm", [LLAMA2, SPM]), ("bert-bge", [BERT]), ("gemma-4", [GEMMA4])):
        for line in (22, 33, 29):
            ids = out_line(name, line)
            for c in cases:
                seeds[f"text{line}_{name}_t{c}"] = bytes([c]) + raw(*ids)
    # byte tokens: "é中" whole; cut after E4 B8 (flush of an incomplete character)
    for c in (QWEN3, LLAMA2):
        seeds[f"bytes_complete_t{c}"] = bytes([c]) + byt(0xC3, 0xA9, 0xE4, 0xB8, 0xAD)
    for c in (QWEN3, LLAMA2, SPM, GEMMA4):
        seeds[f"bytes_cut_t{c}"] = bytes([c]) + byt(0xC3, 0xA9, 0xE4, 0xB8)
    # the ByteFallback rewrite: "é" streamed, then a lone E4 and a text token / the end
    seeds["rewrite_text_llama2"] = bytes([LLAMA2]) + byt(0xC3, 0xA9, 0xE4) + raw(28744)  # x
    seeds["rewrite_flush_spm"] = bytes([SPM]) + byt(0xC3, 0xA9, 0xE4)
    seeds["rewrite_twice_llama2"] = bytes([LLAMA2]) + byt(0x33, 0xD9) + raw(22557) + byt(0xE4, 0xB8, 0xAD, 0xFF) + raw(349)  # ▁Hello, ▁is
    # specials and text, with and without skip_special
    for c in (QWEN3, LLAMA2, SPM, BERT, GEMMA4):
        body = spec(0, 1, 2) + raw(*out_line({QWEN3: "qwen2", LLAMA2: "llama-spm", SPM: "llama-spm", BERT: "bert-bge",
                                              GEMMA4: "gemma-4"}[c], 25)) + spec(3, 1)
        if c in (QWEN3, BERT):
            seeds[f"special_t{c}"] = bytes([c]) + body
        seeds[f"special_skip_t{c}"] = bytes([c | 8]) + body
    # out-of-range and edge ids between valid ones (refused, not kept)
    seeds["edges_qwen3"] = bytes([QWEN3]) + raw(9707) + edge(*range(16)) + raw(21927)
    seeds["edges_bert_skip"] = bytes([BERT | 8]) + edge(8, 0, 9, 4, 10, 11) + raw(7592)
    # found by the fuzzer before the rewrite fix: <0x33><0xD9> (Llama 2, skip), "'" then <0xE9>
    seeds["found_3_d9"] = bytes([0x7E, 0x00, 0x33, 0x00, 0xD9])
    seeds["found_quote_e9"] = bytes([0xE9, 0x27, 0x27, 0x27, 0xE9, 0xE9])
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"{len(seeds)} seeds in {OUT}")


if __name__ == "__main__":
    main()
