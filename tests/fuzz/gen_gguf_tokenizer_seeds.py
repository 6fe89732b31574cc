#!/usr/bin/env python3
"""gen_gguf_tokenizer_seeds.py - writes the seed corpus of tests/fuzz/fuzz_gguf_tokenizer.c
(tests/fuzz/corpus/gguf_tokenizer/): small vocabularies of each tokenizer.ggml.model kind
(gpt2 with several tokenizer.ggml.pre values, llama / SentencePiece, bert / WordPiece, gemma4),
with control / user / unknown / byte tokens, special ids, add_bos / add_eos / add_space_prefix,
a chat template, every kind of wrong array or key, and one GGUF file given as it is. Files named
found_* are inputs the fuzzer found; this script leaves them alone.
The input format is described at the top of fuzz_gguf_tokenizer.c.

    python3 tests/fuzz/gen_gguf_tokenizer_seeds.py      (from the repository root)"""
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus", "gguf_tokenizer")

LLAMA, GPT2, BERT, GEMMA4, RWKV, NOMODEL = 0, 1, 2, 3, 6, 7
AUTO_BYTES, TYPES, SCORES, AUTO_MERGES, LIE = 8, 16, 32, 64, 128
PRE = ["", "default", "llama3", "llama-bpe", "qwen2", "qwen35", "deepseek-llm", "deepseek-coder", "deepseek-v3",
       "falcon", "starcoder", "gpt-2", "gpt-4o", "tekken", "poro-chat", "viking", "gemma4", "dbrx", "chatglm-bpe",
       "smollm", "olmo", "refact", "command-r", "bloom", "mpt", "jina-v2-code", "exaone", "hunyuan", "lfm2",
       "no-such-pre", "llama-v3"]
NO_PRE, BOOLS, SIDS, PREFIX_TMPL = 31, 32, 64, 128
NORMAL, UNKNOWN, CONTROL, USER, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def seed(m, pre, x, tokens, merges=(), text=b"", sids=None):
    """tokens: (text, type, score) triples; sids: 8 bytes (bos, eos, unk, sep, pad, cls, mask, fim_pre), indexes
    into tokens (or 0xF0.. edge values)."""
    p = (PRE.index(pre) if pre is not None else NO_PRE) | (SIDS if sids is not None else 0) | (x >> 8)
    b = bytearray([m, p, x & 0xFF])  # flags() carries byte 1's BOOLS / PREFIX_TMPL in its high byte
    if sids is not None:
        b += bytes(sids)
    for t, ty, sc in tokens:
        t = t.encode() if isinstance(t, str) else t
        b += bytes([len(t), ty, sc & 0xFF]) + t
    b += b"\xff"
    for mg in merges:
        mg = mg.encode()
        b += bytes([len(mg)]) + mg
    b += b"\xff"
    return bytes(b) + (text.encode() if isinstance(text, str) else text)


def flags(bools=False, tmpl=False, add_bos=0, add_eos=0, space=0, lie=0, v2=False, int_scores=False):
    x = add_bos | add_eos << 1 | space << 2 | lie << 3 | v2 << 6 | int_scores << 7
    return x | (BOOLS << 8 if bools else 0) | (PREFIX_TMPL << 8 if tmpl else 0)


G = "\u0120"  # GPT-2's space character
BPE_WORDS = [("he", 1, 0), ("hel", 1, 0), ("hello", 1, 0), (G + "t", 1, 0), (G + "th", 1, 0), (G + "the", 1, 0),
             ("wo", 1, 0), ("wor", 1, 0), ("world", 1, 0), (G + "w", 1, 0), ("12", 1, 0), ("\u00e4\u00b8", 1, 0)]
TEXT = "hello the world, 1234 \u00e9\u4e2d! \U0001F600\n\n  x's <|end|> <tool>"


