#!/usr/bin/env python3
"""Make a PyPI (CUDA) torch wheel importable where some nvidia-* libraries are missing.

PyPI's Linux x86-64 `torch` wheel is a CUDA build. Its CPU library (libtorch_cpu.so, with
MKL and oneDNN inside) is what a CPU benchmark runs, but `import torch` also loads
libtorch_cuda.so, which links cuBLAS, cuDNN, cuFFT, cuSPARSE, cuSPARSELt, NCCL, NVRTC,
cuFile and NVSHMEM: several GB of nvidia-* wheels that `pip install torch` would pull in.
scripts/install-bench-deps installs torch with --no-deps plus only nvidia-cuda-runtime and
nvidia-cuda-cupti (14 MB; libtorch_cpu.so itself links libcudart and libcupti), then runs
this script, which:

  1. lists, with ldd, the shared libraries that torch/_C*.so and libtorch_global_deps.so need and
     the dynamic loader cannot find (the CUDA toolkit in /usr/local/cuda-*/lib may provide
     some of them on a given machine; whatever is found is used as is);
  2. writes a stub for each missing one into torch/lib/ (on the wheel's $ORIGIN rpath):
     a shared library with that soname, the symbol-version nodes torch's libraries require
     of it, and every symbol they import from it, each a function that prints its name and
     aborts if it is ever called (an `is_*available` query returns 0 instead).

Nothing in torch is modified; CUDA is unusable (torch.cuda.is_available() is False without a
GPU anyway) and every CPU operator is the wheel's own. Idempotent: it only stubs what is
missing, and a stub, once written, is found. Meant for the benchmark virtual environment.

usage: python torch_cpu_only.py [TORCH_DIR]   (default: torch's directory in this interpreter)
"""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import sysconfig
import tempfile

RETURNS_ZERO = re.compile(r"(is_\w*available|Available)")


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def ldd(path):
    """(found paths, missing sonames) of the transitive dependencies of path."""
    found, missing = [], []
    for line in run("ldd", str(path)).splitlines():
        m = re.match(r"\s*(\S+) => (not found|(\S+) \(0x)", line)
        if m and m.group(2) == "not found":
            missing.append(m.group(1))
        elif m:
            found.append(m.group(3))
    return found, missing


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", run("readelf", "-dW", str(path)))


def version_needs(path):
    """{version name: file} from the .gnu.version_r section of path."""
    out, file = {}, None
    for line in run("readelf", "-VW", str(path)).splitlines():
        m = re.search(r"File: (\S+)", line)
        if m:
            file = m.group(1)
            continue
        m = re.search(r"Name: (\S+)", line)
        if m and file:
            out[m.group(1)] = file
    return out


def undefined(path):
    """(name, version or None) of the strong undefined dynamic symbols of path."""
    out = []
    for line in run("nm", "-D", "--undefined-only", str(path)).splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            name, _, ver = parts[1].partition("@")
            out.append((name, ver.lstrip("@") or None))
    return out


def defined(path):
    names = set()
    for line in run("nm", "-D", "--defined-only", str(path)).splitlines():
        parts = line.split()
        if len(parts) == 3:
            names.add(parts[2].split("@")[0])
    return names


def stub_source(functions):
    s = ["#include <stdio.h>", "#include <stdlib.h>",
         "static void unavailable(const char* name) {",
         '    fprintf(stderr, "torch (CPU-only install for kattn\'s benchmarks): %s was called; it belongs to a '
         'CUDA library that is not installed\\n", name);',
         "    abort();", "}"]
    for f in sorted(functions):
        if RETURNS_ZERO.search(f):
            s.append(f"long {f}(void) {{ return 0; }}")
        else:
            s.append(f'void {f}(void) {{ unavailable("{f}"); }}')
    return "\n".join(s) + "\n"


def build(path, soname, functions):
    """functions: {name: version node or None}."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "stub.c").write_text(stub_source(functions))
        cmd = ["gcc", "-shared", "-fPIC", "-O1", "-w", "-fno-builtin", "-o", str(tmp / "lib.so"), str(tmp / "stub.c"),
               f"-Wl,-soname,{soname}"]
        nodes = sorted({v for v in functions.values() if v})
        if nodes:
            script = ""
            for i, v in enumerate(nodes):
                syms = [f for f, fv in functions.items() if fv == v or (i == 0 and fv is None)]
                script += f"{v} {{ global: {' '.join(s + ';' for s in sorted(syms))} local: *; }};\n"
            (tmp / "ver.map").write_text(script)
            cmd.append(f"-Wl,--version-script={tmp / 'ver.map'}")
        subprocess.run(cmd, check=True)
        os.replace(tmp / "lib.so", path)
    print(f"torch_cpu_only: stub {path.name}: {len(functions)} symbols, version nodes {nodes or '-'}")


def main():
    if len(sys.argv) > 1:
        torch_dir = pathlib.Path(sys.argv[1])
    else:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            sys.exit("torch_cpu_only: torch is not installed in this interpreter")
        torch_dir = pathlib.Path(list(spec.submodule_search_locations)[0])
    lib = torch_dir / "lib"
    # what `import torch` loads (libraries torch dlopens only for CUDA work are left alone)
    roots = list(torch_dir.glob("_C*.so")) + [lib / "libtorch_global_deps.so"]
    roots = [r for r in roots if r.exists()]

    missing, found = set(), set()
    for r in roots:
        f, m = ldd(r)
        found.update(f)
        missing.update(m)
    if not missing:
        print("torch_cpu_only: every library torch links is found; nothing to do")
        return

    # the wheel's libraries that will be loaded, and what they import from the missing ones
    wheel_libs = [p for p in roots + [pathlib.Path(x) for x in found] if str(p).startswith(str(torch_dir))]
    provided = set()
    for p in found:
        provided |= defined(p)
    for p in wheel_libs:
        provided |= defined(p)
    exe = pathlib.Path(sysconfig.get_config_var("BINDIR") or "/usr/bin") / f"python{sysconfig.get_python_version()}"
    if exe.exists():
        provided |= defined(exe.resolve())

    per_lib = {so: {} for so in missing}  # soname -> {symbol: version node or None}
    loose = set()  # unversioned imports found nowhere: go into the first stub (binding is global)
    for p in wheel_libs:
        vneeds = version_needs(p)
        direct_missing = [so for so in needed(p) if so in missing]
        if not direct_missing:
            continue
        for sym, ver in undefined(p):
            if ver and vneeds.get(ver) in missing:
                per_lib[vneeds[ver]][sym] = ver
            elif ver is None and sym not in provided:
                loose.add(sym)
    first = sorted(missing)[0]
    taken = set().union(*(set(d) for d in per_lib.values()))
    for sym in loose - taken:
        per_lib[first][sym] = None
    for so in sorted(missing):
        build(lib / so, so, per_lib[so])


if __name__ == "__main__":
    main()
