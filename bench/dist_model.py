#!/usr/bin/python3
"""The alpha-beta communication model of kattn::dist::sequence_parallel (docs/distributed.md).

Per layer and rank, a causal forward+backward makes three all_gathers of the per-head states
(forward: key totals; backward: key totals again, query totals) of s = B*H*(F*dv + F + 1)*b
bytes each, plus one of the spectral gradient (d*P + m floats) and two of 7 int64 extents.
An all_gather of s bytes per rank over N ranks costs
    T(N, s) = ceil(log2 N)*alpha + (N - 1)*s*beta      (recursive doubling / Bruck + ring bandwidth term)
LASP's ring passes the state rank to rank: its critical path is N - 1 hops of (alpha + s*beta)
in the forward and again in the backward, serialised with the per-chunk compute.

Usage: bench/dist_model.py [--results bench/results/distributed_scaling.json] [--plot docs/img/dist_model.png]
Prints the measured fit (this machine) and the extrapolation to 128 nodes for L up to 1e7 tokens.
"""
import argparse
import json
import math


def allgather(n, s, alpha, beta):
    return 0.0 if n == 1 else math.ceil(math.log2(n)) * alpha + (n - 1) * s * beta


def lasp_ring(n, s, alpha, beta):
    return 0.0 if n == 1 else (n - 1) * (alpha + s * beta)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", default="bench/results/distributed_scaling.json")
    ap.add_argument("--plot", default="")
    # The model layer of the extrapolation: B=1, H=16 heads, favor m=F=128, dv=64, fp32.
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--features", type=int, default=128)
    ap.add_argument("--dv", type=int, default=64)
    ap.add_argument("--d", type=int, default=64)
    # Network: HDR InfiniBand 200 Gb/s per node, 2 us latency.
    ap.add_argument("--alpha", type=float, default=2e-6)
    ap.add_argument("--beta", type=float, default=1 / 25e9)
    # Compute per token and layer on one node, relative to one core of this machine.
    ap.add_argument("--node-speedup", type=float, default=64.0)
    a = ap.parse_args()

    # Measured: seconds per token (one rank, one thread) of the causal forward+backward of
    # the long_context layer (H=2, d=dv=64, m=128), from the weak-scaling records.
    rec = json.load(open(a.results))["records"]
    weak1 = [r for r in rec if r["experiment"] == "weak" and r["ranks"] == 1]
    t_tok_meas = weak1[0]["seconds"] / weak1[0]["slice"] if weak1 else float("nan")
    h_meas, d_meas, m_meas = (weak1[0]["heads"], weak1[0]["dim"], weak1[0]["features"]) if weak1 else (2, 64, 128)
    # Scale to the model layer by its flops per token (projections d*m, state products m*dv).
    flops = lambda h, d, m, dv: h * (d * m + m * dv)
    t_tok = t_tok_meas * flops(a.heads, a.d, a.features, a.dv) / flops(h_meas, d_meas, m_meas, d_meas)
    t_tok_node = t_tok / a.node_speedup
    print(f"measured: {t_tok_meas * 1e6:.3f} us per token per core (H={h_meas}, d=dv={d_meas}, m={m_meas}, causal fwd+bwd)")
    print(f"model layer: H={a.heads}, d={a.d}, F={a.features}, dv={a.dv}: {t_tok * 1e6:.3f} us/token/core, "
          f"{t_tok_node * 1e9:.1f} ns/token/node (node = {a.node_speedup:g} cores)")
    s = a.heads * (a.features * a.dv + a.features + 1) * 4
    extra = (a.d * a.features + a.features) * 4
    print(f"state per exchange s = {s / 1e6:.3f} MB per rank, whatever L is\n")
    print(f"{'nodes':>5} {'L':>10} {'L/node':>8} {'compute ms':>10} {'comm ms':>8} {'comm %':>7} {'LASP ring ms':>12}")
    rows = []
    for n in (1, 8, 32, 128):
        for L in (1e5, 1e6, 1e7):
            comp = t_tok_node * L / n
            comm = 3 * allgather(n, s, a.alpha, a.beta) + allgather(n, extra, a.alpha, a.beta) + 2 * allgather(n, 56, a.alpha, a.beta)
            ring = 2 * lasp_ring(n, s, a.alpha, a.beta)
            rows.append((n, L, comp, comm, ring))
            print(f"{n:5d} {L:10.0e} {L / n:8.0f} {comp * 1e3:10.2f} {comm * 1e3:8.3f} {100 * comm / (comp + comm):6.2f}% {ring * 1e3:12.3f}")
    if a.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for L in (1e5, 1e6, 1e7):
            pts = [(n, 100 * c / (p + c)) for n, LL, p, c, _ in rows if LL == L and n > 1]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"L = {L:.0e}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("nodes")
        ax.set_ylabel("communication share of the layer's time (%)")
        ax.set_title("kattn::dist sequence parallel: alpha-beta model")
        ax.legend()
        fig.tight_layout()
        fig.savefig(a.plot, dpi=120)
        print(f"\nplot: {a.plot}")


if __name__ == "__main__":
    main()
