#!/usr/bin/env python3
"""kattn benchmark suite driver (bench/run calls it; standard library only).

Runs bench_attention (kattn simd, exact softmax, OpenBLAS SGEMM) and the PyTorch peer
(bench/peers/torch_attention.py, when torch imports) over the same configurations, merges
their records into one JSON file, prints one table, the crossover lengths and the
performance targets of the issue with the measured values.

  suite.py --exe bench_attention [--commit C] [--json FILE] [--no-torch] [--torch-python PY]
           [--config L=4096,d=64,m=256[,threads=1,2][,maps=favor,elu]] [bench_attention options...]

Without --config and without bench_attention options it runs the default suite (BLOCKS).
With them it runs one block: exactly that configuration (threads default: all), with the
SGEMM ceiling of each thread count and the PyTorch records of the same shapes.
"""

import argparse
import json
import math
import os
import pathlib
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent

# The default suite (about 15 minutes on 2 cores). Each block is one bench_attention process
# and, for the favor rows, one PyTorch process with the same shapes. "torch": False skips the
# peer for a block.
MAPS = "favor,trig,positive_nonstationary,elu,softmax_features"
BLOCKS = [
    # the target configuration, every map, 1 and 2 threads, exact softmax at the same L
    {"name": "targets", "args": ["--maps", MAPS, "--L", "4096", "--d", "64", "--m", "256", "--threads", "1,2",
                                 "--repeats", "5", "--budget", "60", "--softmax-budget", "15"]},
    # tokens/s and memory against L (favor; softmax up to L = 4096)
    {"name": "length sweep", "args": ["--maps", "favor", "--L", "256,1024,16384", "--d", "64", "--m", "256",
                                      "--threads", "1,2", "--repeats", "5", "--budget", "30",
                                      "--softmax-max-L", "4096", "--softmax-budget", "15"]},
    # linear scaling: L = 65,536 (2 threads; fewer repeats when a case would exceed the budget)
    {"name": "L = 65536", "args": ["--maps", "favor", "--L", "65536", "--d", "64", "--m", "256", "--threads", "2",
                                   "--repeats", "5", "--budget", "40", "--no-softmax"]},
    # head dimension and feature count (L = 4096, 2 threads)
    {"name": "d, m grid", "args": ["--maps", "favor", "--L", "4096", "--d", "32,128", "--m", "64,256",
                                   "--threads", "2", "--repeats", "3", "--budget", "30", "--no-softmax"]},
    {"name": "d, m grid (d = 64, m = 64)", "args": ["--maps", "favor", "--L", "4096", "--d", "64", "--m", "64",
                                                    "--threads", "2", "--repeats", "3", "--budget", "30",
                                                    "--no-softmax"]},
]
# bench/run --suite full: the whole grid of the issue, L = 256 … 65,536 × d ∈ {32, 64, 128} ×
# m ∈ {64, 256} × 1 and 2 threads (hours on 2 cores).
FULL_BLOCKS = [
    {"name": "full grid", "args": ["--maps", MAPS, "--L", "256,1024,4096,16384,65536", "--d", "32,64,128",
                                   "--m", "64,256", "--threads", "1,2", "--repeats", "5", "--budget", "60",
                                   "--softmax-max-L", "16384", "--softmax-budget", "30"]},
]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def torch_pythons(explicit):
    """The interpreters whose torch the peer runs with: --torch-python or $KATTN_TORCH_PYTHON
    alone when given; otherwise every one of bench/.venv (PyPI's wheel, scripts/install-bench-deps),
    python3 and /usr/bin/python3 (Debian's python3-torch) that imports torch, one per distinct
    torch installation. Each runs the same cases; per case the faster is the peer."""
    given = explicit or os.environ.get("KATTN_TORCH_PYTHON")
    cands = [given] if given else [str(HERE / ".venv" / "bin" / "python"), "python3", "/usr/bin/python3"]
    found, seen = [], set()
    for c in cands:
        try:
            r = subprocess.run([c, "-c", "import torch; print(torch.__version__); print(torch.__file__)"],
                               capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode != 0:
            continue
        version, where = r.stdout.split("\n")[:2]
        if where in seen:
            continue
        seen.add(where)
        found.append((c, version.strip()))
    return found


def parse_config(spec):
    """'L=4096,d=64,m=256,threads=1,2,maps=favor,elu' -> bench_attention options. A bare
    value after key=value continues that key's list."""
    out, key = {}, None
    for item in spec.split(","):
        if "=" in item:
            key, val = item.split("=", 1)
            key = key.strip()
            out[key] = [val]
        elif key:
            out[key].append(item)
    args = []
    names = {"L": "--L", "d": "--d", "m": "--m", "dv": "--dv", "threads": "--threads", "maps": "--maps",
             "heads": "--heads", "batch": "--batch", "repeats": "--repeats"}
    for k, v in out.items():
        if k not in names:
            sys.exit(f"suite: unknown key '{k}' in --config (known: {', '.join(names)})")
        args += [names[k], ",".join(v)]
    return args


def run_peers(tpys, tcmd_args, tmpdir, index):
    """Runs the PyTorch peer once per interpreter; returns the merged peer result: per case the
    faster record (with torch_python and torch_version saying whose it is), or None."""
    runs = []
    for j, (py, ver) in enumerate(tpys):
        tout = pathlib.Path(tmpdir) / f"torch{index}_{j}.json"
        tcmd = [py, str(HERE / "peers" / "torch_attention.py"), *tcmd_args, "--json", str(tout)]
        log(f"$ {shlex.join(tcmd)}")
        r = subprocess.run(tcmd, stdout=sys.stderr, env=dict(os.environ))
        if r.returncode == 0 and tout.exists():
            t = json.loads(tout.read_text())
            for rec in t["records"]:
                rec["torch_python"], rec["torch_version"] = py, ver
            runs.append((t, shlex.join(tcmd), py, ver))
        else:
            log(f"suite: the PyTorch peer ({py}) failed (exit {r.returncode}); no torch records from it")
    if not runs:
        return None
    best = {}
    for t, _, _, _ in runs:
        for rec in t["records"]:
            k = key(rec, "threads", "d", "m", "L", "causal", "pass")
            old = best.get(k)
            faster = rec.get("seconds") is not None and (old is None or old.get("seconds") is None or
                                                         rec["seconds"] < old["seconds"])
            if old is None or faster:
                best[k] = rec
    first = runs[0][0]
    return {**{k: v for k, v in first.items() if k != "records"},
            "peers": [{"python": py, "version": ver, "torch_blas": t.get("torch_blas"),
                       "torch_cpu_capability": t.get("torch_cpu_capability")} for t, _, py, ver in runs],
            "command": " ; ".join(c for _, c, _, _ in runs), "records": list(best.values())}


def run_block(block, exe, commit, tpys, no_torch, tmpdir, index):
    out = pathlib.Path(tmpdir) / f"block{index}.json"
    cmd = [str(exe), "--commit", commit, *block["args"], "--json", str(out)]
    log(f"\n## block {index + 1}: {block['name']}\n$ {shlex.join(cmd)}")
    t0 = time.time()
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    res = json.loads(out.read_text())
    res["block"] = block["name"]
    res["command"] = shlex.join(cmd)
    res["torch"] = None
    cfg = res["config"]
    if "favor" in cfg["maps"] and block.get("torch", True) and not no_torch and tpys:
        causal = any(r["causal"] for r in res["records"] if r["op"] == "kattn")
        targs = ["--L", ",".join(map(str, cfg["lengths"])), "--d", ",".join(map(str, cfg["d"])),
                 "--m", ",".join(map(str, cfg["m"])), "--threads", ",".join(map(str, cfg["threads"])),
                 "--heads", str(cfg["heads"]), "--batch", str(cfg["batch"]), "--repeats", str(cfg["repeats"]),
                 "--budget", str(cfg["budget_s"])]
        if cfg["dv"] != "d":
            targs += ["--dv", str(cfg["dv"])]
        if not causal:
            targs.append("--no-causal")
        res["torch"] = run_peers(tpys, targs, tmpdir, index)
    res["wall_s"] = time.time() - t0  # bench_attention and the PyTorch peer
    return res


def key(r, *fields):
    return tuple(r.get(f) for f in fields)


def merge(blocks):
    records = []
    ceilings = {}
    for b in blocks:
        ceil = {int(t): g for t, g in b["sgemm_ceiling_gflops"].items()}
        for t, g in ceil.items():
            ceilings.setdefault(t, []).append(g)
        for r in b["records"]:
            r = dict(r, block=b["block"])
            records.append(r)
        peak = {int(t): g for t, g in b.get("fma_peak_gflops", {}).items()}
        if b["torch"]:
            for r in b["torch"]["records"]:
                r = dict(r, block=b["block"])
                g = ceil.get(r["threads"])
                r["sgemm_fraction"] = r["gflops"] / g if (g and r.get("gflops")) else None
                p = peak.get(r["threads"])
                r["peak_fraction"] = r["gflops"] / p if (p and r.get("gflops")) else None
                records.append(r)
    return records, ceilings


def apply_ceilings(records):
    """Every record's sgemm_fraction against the best square SGEMM of the whole run at its
    thread count: on a shared machine a block's own SGEMM can be disturbed (it would flatter
    that block), and the machine's ceiling is what the fraction is meant to be against."""
    best, peak = {}, {}
    for r in records:
        if r["op"] == "sgemm" and r["map"] in ("square", "square_end") and not r.get("skipped"):
            best[r["threads"]] = max(best.get(r["threads"], 0.0), r["gflops"])
        if r["op"] == "fma_peak" and not r.get("skipped"):
            peak[r["threads"]] = max(peak.get(r["threads"], 0.0), r["gflops"])
    for r in records:
        if r.get("gflops") is None or r.get("skipped"):
            continue
        g = best.get(r["threads"])
        if g:
            r["sgemm_fraction"] = r["gflops"] / g
        p = peak.get(r["threads"])
        if p:
            r["peak_fraction"] = r["gflops"] / p
    return best, peak


def find(records, **kw):
    out = [r for r in records if all(r.get(k) == v for k, v in kw.items()) and not r.get("skipped")]
    return out[0] if out else None


def crossovers(records):
    out = []
    groups = {}
    for r in records:
        if r.get("skipped") or r["op"] not in ("kattn", "softmax"):
            continue
        if r["op"] == "kattn" and r["map"] != "favor":
            continue
        groups.setdefault(key(r, "threads", "d", "m", "causal", "pass"), {}).setdefault(r["L"], {})[r["op"]] = r
    for (t, d, m, causal, pss), byL in sorted(groups.items(), key=lambda kv: str(kv[0])):
        ratio = [(L, v["kattn"]["seconds"] / v["softmax"]["seconds"]) for L, v in sorted(byL.items())
                 if "kattn" in v and "softmax" in v]
        if len(ratio) < 1:
            continue
        c = {"threads": t, "d": d, "m": m, "causal": causal, "pass": pss, "map": "favor", "ratios": ratio}
        for i, (L, q) in enumerate(ratio):
            if q < 1:
                c["first_faster_L"] = L
                if i > 0:
                    (L0, q0), (L1, q1) = ratio[i - 1], ratio[i]
                    x0, x1, y0, y1 = math.log(L0), math.log(L1), math.log(q0), math.log(q1)
                    c["interpolated_L"] = math.exp(x0 - y0 * (x1 - x0) / (y1 - y0))
                break
        out.append(c)
    return out


def targets(records):
    """The issue's targets at favor, B = 1, H = 8, L = 4096, d = 64, m = 256, per thread count."""
    res = []
    base = dict(L=4096, d=64, m=256, heads=8, batch=1)

    def add(name, value, goal, ok, detail):
        res.append({"target": name, "value": value, "goal": goal, "met": ok, "detail": detail})

    threads = sorted({r["threads"] for r in records if r["op"] == "kattn" and r["L"] == 4096})
    for t in threads:
        g = lambda op, mp, causal, pss, **o: find(records, op=op, map=mp, causal=causal, threads=t, **{**base, **o},
                                                   **{"pass": pss})
        nf = g("kattn", "favor", False, "forward")
        if not nf:
            continue
        if nf.get("peak_fraction") is not None:
            add(f"non-causal forward, fraction of the FMA peak ({t} thr)", nf["peak_fraction"], ">= 0.75",
                nf["peak_fraction"] >= 0.75, f"{nf['gflops']:.1f} GFLOP/s")
        add(f"non-causal forward, fraction of SGEMM ({t} thr)", nf["sgemm_fraction"], "(informational)", None,
            f"{nf['gflops']:.1f} GFLOP/s")
        tf = g("torch", "favor", False, "forward")
        if tf:
            q = tf["seconds"] / nf["seconds"]
            add(f"non-causal forward, speed-up over PyTorch ({t} thr)", q, ">= 3", q >= 3,
                f"kattn {nf['seconds']:.4g} s, torch {tf['seconds']:.4g} s")
        for pss in ("forward", "forward_backward"):
            tt = g("torch", "favor", False, pss) if pss != "forward" else None
            if tt:
                k = g("kattn", "favor", False, pss)
                q = tt["seconds"] / k["seconds"]
                add(f"non-causal {pss}, speed-up over PyTorch ({t} thr)", q, "(informational)", None,
                    f"kattn {k['seconds']:.4g} s, torch {tt['seconds']:.4g} s")
        cf = g("kattn", "favor", True, "forward")
        if cf:
            q = cf["seconds"] / nf["seconds"]
            add(f"causal forward / non-causal forward ({t} thr)", q, "<= 1.2", q <= 1.2,
                f"{cf['seconds']:.4g} s / {nf['seconds']:.4g} s")
        for causal, goal in ((False, 2.7), (True, 3.5)):
            f = g("kattn", "favor", causal, "forward")
            fb = g("kattn", "favor", causal, "forward_backward")
            if f and fb:
                q = fb["seconds"] / f["seconds"]
                add(f"{'causal' if causal else 'non-causal'} forward+backward / forward ({t} thr)", q, f"<= {goal}",
                    q <= goal, f"{fb['seconds']:.4g} s / {f['seconds']:.4g} s")
            bs = g("kattn", "favor", causal, "backward_saved")
            if f and bs:
                q = bs["seconds"] / f["seconds"]
                add(f"{'causal' if causal else 'non-causal'} backward call of a step / forward ({t} thr)", q,
                    "(informational)", None, f"{bs['seconds']:.4g} s / {f['seconds']:.4g} s")
        for causal in (False, True):
            for pss in ("forward", "forward_backward"):
                a = g("kattn", "favor", causal, pss)
                b = g("kattn", "favor", causal, pss, L=65536)
                if a and b:
                    q = b["seconds"] / a["seconds"]
                    add(f"t(L=65536)/t(L=4096), {'causal' if causal else 'non-causal'} {pss} ({t} thr)", q, "<= 17",
                        q <= 17, f"{b['seconds']:.4g} s / {a['seconds']:.4g} s")
        sm = [r for r in records if r["op"] == "softmax" and r["threads"] == t and not r.get("skipped")
              and r["d"] == 64 and not r["causal"] and r["pass"] == "forward"]
        if sm:
            best = max(sm, key=lambda r: r["L"])
            add(f"exact softmax forward, fraction of SGEMM, L={best['L']} ({t} thr)", best["sgemm_fraction"],
                ">= 0.50", best["sgemm_fraction"] >= 0.5, f"{best['gflops']:.1f} GFLOP/s")
        for mp in sorted({r["map"] for r in records if r["op"] == "kattn" and r["map"] != "favor"}):
            for causal in (False, True):
                for pss in ("forward", "forward_backward"):
                    a = g("kattn", mp, causal, pss)
                    f = g("kattn", "favor", causal, pss)
                    if a and f:
                        q = a["seconds"] / f["seconds"]
                        add(f"{mp} / favor, {'causal' if causal else 'non-causal'} {pss} ({t} thr)", q, "<= 1.5",
                            q <= 1.5, f"{a['seconds']:.4g} s / {f['seconds']:.4g} s")
    return res


def mb(x):
    return f"{x / 2**20:.0f}" if x and x > 0 else "-"


def print_table(records):
    rows = [r for r in records if r["op"] in ("kattn", "kattn_reference", "softmax", "torch", "fma_peak") or
            (r["op"] == "sgemm" and r["map"] in ("square", "square_end"))]
    torch_by = {key(r, "threads", "d", "m", "L", "causal", "pass"): r for r in records
                if r["op"] == "torch" and not r.get("skipped")}
    hdr = (f"{'op':<10} {'map':<23} {'causal':<6} {'pass':<16} {'L':>6} {'d':>4} {'m':>4} {'thr':>3} {'rep':>3} "
           f"{'median_s':>10} {'GFLOP/s':>8} {'%peak':>6} {'%SGEMM':>7} {'tokens/s':>9} {'peakMB':>7} {'+MB':>6} "
           f"{'torch/x':>7}")
    print(hdr)
    print("-" * len(hdr))
    for r in sorted(rows, key=lambda r: (r["threads"], r["d"] or 0, r["m"] or 0, r["L"], r["causal"], r["pass"],
                                         {"fma_peak": -1, "sgemm": 0, "kattn": 1, "kattn_reference": 2, "torch": 3,
                                          "softmax": 4}[r["op"]], r["map"])):
        if r.get("skipped"):
            continue
        vs = ""
        if r["op"] == "kattn" and r["map"] == "favor":
            t = torch_by.get(key(r, "threads", "d", "m", "L", "causal", "pass"))
            if t:
                vs = f"{t['seconds'] / r['seconds']:.2f}"
        frac = r.get("sgemm_fraction")
        pk = r.get("peak_fraction")
        tok = r.get("tokens_per_s")
        extra = (r["peak_rss_bytes"] - r.get("rss_before_bytes", 0)) if r.get("peak_rss_is_per_case") else -1
        L = r["L"] if r["op"] != "sgemm" else r["sgemm_shape"][0]
        print(f"{r['op']:<10} {r['map']:<23} {'yes' if r['causal'] else 'no':<6} {r['pass']:<16} {L:>6} "
              f"{r['d']:>4} {r['m']:>4} {r['threads']:>3} {r['repeats']:>3} {r['seconds']:>10.4g} "
              f"{r['gflops']:>8.1f} {'' if pk is None else f'{100 * pk:.0f}%':>6} "
              f"{'' if frac is None else f'{100 * frac:.0f}%':>7} "
              f"{'' if not tok else f'{tok:.3g}':>9} {mb(r['peak_rss_bytes']):>7} {mb(extra):>6} {vs:>7}")


def main():
    ap = argparse.ArgumentParser(description="kattn benchmark suite", add_help=True)
    ap.add_argument("--exe", required=True)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--json", default="")
    ap.add_argument("--config", default="")
    ap.add_argument("--suite", choices=["default", "full"], default="default")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--torch-python", default="")
    ap.add_argument("--from", dest="from_file", default="",
                    help="print the table, crossovers and targets of an existing results file (runs nothing)")
    a, rest = ap.parse_known_args()

    if a.from_file:
        j = json.loads(pathlib.Path(a.from_file).read_text())
        fake = [{"machine": j["machine"], "date": j["date"], "compiler": j["compiler"], "notes": j["notes"][:5],
                 "block": b["name"], "command": b["command"], "config": b["config"], "wall_s": b["wall_s"],
                 "sgemm_ceiling_gflops": b["sgemm_ceiling_gflops"],
                 "sgemm_ceiling_start_end_gflops": b["sgemm_ceiling_start_end_gflops"],
                 "torch": {"command": b["torch_command"], **(j["torch"] or {})} if b["torch_command"] else None}
                for b in j["blocks"]]
        a.commit = j["commit"]
        tor = j.get("torch") or {}
        summarise(j["records"], {int(t): g for t, g in j["sgemm_ceiling_gflops"].items()}, fake, a, time.time(),
                  tor.get("python"), tor.get("version"))
        return

    if a.config or rest:
        blocks = [{"name": "configuration" if a.config else "command line",
                   "args": parse_config(a.config) + rest + (["--no-reference"] if a.config else [])}]
    else:
        blocks = FULL_BLOCKS if a.suite == "full" else BLOCKS
        # the scalar reference backend is an oracle for the tests, not a peer: off in the suite
        blocks = [dict(b, args=b["args"] + ["--no-reference"]) for b in blocks]

    tpys = [] if a.no_torch else torch_pythons(a.torch_python)
    tpy = " ; ".join(p for p, _ in tpys) or None
    tver = " ; ".join(v for _, v in tpys) or None
    if a.no_torch:
        log("suite: PyTorch peer off (--no-torch)")
    elif not tpy:
        log("suite: PyTorch not found (tried --torch-python, $KATTN_TORCH_PYTHON, bench/.venv, python3): the peer is "
            "skipped; scripts/install-bench-deps installs a CPU torch into bench/.venv")
    else:
        log(f"suite: PyTorch {tver} from {tpy}")

    t0 = time.time()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, b in enumerate(blocks):
            results.append(run_block(b, a.exe, a.commit, tpys, a.no_torch, tmp, i))
    records, ceilings = merge(results)
    summarise(records, ceilings, results, a, t0, tpy, tver)


def summarise(records, ceilings, results, a, t0, tpy, tver):
    best, peak = apply_ceilings(records)
    cross = crossovers(records)
    tg = targets(records)

    print("\n# kattn benchmark suite: %s, %s, commit %s" % (results[0]["machine"]["cpu"], results[0]["date"], a.commit))
    print("# SGEMM (OpenBLAS, 2048^3) GFLOP/s by threads: " +
          ", ".join(f"{t}: {', '.join(f'{g:.1f}' for g in gs)}" for t, gs in sorted(ceilings.items())) +
          " (before and after each block's cases); %SGEMM uses the best per thread count: " +
          ", ".join(f"{t}: {g:.1f}" for t, g in sorted(best.items())))
    print("# FMA peak (register-only FMA loop, bench/fma_peak.hpp) GFLOP/s by threads, the best of the run: " +
          (", ".join(f"{t}: {g:.1f}" for t, g in sorted(peak.items())) or "not measured") +
          "; %peak is against it")
    print("# +MB: peak RSS of the case above the resident size before it; torch/x: torch time / kattn favor time\n")
    print_table(records)
    print("\n# crossover (kattn favor faster than exact softmax):")
    for c in cross:
        where = (f"from L = {c['first_faster_L']}" + (f" (interpolated L ~ {c['interpolated_L']:.0f})"
                                                     if "interpolated_L" in c else " (shortest measured)")
                 if "first_faster_L" in c else "not reached")
        print(f"#   {c['threads']} thr d={c['d']} m={c['m']} {'causal' if c['causal'] else 'non-causal'} "
              f"{c['pass']}: {where}")
    print("\n# targets (favor, B=1, H=8, L=4096, d=64, m=256, float):")
    for t in tg:
        mark = "info" if t["met"] is None else ("met " if t["met"] else "MISS")
        print(f"#   [{mark}] {t['target']}: {t['value']:.4g} (goal {t['goal']}; {t['detail']})")
    print(f"# wall time {time.time() - t0:.0f} s")

    if a.json:
        out = {"machine": results[0]["machine"], "date": results[0]["date"], "compiler": results[0]["compiler"],
               "commit": a.commit,
               "torch": ({"python": tpy, "version": tver,
                          **{k: v for k, v in next((b["torch"] for b in results if b["torch"]), {}).items()
                             if k != "records" and k != "command"}} if tpy else None),
               "sgemm_ceiling_gflops": {str(t): gs for t, gs in ceilings.items()},
               "sgemm_ceiling_used_gflops": {str(t): g for t, g in best.items()},
               "fma_peak_used_gflops": {str(t): g for t, g in peak.items()},
               "blocks": [{"name": b["block"], "command": b["command"], "config": b["config"], "wall_s": b["wall_s"],
                           "sgemm_ceiling_gflops": b["sgemm_ceiling_gflops"],
                           "sgemm_ceiling_start_end_gflops": b["sgemm_ceiling_start_end_gflops"],
                           "torch_command": b["torch"]["command"] if b["torch"] else None} for b in results],
               "notes": results[0]["notes"] + [
                   "torch records: bench/peers/torch_attention.py, FAVOR+ in PyTorch (own Omega draw), same shapes "
                   "and thread count; run with every torch installation found (bench/.venv: PyPI; /usr/bin/python3: "
                   "Debian), per case the faster (torch_python, torch_version say which)",
                   "suite sgemm_fraction (all ops): gflops / sgemm_ceiling_used_gflops[threads], the best square "
                   "SGEMM of the whole run at that thread count",
                   "suite peak_fraction (all ops): gflops / fma_peak_used_gflops[threads], the best FMA peak "
                   "(bench/fma_peak.hpp) of the whole run at that thread count"],
               "crossovers": cross, "targets": tg, "records": records}
        pathlib.Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
        print(f"# wrote {a.json}")


if __name__ == "__main__":
    main()
