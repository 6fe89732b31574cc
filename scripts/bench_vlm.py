#!/usr/bin/env python3
"""Time to first token for one image, mlxcel next to llama.cpp's multimodal CLI on the same files.

Makes (once, cached under --work) a synthetic Gemma-3-shaped vision-language checkpoint with
transformers (random weights, seeded): a SigLIP-so400m-sized tower (27 layers, width 1152, MLP
4304, 16 heads, patch 14, 896 x 896 images: 4096 patches) with Gemma 3's 4 x 4 pooling projector
(256 tokens per image) before a Gemma-3-270m-shaped text decoder (18 layers, width 640) with
Gemma 3's full vocabulary (262208 rows; the bundled gemma-3-270m GGUF's tokenizer plus the image
token at 262144, and the released chat template). llama.cpp's convert_hf_to_gguf.py writes the
text GGUF and the mmproj (both f16) side by side; then, for one 896 x 896 PNG and a short prompt,
`mlxcel generate --image` and `llama-mtmd-cli --image` each produce one token, --reps times,
alternating; the figure is the wall time of the run (load included: both map their files) and the
engines' own image-encode times, medians side by side.

llama.cpp comes from the llama-cpp-python sdist (bench_vs_llamacpp.py fetches it; llama-mtmd-cli is
built here beside llama-bench, AVX-512 named as there). Needs torch + transformers (the reference
venv), about 8 GB of memory and 4 GB of disk under --work.

  /work/refvenv/bin/python scripts/bench_vlm.py [--threads 2] [--reps 3] [--work /tmp/vlmbench]
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_vs_llamacpp import ROOT, STORE, MODELS, MLXCEL, build_llama_bench  # noqa: E402

TEMPLATE = os.path.join(ROOT, "..", "shared", "testdata", "templates", "templates", "tokcfg-gemma3.jinja")
IMAGE_TOKEN = 262144


def llama_src(work):
    bench = build_llama_bench(work)
    return os.path.dirname(os.path.dirname(os.path.dirname(bench))), os.path.dirname(os.path.dirname(bench))


def build_mtmd(work):
    src, build = llama_src(work)
    exe = os.path.join(build, "bin", "llama-mtmd-cli")
    if not os.path.exists(exe):
        subprocess.run(["cmake", "-S", src, "-B", build, "-DLLAMA_BUILD_TOOLS=ON"], check=True)
        subprocess.run(["cmake", "--build", build, "--target", "llama-mtmd-cli", "-j", str(os.cpu_count() or 1)], check=True)
    return src, exe


def make_checkpoint(out):
    import torch
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration
    if os.path.exists(os.path.join(out, "config.json")):
        return
    text = dict(model_type="gemma3_text", vocab_size=262208, hidden_size=640, intermediate_size=2048, num_hidden_layers=18,
                num_attention_heads=4, num_key_value_heads=1, head_dim=256, query_pre_attn_scalar=256, sliding_window=512,
                max_position_embeddings=32768, bos_token_id=2, eos_token_id=1, pad_token_id=0)
    vision = dict(model_type="siglip_vision_model", hidden_size=1152, intermediate_size=4304, num_hidden_layers=27,
                  num_attention_heads=16, image_size=896, patch_size=14, vision_use_head=False)
    cfg = Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=256, boi_token_index=255999, eoi_token_index=256000,
                       image_token_index=IMAGE_TOKEN)
    torch.manual_seed(0)
    model = Gemma3ForConditionalGeneration(cfg).to(torch.bfloat16).eval()
    model.save_pretrained(out, safe_serialization=True)
    # the released checkpoints' layout (vision_tower.vision_model.*), which llama.cpp's converter
    # maps; transformers 5 saves the tower one level up
    from safetensors.torch import load_file, save_file
    for shard in glob.glob(os.path.join(out, "*.safetensors")):
        t = load_file(shard)
        save_file({("vision_tower.vision_model." + k[13:] if k.startswith("vision_tower.") else k): v for k, v in t.items()}, shard,
                  metadata={"format": "pt"})
    index = os.path.join(out, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            ix = json.load(f)
        ix["weight_map"] = {("vision_tower.vision_model." + k[13:] if k.startswith("vision_tower.") else k): v for k, v in ix["weight_map"].items()}
        with open(index, "w") as f:
            json.dump(ix, f)
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        json.dump({"image_processor_type": "Gemma3ImageProcessor", "do_resize": True, "do_rescale": True, "do_normalize": True,
                   "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "resample": 2, "rescale_factor": 1 / 255,
                   "size": {"height": 896, "width": 896}, "image_seq_length": 256}, f)


def convert(src, ckpt, out_dir):
    """The text GGUF (vocabulary from the bundled gemma-3-270m GGUF + the image token) and the mmproj."""
    text_out, mm_out = os.path.join(out_dir, "model-f16.gguf"), os.path.join(out_dir, "mmproj-model-f16.gguf")
    if os.path.exists(text_out) and os.path.exists(mm_out):
        return text_out
    os.makedirs(out_dir, exist_ok=True)
    sys.path.insert(0, src)
    sys.path.insert(0, os.path.join(src, "gguf-py"))
    import gguf
    import torch
    import convert_hf_to_gguf as conv
    from pathlib import Path
    r = gguf.GGUFReader(os.path.join(STORE, MODELS["gemma3"]))
    f = r.fields
    tokens = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode() for i in f["tokenizer.ggml.tokens"].data]
    scores = [float(f["tokenizer.ggml.scores"].parts[i][0]) for i in f["tokenizer.ggml.scores"].data]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    extra = 262208 - len(tokens)
    tokens += ["<image_soft_token>"] + [f"<unused_extra{i}>" for i in range(1, extra)]
    scores += [0.0] * extra
    types += [types[255999]] * extra
    with open(TEMPLATE) as fh:
        template = fh.read()
    # (the converter trims the embedding to the vocabulary tokenizer.json counts: all 262208 rows)
    with open(os.path.join(ckpt, "tokenizer.json"), "w") as fh:
        json.dump({"model": {"vocab": {t: i for i, t in enumerate(tokens)}}, "added_tokens": []}, fh)

    def vocab(self):
        w = self.gguf_writer
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_bos_token_id(2)
        w.add_eos_token_id(1)
        w.add_unk_token_id(3)
        w.add_pad_token_id(0)
        w.add_add_bos_token(True)
        w.add_add_space_prefix(False)
        w.add_chat_template(template)

    for kind, path in ((conv.ModelType.TEXT, text_out), (conv.ModelType.MMPROJ, mm_out)):
        hparams = conv.ModelBase.load_hparams(Path(ckpt), False)
        cls = conv.get_model_class(conv.get_model_architecture(hparams, kind), mmproj=kind == conv.ModelType.MMPROJ)
        saved = getattr(cls, "set_vocab", None)
        if saved:
            cls.set_vocab = vocab
        try:
            with torch.inference_mode():
                cls(Path(ckpt), gguf.LlamaFileType.MOSTLY_F16, Path(path), eager=True, model_name="bench-gemma3-vlm").write()
        finally:
            if saved:
                cls.set_vocab = saved
    return text_out


def make_image(path):
    if os.path.exists(path):
        return
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(3)
    y, x = np.mgrid[0:896, 0:896]
    a = np.stack([x % 256, y % 256, (x + y) % 256], -1) + rng.integers(0, 32, (896, 896, 3))
    Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(path)


def timed(cmd, env=None):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    dt = time.time() - t0
    if p.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return dt, p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--work", default="/tmp/vlmbench")
    ap.add_argument("--llama-work", default=None, help="where llama.cpp's sdist is (or goes); default WORK/llama")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    src, mtmd = build_mtmd(a.llama_work or os.path.join(a.work, "llama"))
    ckpt = os.path.join(a.work, "hf")
    make_checkpoint(ckpt)
    gguf_dir = os.path.join(a.work, "gguf")
    text = convert(src, ckpt, gguf_dir)
    mmproj = glob.glob(os.path.join(gguf_dir, "mmproj*.gguf"))[0]
    img = os.path.join(a.work, "image896.png")
    make_image(img)
    prompt = "Describe this image."
    ours, theirs, our_enc, their_enc = [], [], [], []
    env = dict(os.environ, MXL_CPU_ISA=os.environ.get("MXL_CPU_ISA", "avx512"))
    for r in range(a.reps):
        dt, out = timed([MLXCEL, "generate", "-m", text, "--image", img, "-p", prompt, "-n", "1", "--temp", "0", "--threads",
                         str(a.threads), "--profile"], env)
        ours.append(dt)
        m = re.search(r"Image encode: ([0-9.]+) ms", out)
        if m:
            our_enc.append(float(m.group(1)) / 1e3)
        dt, out = timed([mtmd, "-m", text, "--mmproj", mmproj, "--image", img, "-p", prompt, "-n", "1", "--temp", "0", "-t", str(a.threads),
                         "--no-warmup"])
        theirs.append(dt)
        m = re.search(r"image slice encoded in ([0-9.]+) ms", out) or re.search(r"batch encoding done in ([0-9.]+) ms", out)
        if m:
            their_enc.append(float(m.group(1)) / 1e3)
        print(f"rep {r}: mlxcel {ours[-1]:.2f} s, llama-mtmd-cli {theirs[-1]:.2f} s", flush=True)
    mo, mt = statistics.median(ours), statistics.median(theirs)
    print(f"\n| {a.threads} threads, one 896x896 image, 1 token | mlxcel | llama.cpp (mtmd-cli) | ratio |")
    print("|---|---|---|---|")
    print(f"| wall time to the first token (median of {a.reps}) | {mo:.2f} s | {mt:.2f} s | {mt / mo:.2f}x |")
    if our_enc and their_enc:
        eo, et = statistics.median(our_enc), statistics.median(their_enc)
        print(f"| image encode (engine's own timer) | {eo:.2f} s | {et:.2f} s | {et / eo:.2f}x |")


if __name__ == "__main__":
    main()
