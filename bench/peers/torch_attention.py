#!/usr/bin/env python3
"""PyTorch CPU peer of bench_attention: FAVOR+ linear attention written in torch.

Same problem as kattn's `features::favor` with `backends::simd`, float32, [B, H, L, d] inputs:

  x̂ = d^{-1/4} x,  u = x̂ Ω (Ω: d × m, shared by the heads),
  φ(x) = exp(u − |x̂|²/2 − c) / √m    c: per-row max of u for queries, per-head max for keys
  non-causal: out = φ(Q) [φ(K)ᵀ V, φ(K)ᵀ 1] → numerator / max(denominator, eps)
  causal:     the prefix sums, computed chunk-wise (the usual blocked form of causal linear
              attention): within a chunk of c tokens the masked c × c product
              tril(φ(Q_c) φ(K_c)ᵀ) [V_c, 1], across chunks φ(Q_c) · (the exclusive prefix sum of
              the chunks' φ(K)ᵀ [V, 1]); c = max(64, L / 512), which bounds the state tensor.

Ω is this script's own draw (orthogonal Gaussian blocks by QR, row norms χ_d, seed 0), not
the C++ bench's: only the timing is compared, and Ω's values do not change the work done.
Inputs are N(0, 1) like the C++ bench's.

Passes, timed like bench_attention: `forward` is one forward under torch.no_grad();
`forward_backward` is a forward with autograd recording plus out.backward(dout), giving the
gradients of q, k, v and Ω (kattn's backward() also returns ∂Ω). Median of --repeats runs
after one warm-up; fewer repeats when the warm-up shows the case would exceed --budget.
torch.set_num_threads(threads) for each thread count (and 1 inter-op thread).
Peak RSS per case: VmHWM after resetting it through /proc/self/clear_refs before the case.

usage: torch_attention.py --L 1024,4096 --d 64 --m 256 --threads 1,2 --json out.json
"""

import argparse
import json
import math
import statistics
import sys
import time

from procfs import proc_status_bytes, reset_peak_rss

try:
    import torch
except Exception as e:  # noqa: BLE001 - any import failure means: no peer here
    print(f"torch_attention: torch is not available ({e.__class__.__name__}: {e})", file=sys.stderr)
    sys.exit(3)


def cpu_capability():
    """torch's CPU kernel level (AVX512, AVX2, ...); torch < 2.0 has no query for it."""
    cpu = getattr(torch.backends, "cpu", None)
    if cpu is not None and hasattr(cpu, "get_cpu_capability"):
        return cpu.get_cpu_capability()
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage:" in line:
            return line.split(":", 1)[1].strip()
    return "unknown"


