#!/usr/bin/env python3
"""Markdown tables from the --json files of examples/fashion_mnist and
examples/text_classification (docs/results.md is built from their output).

usage: scripts/results_table.py [--merge] [--out MERGED.json] [--models a,b,...] FILE.json [FILE.json ...]

--merge pools the records of one model on one data set across files by their per-seed
"runs" (a protocol split over processes with --seed-list), recomputing mean ± sd (sample
sd, n - 1) exactly as the examples do. A seed that appears twice must carry the same
numbers, else the files come from different builds or protocols and the merge stops.
--out writes the merged records as JSON in the examples' format. --models keeps only these
models, in this order.
"""
import argparse
import json
import math
import statistics


def fmt(x, digits=4):
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def mean(xs):
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return sum(xs) / len(xs) if xs else None


def sd(xs):
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def merge(records):
    groups = {}
    for r in records:
        if "runs" not in r:
            raise SystemExit(f"--merge: record {r['model']}/{r['dataset']} has no per-seed 'runs' "
                             "(written before --seed-list existed)")
        g = groups.setdefault((r["model"], r["dataset"]), {"first": r, "runs": {}})
        for run in r["runs"]:
            seen = g["runs"].get(run["seed"])
            if seen is not None and (seen["accuracy"], seen["macro_f1"]) != (run["accuracy"], run["macro_f1"]):
                raise SystemExit(f"--merge: {r['model']}/{r['dataset']} seed {run['seed']} appears twice "
                                 f"with different results ({seen['accuracy']} vs {run['accuracy']})")
            g["runs"][run["seed"]] = run
    out = []
    for (model, dataset), g in groups.items():
        runs = [g["runs"][s] for s in sorted(g["runs"])]
        col = lambda k: [run.get(k) for run in runs]
        r = {"model": model, "dataset": dataset, "seeds": len(runs),
             "accuracy": mean(col("accuracy")), "accuracy_sd": sd(col("accuracy")),
             "macro_f1": mean(col("macro_f1")), "macro_f1_sd": sd(col("macro_f1")),
             "ece": mean(col("ece")), "params": g["first"]["params"],
             "seconds": mean(col("seconds")), "epochs": mean(col("epochs"))}
        for k in ("attention_entropy", "kta_before", "kta_after"):
            v = mean(col(k))
            if v is not None:
                r[k] = v
        r["runs"] = runs
        out.append(r)
    return out


def print_tables(records):
    by_dataset = {}
    for r in records:
        by_dataset.setdefault(r["dataset"], []).append(r)
    for ds, rs in by_dataset.items():
        print(f"\n**{ds}**\n")
        print("| model | seeds | accuracy | macro-F1 | ECE | attention entropy | params | seconds |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rs:
            sd_ = lambda k: f" ± {r[k]:.4f}" if r["seeds"] > 1 else ""
            print(f"| {r['model']} | {r['seeds']} | {fmt(r['accuracy'])}{sd_('accuracy_sd')} | "
                  f"{fmt(r['macro_f1'])}{sd_('macro_f1_sd')} | {fmt(r['ece'])} | "
                  f"{fmt(r.get('attention_entropy'), 3)} | {r['params']:,} | {r['seconds']:.0f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--merge", action="store_true", help="pool records of one model and data set by seed")
    ap.add_argument("--out", help="write the (merged) records here as JSON")
    ap.add_argument("--models", help="comma-separated: keep only these models, in this order")
    a = ap.parse_args()
    records = []
    for p in a.files:
        with open(p) as f:
            records += json.load(f)
    if a.merge:
        records = merge(records)
    if a.models:
        order = a.models.split(",")
        records = sorted((r for r in records if r["model"] in order), key=lambda r: order.index(r["model"]))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(records, f, indent=2)
            f.write("\n")
    print_tables(records)


if __name__ == "__main__":
    main()
