#!/usr/bin/env python3
"""Plot FSKA's Figure 1 experiment (examples/spectral_fit.cpp).

Reads density_grid.csv, kernel_matrices.csv and summary.csv from the example's output
directory and draws two rows: the spectral densities p(w1, w2) (target NGSM, GMM fitted by
EM, RealNVP fitted by maximum likelihood, RealNVP trained by reverse KL) as heat maps with
the target's contours overlaid, and the kernel matrices K(x_i, x_j) on x in [-3, 3] (target
in closed form, the learned models' kernels from m frequency pairs), each titled with its
held-out NLL or relative Frobenius error.

    scripts/plot_spectral_fit.py [spectral_fit_out] [-o docs/img/spectral_fit.png]

Needs matplotlib (Debian: python3-matplotlib; with a pyenv python first on PATH, run it
as /usr/bin/python3 scripts/plot_spectral_fit.py).
"""
import argparse
import csv
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

# (column in the CSVs, summary row, title)
MODELS = [
    ("target", "target (closed form)", "target NGSM (GT)"),
    ("gmm", "gmm (EM)", "GMM, EM (Q = 2)"),
    ("flow_ml", "flow (ML)", "RealNVP, max. likelihood"),
    ("flow_kl", "flow (KL)", "RealNVP, reverse KL to GT"),
]


def read_columns(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {k: np.array([float(r[k]) for r in rows]) for k in rows[0]}


def read_summary(path):
    with open(path, newline="") as f:
        return {r["model"]: r for r in csv.DictReader(f)}


def grid(cols, xk, yk, vk):
    xs, ys = np.unique(cols[xk]), np.unique(cols[yk])
    z = np.full((len(ys), len(xs)), np.nan)
    xi, yi = np.searchsorted(xs, cols[xk]), np.searchsorted(ys, cols[yk])
    z[yi, xi] = cols[vk]
    return xs, ys, z


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", nargs="?", default="spectral_fit_out")
    ap.add_argument("-o", "--output", default="docs/img/spectral_fit.png")
    args = ap.parse_args()

    dens = read_columns(os.path.join(args.dir, "density_grid.csv"))
    kern = read_columns(os.path.join(args.dir, "kernel_matrices.csv"))
    summary = read_summary(os.path.join(args.dir, "summary.csv"))
    pairs = int(float(next(iter(summary.values()))["pairs"]))

    fig, axes = plt.subplots(3, len(MODELS), figsize=(14, 10), gridspec_kw=dict(wspace=0.35, hspace=0.38))
    w1, w2, zt = grid(dens, "w1", "w2", "target")
    vmax = np.nanmax(zt)
    levels = vmax * np.array([0.05, 0.2, 0.5, 0.8])
    for ax, (col, key, title) in zip(axes[0], MODELS):
        _, _, z = grid(dens, "w1", "w2", col)
        im = ax.imshow(z, origin="lower", extent=(w1[0], w1[-1], w2[0], w2[-1]), cmap="viridis", vmin=0,
                       vmax=vmax, aspect="equal", interpolation="bilinear")
        ax.contour(w1, w2, zt, levels=levels, colors="white", linewidths=0.7, alpha=0.8)
        r = summary.get(key)
        sub = ""
        if r is not None:
            sub = f"\nheld-out NLL {float(r['heldout_nll']):.3f}"
            if col != "target":
                sub += f" (gap {float(r['nll_gap']):+.3f})"
        ax.set_title("p(ω₁, ω₂): " + title + sub, fontsize=9)
        ax.set_xlabel("ω₁")
        ax.set_ylabel("ω₂", labelpad=0)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.85, pad=0.01)

    xi, xj, kt = grid(kern, "x_i", "x_j", "target")
    lim = np.nanmax(np.abs(kt))
    for ax, (col, key, title) in zip(axes[1], MODELS):
        _, _, k = grid(kern, "x_i", "x_j", col)
        im = ax.imshow(k, origin="lower", extent=(xi[0], xi[-1], xj[0], xj[-1]), cmap="RdBu_r", vmin=-lim,
                       vmax=lim, aspect="equal")
        r = summary.get(key)
        if col == "target":
            sub = "\nclosed form"
        elif col == "gmm":
            sub = f"\nclosed form, rel. error {float(r['kernel_rel_fro']):.3f}"
        else:
            sub = f"\nm = {pairs} pairs, rel. error {float(r['kernel_rel_fro']):.3f}"
        ax.set_title("K(x, x′): " + title + sub, fontsize=9)
        ax.set_xlabel("x")
        ax.set_ylabel("x′", labelpad=0)
    fig.colorbar(im, ax=axes[1].tolist(), shrink=0.85, pad=0.01)

    # Errors K − K_target; the first panel is the target's own Monte-Carlo error (the floor).
    errs = [("target_mc", "target (MC kernel)", f"GT by MC, m = {pairs} (floor)")]
    errs += [(c, k, t) for c, k, t in MODELS[1:]]
    diffs = [grid(kern, "x_i", "x_j", c)[2] - kt for c, _, _ in errs]
    elim = max(np.nanmax(np.abs(d)) for d in diffs)
    for ax, (col, key, title), d in zip(axes[2], errs, diffs):
        im = ax.imshow(d, origin="lower", extent=(xi[0], xi[-1], xj[0], xj[-1]), cmap="PuOr_r", vmin=-elim,
                       vmax=elim, aspect="equal")
        r = summary.get(key)
        sub = f"\nrel. Frobenius error {float(r['kernel_rel_fro']):.3f}" if r is not None else ""
        ax.set_title("K − K_GT: " + title + sub, fontsize=9)
        ax.set_xlabel("x")
        ax.set_ylabel("x′", labelpad=0)
    fig.colorbar(im, ax=axes[2].tolist(), shrink=0.85, pad=0.01)
    fig.suptitle("FSKA figure 1 in kattn: a nonstationary spectral density p(ω₁, ω₂) (top; white: GT contours), "
                 "its kernel k(x, x′) = ¼ Σ_{a,b} E cos(ω_a x − ω_b x′) (middle)\nand the kernel errors (bottom); "
                 "learned models from the same samples (GMM, ML flow) or the GT density (KL flow)", fontsize=10)
    os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
    fig.savefig(args.output, dpi=85, bbox_inches="tight")
    print(f"wrote {args.output} ({os.path.getsize(args.output) // 1024} KB)")


if __name__ == "__main__":
    main()