def orthogonal_gaussian(d, m, gen):
    blocks = []
    for _ in range((m + d - 1) // d):
        g = torch.randn(d, d, generator=gen, dtype=torch.float64)
        qm, _ = torch.linalg.qr(g)
        blocks.append(qm.T)
    w = torch.cat(blocks, 0)[:m]  # m × d, orthonormal rows within each block
    norms = torch.randn(m, d, generator=gen, dtype=torch.float64).norm(dim=1, keepdim=True)
    return (w * norms).T.contiguous().float()  # d × m


def favor_features(x, omega, is_query):
    d = x.shape[-1]
    m = omega.shape[-1]
    xs = x * d**-0.25
    u = xs @ omega  # [B, H, L, m]
    sq = 0.5 * (xs * xs).sum(-1, keepdim=True)
    if is_query:
        c = u.amax(-1, keepdim=True)
    else:
        c = u.amax(dim=(-2, -1), keepdim=True)
    return torch.exp(u - sq - c.detach()) * m**-0.5


def linear_attention(q, k, v, omega, causal, eps=1e-6):
    pq = favor_features(q, omega, True)
    pk = favor_features(k, omega, False)
    ones = torch.ones(v.shape[:-1] + (1,), dtype=v.dtype)
    v1 = torch.cat([v, ones], -1)  # [B, H, L, dv + 1]: numerator and denominator together
    if not causal:
        s = pk.transpose(-2, -1) @ v1  # [B, H, m, dv + 1]
        nd = pq @ s
    else:
        B, H, L, m = pq.shape
        c = max(64, L // 512)
        c = min(c, L)
        while L % c:
            c //= 2
        n = L // c
        qc = pq.reshape(B, H, n, c, m)
        kc = pk.reshape(B, H, n, c, m)
        vc = v1.reshape(B, H, n, c, -1)
        kv = kc.transpose(-2, -1) @ vc  # [B, H, n, m, dv + 1]
        prefix = torch.cumsum(kv, dim=2) - kv  # exclusive prefix over chunks
        inter = qc @ prefix
        mask = torch.ones(c, c, dtype=torch.bool).tril()
        a = (qc @ kc.transpose(-2, -1)).masked_fill(~mask, 0.0)
        intra = a @ vc
        nd = (inter + intra).reshape(B, H, L, -1)
    num, den = nd[..., :-1], nd[..., -1:]
    return num / den.clamp_min(eps)


def time_median(fn, repeats, budget):
    t0 = time.perf_counter()
    fn()
    warm = time.perf_counter() - t0
    n = repeats
    if warm > 0 and warm * (1 + repeats) > budget:
        n = max(1, int((budget - warm) / warm))
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), n


def ints(s):
    return [int(x) for x in s.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--L", type=ints, default=[256, 1024, 4096, 16384, 65536])
    ap.add_argument("--d", type=ints, default=[64])
    ap.add_argument("--dv", type=int, default=0, help="value dimension (default: = d)")
    ap.add_argument("--m", type=ints, default=[256])
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=ints, default=[0], help="0 = torch's default")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget", type=float, default=120.0)
    ap.add_argument("--no-causal", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default="")
    a = ap.parse_args()

    torch.set_num_interop_threads(1)
    default_threads = torch.get_num_threads()
    records = []
    print(f"# torch {torch.__version__} ({torch.__file__}), {default_threads} threads by default", flush=True)
    print(f"{'op':<6} {'map':<6} {'causal':<6} {'pass':<16} {'L':>6} {'d':>4} {'m':>4} {'thr':>3} {'rep':>3} "
          f"{'median_s':>11} {'GFLOP/s':>9} {'peakRSS':>9}", flush=True)
    for threads in a.threads:
        t = threads if threads > 0 else default_threads
        torch.set_num_threads(t)
        for d in a.d:
            dv = a.dv or d
            for m in a.m:
                gen = torch.Generator().manual_seed(a.seed)
                omega = orthogonal_gaussian(d, m, gen)
                for L in a.L:
                    shape = (a.batch, a.heads, L)
                    q = torch.randn(shape + (d,), generator=gen)
                    k = torch.randn(shape + (d,), generator=gen)
                    v = torch.randn(shape + (dv,), generator=gen)
                    dout = torch.randn(shape + (dv,), generator=gen)
                    fwd_flops = a.batch * a.heads * (2.0 * 2 * L * d * m + 2.0 * 2 * L * m * dv)
                    for causal in ([False] if a.no_causal else [False, True]):
                        for pss in ("forward", "forward_backward"):
                            if pss == "forward":
                                def fn():
                                    with torch.no_grad():
                                        linear_attention(q, k, v, omega, causal)
                            else:
                                qg, kg, vg, og = (x.detach().requires_grad_(True) for x in (q, k, v, omega))

                                def fn():
                                    for x in (qg, kg, vg, og):
                                        x.grad = None
                                    out = linear_attention(qg, kg, vg, og, causal)
                                    out.backward(dout)
                            rec = {"op": "torch", "map": "favor", "causal": causal, "pass": pss, "L": L, "d": d,
                                   "dv": dv, "m": m, "heads": a.heads, "batch": a.batch, "threads": t,
                                   "rss_before_bytes": proc_status_bytes("VmRSS"), "skipped": False, "note": ""}
                            per_case = reset_peak_rss() and proc_status_bytes("VmHWM") > 0
                            try:
                                sec, n = time_median(fn, a.repeats, a.budget)
                            except RuntimeError as e:  # e.g. out of memory
                                sec, n = math.nan, 0
                                rec.update(skipped=True, note=f"error: {e}"[:200])
                            flops = fwd_flops * (3.0 if pss == "forward_backward" else 1.0)
                            rec.update(repeats=n, seconds=None if math.isnan(sec) else sec, flops=flops,
                                       gflops=None if math.isnan(sec) else flops / sec * 1e-9,
                                       tokens_per_s=None if math.isnan(sec) else a.batch * L / sec,
                                       peak_rss_bytes=proc_status_bytes("VmHWM") if per_case else -1,
                                       peak_rss_is_per_case=per_case)
                            records.append(rec)
                            gf = "-" if rec["gflops"] is None else f"{rec['gflops']:.1f}"
                            s = "skipped" if rec["seconds"] is None else f"{sec:.3e}"
                            print(f"{'torch':<6} {'favor':<6} {'yes' if causal else 'no':<6} {pss:<16} {L:>6} {d:>4} "
                                  f"{m:>4} {t:>3} {n:>3} {s:>11} {gf:>9} "
                                  f"{rec['peak_rss_bytes'] / 2**20:>7.0f}MB  {rec['note']}", flush=True)
                            del fn
                            if pss == "forward_backward":
                                del qg, kg, vg, og
                    del q, k, v, dout
    if a.json:
        cfg = torch.__config__.show()
        blas = "mkl" if "BLAS_INFO=mkl" in cfg else ("openblas" if "openblas" in cfg.lower() else "other")
        with open(a.json, "w") as f:
            json.dump({"torch_version": torch.__version__, "torch_blas": blas,
                       "torch_cpu_capability": cpu_capability(),
                       "omega": "own draw (orthogonal Gaussian, seed %d), not the C++ bench's" % a.seed,
                       "records": records}, f, indent=2)
        print(f"# wrote {a.json}", flush=True)


if __name__ == "__main__":
    main()