def gguf_file():
    """A GGUF v3 with a gpt2 vocabulary, written as the file itself (the "GGUF" input mode)."""
    kv = []

    def s(v):
        v = v.encode()
        return struct.pack("<Q", len(v)) + v

    kv.append(s("tokenizer.ggml.model") + struct.pack("<I", 8) + s("gpt2"))
    kv.append(s("tokenizer.ggml.pre") + struct.pack("<I", 8) + s("qwen2"))
    toks = [chr(c) for c in range(33, 127)] + ["he", "hello", G + "w", "<|im_end|>"]
    kv.append(s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, len(toks)) + b"".join(s(t) for t in toks))
    kv.append(s("tokenizer.ggml.token_type") + struct.pack("<IIQ", 9, 5, len(toks)) +
              struct.pack(f"<{len(toks)}i", *([1] * (len(toks) - 1) + [3])))
    merges = ["h e", "he l", "hel l", "Ġ w"]
    kv.append(s("tokenizer.ggml.merges") + struct.pack("<IIQ", 9, 8, len(merges)) + b"".join(s(m) for m in merges))
    kv.append(s("tokenizer.ggml.eos_token_id") + struct.pack("<II", 4, len(toks) - 1))
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)) + b"".join(kv)


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {}
    spec = [("<|end|>", CONTROL, 0), ("<tool>", USER, 0), ("<unk>", UNKNOWN, 0)]
    # gpt2, byte-level, clean (round trip checked) under several pre-tokenizers
    for pre in ("gpt-2", "llama3", "qwen2", "deepseek-v3", "deepseek-llm", "falcon", "tekken", "default", "gpt-4o",
                "bloom", None):
        seeds[f"gpt2_clean_{pre or 'nopre'}"] = seed(GPT2 | AUTO_BYTES | AUTO_MERGES, pre, flags(), BPE_WORDS, text=TEXT)
    # gpt2 with specials, types, add_bos / add_eos and special ids
    seeds["gpt2_specials"] = seed(GPT2 | AUTO_BYTES | AUTO_MERGES | TYPES, "llama3", flags(bools=True, add_bos=1, add_eos=1),
                                  BPE_WORDS + spec, text=TEXT, sids=[12, 12, 14, 0xF5, 0xF0, 1, 2, 0xFF])
    seeds["gpt2_explicit_merges"] = seed(GPT2 | AUTO_BYTES, "gpt-2", flags(), BPE_WORDS,
                                         merges=["h e", "he l", "hel lo", "l o", G + " t", G + "t h", "bad", " x", "a  b"], text=TEXT)
    # llama (SentencePiece): <0xXX> byte tokens, scores, add_space_prefix, chat template
    spm = [("<unk>", UNKNOWN, 0), ("<s>", CONTROL, 0), ("</s>", CONTROL, 0), ("\u2581", NORMAL, -4), ("\u2581the", NORMAL, 8),
           ("\u2581hello", NORMAL, 9), ("he", NORMAL, 2), ("llo", NORMAL, 3), ("\u2581w", NORMAL, 1), ("orld", NORMAL, 4),
           ("\u2581\u2581", NORMAL, -2), ("\u4e2d", NORMAL, 5), ("<tool>", USER, 0), ("\u2581x", UNUSED, 0)]
    seeds["llama_spm"] = seed(LLAMA | AUTO_BYTES | TYPES | SCORES, None, flags(bools=True, tmpl=True, add_bos=1, space=1),
                              spm, text="{{ bos_token }} hello the world  \u4e2d\u00e9")
    seeds["llama_spm_noprefix_int_scores"] = seed(LLAMA | AUTO_BYTES | TYPES | SCORES, None,
                                                  flags(tmpl=True, space=0, int_scores=True), spm, text=TEXT)
    seeds["llama_spm_no_bytes"] = seed(LLAMA | TYPES | SCORES, None, flags(), spm, text=TEXT,
                                       sids=[1, 2, 0, 0xF0, 0xF1, 0xF2, 0xF3, 0xF4])
    # bert (WordPiece)
    wpm = [("[PAD]", CONTROL, 0), ("[UNK]", UNKNOWN, 0), ("[CLS]", CONTROL, 0), ("[SEP]", CONTROL, 0), ("[MASK]", CONTROL, 0),
           ("\u2581hello", NORMAL, 0), ("##lo", NORMAL, 0), ("\u2581world", NORMAL, 0), ("\u2581the", NORMAL, 0), ("##s", NORMAL, 0),
           (",", NORMAL, 0), ("\u2581x", NORMAL, 0), ("'", NORMAL, 0)]
    seeds["bert_wpm"] = seed(BERT | TYPES, None, flags(bools=True, add_bos=1), wpm, text=TEXT, sids=[2, 3, 1, 3, 0, 2, 4, 0xF7])
    seeds["bert_wpm_default_ids"] = seed(BERT | TYPES, None, flags(), wpm, text="Hello, the worlds!")
    # gemma4: raw UTF-8 BPE, U+2581 escaping, newline words, <0xXX> fallback
    g4 = [("\u2581", NORMAL, 0), ("\u2581h", NORMAL, 0), ("\u2581he", NORMAL, 0), ("\u2581hello", NORMAL, 0), ("\n", NORMAL, 0),
          ("\n\n", NORMAL, 0), ("<bos>", CONTROL, 0), ("<eos>", CONTROL, 0), ("wo", NORMAL, 0), ("world", NORMAL, 0)]
    seeds["gemma4"] = seed(GEMMA4 | AUTO_BYTES | TYPES | AUTO_MERGES, None, flags(), g4, text=TEXT, sids=[6, 7, 0xF5, 0, 0, 0, 0, 0])
    seeds["gpt2_pre_gemma4"] = seed(GPT2 | AUTO_BYTES | TYPES | AUTO_MERGES, "gemma4", flags(), g4, text=TEXT)
    # refused: an unknown model, no model, an unknown pre, GGUF v2 of a good one
    seeds["unknown_model"] = seed(RWKV, None, flags(), spm, text=TEXT)
    seeds["no_model"] = seed(NOMODEL, None, flags(), spm, text=TEXT)
    seeds["unknown_pre"] = seed(GPT2 | AUTO_BYTES, "no-such-pre", flags(), BPE_WORDS, text=TEXT)
    seeds["gpt2_v2"] = seed(GPT2 | AUTO_BYTES | AUTO_MERGES, "qwen35", flags(v2=True), BPE_WORDS, text=TEXT)
    # each wrong array / key (byte 2 bits 3-5)
    for k, name in enumerate(["tokens_int", "types_short", "scores_short", "types_float", "scores_str", "merges_int",
                              "tokens_empty", "model_u32_eos_str"]):
        model = NOMODEL if k == 7 else (LLAMA if k in (2, 4) else GPT2)
        seeds[f"lie_{name}"] = seed(model | AUTO_BYTES | TYPES | SCORES | LIE, "gpt-2" if model == GPT2 else None,
                                    flags(lie=k), BPE_WORDS + spec, text=TEXT, sids=[1, 2, 3, 4, 5, 6, 7, 8])
    # found by the fuzzer: fim_pre_token_id 315 of a 256-token bert vocabulary came back without a token
    seeds["found_fim_past_vocab"] = bytes([0xBA, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x66, 0x5B, 0xFF, 0xF7])
    seeds["gguf_file_gpt2"] = gguf_file()
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"{len(seeds)} seeds in {OUT}")


if __name__ == "__main__":
    main()
