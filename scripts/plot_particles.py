#!/usr/bin/env python3
"""Plot the synthetic particle study (examples/particles_synthetic.cpp).

Reads the per-run CSV (method, sigma, seed, accuracy, f1, ...) and draws test accuracy
and F1 versus the input-noise sd sigma (log axis), one line per method with a band of
one standard deviation over the seeds.

    scripts/plot_particles.py [particles_synthetic.csv] [-o docs/img/particles_synthetic.png]

Needs matplotlib (Debian: python3-matplotlib; with a pyenv python first on PATH, run it
as /usr/bin/python3 scripts/plot_particles.py).
"""
import argparse
import csv
import math
import os
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {
    "rff": "fixed RFF (gaussian Ω)",
    "langevin_lambda0": "Langevin particles, λ = 0",
    "langevin_lambda0.5": "Langevin particles, λ = 0.5",
    "rbf_exact": "exact RBF kernel (reference)",
}
STYLES = {
    "rff": dict(color="0.45", marker="o"),
    "langevin_lambda0": dict(color="tab:purple", marker="s", linestyle="--"),
    "langevin_lambda0.5": dict(color="tab:brown", marker="^"),
    "rbf_exact": dict(color="tab:blue", marker="", linestyle=":"),
}


def load(path):
    runs = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))  # method -> sigma -> metric -> values
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            s = float(row["sigma"])
            for metric in ("accuracy", "f1"):
                runs[row["method"]][s][metric].append(float(row[metric]))
    return runs


def mean_sd(v):
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0.0
    return m, sd


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="?", default="particles_synthetic.csv")
    ap.add_argument("-o", "--output", default="docs/img/particles_synthetic.png")
    args = ap.parse_args()

    runs = load(args.csv)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    seeds = 0
    for ax, metric, title in zip(axes, ("accuracy", "f1"), ("test accuracy", "test F1")):
        for method in [m for m in LABELS if m in runs] + [m for m in runs if m not in LABELS]:
            sig = sorted(runs[method])
            stats = [mean_sd(runs[method][s][metric]) for s in sig]
            seeds = max(seeds, max(len(runs[method][s][metric]) for s in sig))
            mu = [m for m, _ in stats]
            sd = [d for _, d in stats]
            style = STYLES.get(method, {})
            ax.plot(sig, mu, label=LABELS.get(method, method), **style)
            ax.fill_between(sig, [a - b for a, b in zip(mu, sd)], [a + b for a, b in zip(mu, sd)],
                            color=style.get("color"), alpha=0.15, linewidth=0)
        ax.set_xscale("log")
        ax.set_xlabel("input noise sd σ")
        ax.set_ylabel(title)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(loc="lower left", fontsize=8)
    fig.suptitle(f"Synthetic study (Coulomb paper F.1): D = 200 features, ridge classifier, "
                 f"mean ± sd over {seeds} seeds", fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
