#!/usr/bin/env python3
"""gen_turbo_codebook.py - the constants of the TurboQuant KV cache types (turbo4, turbo3).

TurboQuant (Zandieh et al., "TurboQuant: Online Vector Quantization with Near-optimal Distortion
Rate", 2025) rotates a vector by a random orthogonal matrix, after which each coordinate of the
unit-norm vector follows the density of one coordinate of a uniform point on the sphere S^(d-1),

    f(u) ∝ (1 - u^2)^((d - 3) / 2),  u in [-1, 1],

and quantizes every coordinate with the Lloyd-Max (MSE-optimal) scalar quantizer of that density.
Our cache keeps one norm per 32 rotated coordinates (the block of the other KV formats), so the
block of 32, divided by its norm over sqrt(32), is a uniform point on the sphere of radius
sqrt(32) in 32 dimensions: the codebook here is Lloyd-Max for x = sqrt(32) u with d = 32,
at 16 levels (turbo4) and 8 levels (turbo3).

The rotation is a randomized Hadamard transform, H diag(s) / sqrt(R) over chunks of R
coordinates, with the fixed signs s printed here (a seeded draw).

Prints the C initializers that backends/cpu/kv_quant.c holds (float32, as hex-exact literals)
and writes tests/fixtures/kv_quant/turbo_codebook.json, which tests/unit/test_kv_quant.c compares
with the C tables and gen_turbo_fixtures.py reads.

Usage: python3 scripts/gen_turbo_codebook.py   (numpy only)
"""
import json
import os

import numpy as np

D = 32  # coordinates per norm
SIGNS = 256  # longest rotation chunk
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "kv_quant", "turbo_codebook.json")


def density_grid(n=2_000_001):
    r = np.sqrt(D)
    x = np.linspace(-r, r, n)
    u = x / r
    f = np.clip(1.0 - u * u, 0.0, None) ** ((D - 3) / 2.0)
    return x, f / f.sum()


def lloyd_max(levels, iters=5000):
    x, f = density_grid()
    # start from quantiles of the density
    cdf = np.cumsum(f)
    c = np.interp((np.arange(levels) + 0.5) / levels, cdf, x)
    for _ in range(iters):
        b = (c[1:] + c[:-1]) / 2.0
        idx = np.searchsorted(b, x)
        num = np.bincount(idx, weights=f * x, minlength=levels)
        den = np.bincount(idx, weights=f, minlength=levels)
        nc = num / den
        nc = (nc - nc[::-1]) / 2.0  # keep the exact symmetry of the density
        if np.max(np.abs(nc - c)) < 1e-13:
            c = nc
            break
        c = nc
    mse = float(np.sum(f * (x - c[np.searchsorted((c[1:] + c[:-1]) / 2.0, x)]) ** 2))
    return c.astype(np.float32), mse


def signs():
    rng = np.random.default_rng(20261207)
    return rng.integers(0, 2, SIGNS).astype(np.uint8)  # 1: negate


def main():
    out = {"d": D}
    for name, levels in (("turbo4", 16), ("turbo3", 8)):
        c, mse = lloyd_max(levels)
        mid = ((c[1:].astype(np.float32) + c[:-1].astype(np.float32)) * np.float32(0.5)).astype(np.float32)
        out[name] = {"centroids": [float(v) for v in c], "centroids_hex": [v.tobytes().hex() for v in c],
                     "mids_hex": [v.tobytes().hex() for v in mid], "mse_per_coord": mse}
        print(f"/* {name}: {levels} levels, MSE per unit-variance coordinate {mse:.6f} */")
        print("{" + ", ".join(f"{float(v).hex().replace('0000000p', 'p')}f" for v in c) + "}")
    s = signs()
    bits = np.packbits(s, bitorder="little")
    out["signs_hex"] = bits.tobytes().hex()
    print("/* signs: bit i of byte i/8 set = negate coordinate i of a chunk */")
    print("{" + ", ".join(f"0x{b:02x}" for b in bits) + "}")
    with open(OUT, "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
