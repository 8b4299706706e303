#!/usr/bin/env python3
"""Markdown tables from the --json files of examples/fashion_mnist and
examples/text_classification (docs/results.md is built from their output).

usage: scripts/results_table.py FILE.json [FILE.json ...]
"""
import json
import math
import sys


def fmt(x, digits=4):
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def main(paths):
    records = []
    for p in paths:
        with open(p) as f:
            records += json.load(f)
    by_dataset = {}
    for r in records:
        by_dataset.setdefault(r["dataset"], []).append(r)
    for ds, rs in by_dataset.items():
        print(f"\n**{ds}**\n")
        print("| model | seeds | accuracy | macro-F1 | ECE | attention entropy | params | seconds |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rs:
            sd = lambda k: f" ± {r[k]:.4f}" if r["seeds"] > 1 else ""
            print(f"| {r['model']} | {r['seeds']} | {fmt(r['accuracy'])}{sd('accuracy_sd')} | "
                  f"{fmt(r['macro_f1'])}{sd('macro_f1_sd')} | {fmt(r['ece'])} | "
                  f"{fmt(r.get('attention_entropy'), 3)} | {r['params']:,} | {r['seconds']:.0f} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
