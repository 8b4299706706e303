#!/usr/bin/env python3
"""Plot ListOps results of examples/listops: left, test accuracy of every model (one record
file each, bars, with the majority class and LRA's published rows as lines); right, the
Coulomb favor model (kernel-favor) against its input scale s: test accuracy and attention
entropy (ln L of the mean test length drawn as the uniform-attention level).

    scripts/plot_listops.py --models A.json B.json ... --scale S1.json S2.json ... \\
        [--learned L.json ...] [-o docs/img/listops_8k.png]

--models: records of one model each (any kind); --scale: kernel-favor records, each with its
"input_scale" (absent: the map's default, d_h^-1/4 = 0.5 for the 16-dimensional heads of
the ListOps model); --learned: kernel-favor records with learn_input_scale, drawn at the
scale they started from. Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import json
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LRA = [("LRA Transformer 36.37", 36.37, "bottom"), ("LRA Performer 18.01", 18.01, "bottom"),
       ("LRA Linear Transformer 16.13", 16.13, "top")]


def records(paths):
    out = []
    for p in paths:
        with open(p) as f:
            out.extend(json.load(f))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", required=True)
    ap.add_argument("--scale", nargs="+", required=True)
    ap.add_argument("--learned", nargs="*", default=[])
    ap.add_argument("--majority", type=float, default=16.8, help="majority-class accuracy of the test split, %%")
    ap.add_argument("--mean-length", type=float, default=730, help="mean test length (uniform entropy ln L)")
    ap.add_argument("-o", "--output", default="docs/img/listops_8k.png")
    a = ap.parse_args()

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.4), gridspec_kw={"width_ratios": [1.4, 1]})
    ms = sorted(records(a.models), key=lambda r: -r["accuracy"])
    names = [r["model"] + (f" s={r['input_scale']:g}" if "input_scale" in r else "")
             + (f" τ={r['temperature']:g}" if "temperature" in r else "")
             + (" (learned s)" if r.get("learn_input_scale") else "") for r in ms]
    acc = [100 * r["accuracy"] for r in ms]
    colors = ["#d1495b" if r["model"].startswith(("kernel-", "vanilla-", "shrunk-", "fska", "qk-", "performer"))
              else "#555555" for r in ms]
    ax.bar(range(len(ms)), acc, color=colors)
    ax.set_xticks(range(len(ms)), names, rotation=40, ha="right", fontsize=8)
    ax.axhline(a.majority, color="#999999", ls=":", lw=1)
    ax.text(-0.4, a.majority + 0.3, "majority class", ha="left", va="bottom", fontsize=7, color="#777777")
    for label, v, va in LRA:
        ax.axhline(v, color="#2e86ab", ls="--", lw=0.8)
        ax.text(len(ms) - 0.5, v + (0.3 if va == "bottom" else -0.3), label, ha="right", va=va, fontsize=7,
                color="#2e86ab")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("ListOps, 8,000 training expressions, 4 epochs, seed 1", fontsize=10)

    sc = sorted(records(a.scale), key=lambda r: r.get("input_scale", 0.5))
    s = [r.get("input_scale", 0.5) for r in sc]
    bx.plot(s, [100 * r["accuracy"] for r in sc], "o-", color="#d1495b", label="test accuracy (fixed s)")
    for r in records(a.learned):
        s0 = r.get("input_scale", 0.5)
        bx.plot([s0], [100 * r["accuracy"]], "D", color="#edae49", ms=7, label=f"learned s from {s0:g}")
    bx.axhline(a.majority, color="#999999", ls=":", lw=1)
    bx.set_xlabel("input scale s of kernel-favor (default d_h^-1/4 = 0.5)")
    bx.set_ylabel("test accuracy (%)")
    bx.legend(fontsize=8, loc="center right")
    ex = bx.twinx()
    ex.plot(s, [r["attention_entropy"] for r in sc], "s--", color="#2e86ab", label="attention entropy")
    ex.axhline(math.log(a.mean_length), color="#2e86ab", ls=":", lw=1)
    ex.set_ylabel("attention entropy (nats); dotted: ln L, uniform", color="#2e86ab")
    bx.set_title("Coulomb favor: sharpness decides", fontsize=10)
    fig.tight_layout()
    fig.savefig(a.output, dpi=120)


if __name__ == "__main__":
    main()
