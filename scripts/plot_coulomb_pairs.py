#!/usr/bin/env python3
"""Plot the Coulomb pairs of examples/text_classification: for each positive feature map,
test macro-F1 of vanilla-<map> (random Ω), shrunk-<map> (random Ω at phase A's radius,
when present) and kernel-<map> (Langevin particles), mean ± sd over the seeds with each
seed as a dot. Reference lines: the softmax Transformer and FSKA when present.

    scripts/plot_coulomb_pairs.py MERGED.json [-o docs/img/coulomb_pairs_rt.png]

MERGED.json: `scripts/results_table.py --merge --out` (or one run's --json). Needs
matplotlib (Debian: python3-matplotlib).
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MAPS = ["elu", "softplus", "softmax_features", "favor", "sigmoid2", "cos2", "porf_softplus"]
KINDS = [("vanilla", "vanilla (random Ω)", "#9e9e9e"),
         ("shrunk", "shrunk (random Ω, ‖ω‖ ≈ R)", "#8fb8de"),
         ("kernel", "kernel (Langevin particles)", "#d1495b")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json")
    ap.add_argument("-o", "--output", default="docs/img/coulomb_pairs_rt.png")
    a = ap.parse_args()
    with open(a.json) as f:
        records = {r["model"]: r for r in json.load(f)}
    maps = [m for m in MAPS if f"vanilla-{m}" in records or f"kernel-{m}" in records]
    kinds = [k for k in KINDS if any(f"{k[0]}-{m}" in records for m in maps)]
    width = 0.8 / len(kinds)
    fig, ax = plt.subplots(figsize=(9, 4.2))
    for j, (kind, label, color) in enumerate(kinds):
        for i, m in enumerate(maps):
            r = records.get(f"{kind}-{m}")
            if r is None:
                continue
            x = i + (j - (len(kinds) - 1) / 2) * width
            ax.bar(x, 100 * r["macro_f1"], width * 0.9, yerr=100 * r["macro_f1_sd"], color=color,
                   label=label if i == next(k for k, mm in enumerate(maps) if f"{kind}-{mm}" in records) else None,
                   capsize=3, edgecolor="black", linewidth=0.5)
            for run in r.get("runs", []):
                ax.plot(x, 100 * run["macro_f1"], "k.", markersize=4)
    for name, style in (("transformer", "--"), ("fska", ":")):
        if name in records:
            ax.axhline(100 * records[name]["macro_f1"], color="black", linestyle=style, linewidth=1,
                       label=f"{name} (mean)")
    ax.set_xticks(range(len(maps)))
    ax.set_xticklabels(maps)
    ax.set_ylabel("test macro-F1 (%)")
    lo = min(100 * (r["macro_f1"] - r["macro_f1_sd"]) for r in records.values())
    ax.set_ylim(max(0, lo - 3), None)
    seeds = max(r["seeds"] for r in records.values())
    dataset = next(iter(records.values()))["dataset"]
    ax.set_title(f"{dataset}: Coulomb pairs, mean ± sd over {seeds} seeds (dots: seeds)")
    ax.set_ylim(ax.get_ylim()[0], ax.get_ylim()[1] + 2.5)
    ax.legend(fontsize=8, ncol=3, loc="upper left")
    fig.tight_layout()
    fig.savefig(a.output, dpi=120)
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
