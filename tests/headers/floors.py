#!/usr/bin/env python3
"""The include floors of kattn (docs/design.md §3): a header includes only headers on its
own floor or below, so a parameter's walk from an operator down to the kernels never climbs
back. Usage: floors.py <source root>. Exit 1 and list the offending includes otherwise."""
import os
import re
import sys

FLOORS = [  # (path prefix relative to include/kattn, floor)
    ("fwd.hpp", 0), ("core/", 0),
    ("linalg/", 1), ("io/", 1), ("optim/", 1),
    ("dist/communicator.hpp", 1), ("dist/self_communicator.hpp", 1),
    ("dist/mpi_communicator.hpp", 1), ("dist/nccl_communicator.hpp", 1),
    ("features/", 2), ("samplers/", 2),
    ("backends/", 3), ("concepts.hpp", 3),
    ("attention/", 4), ("dist/", 4),
    ("nn/", 5),
    ("kattn.hpp", 6),
]


def floor_of(rel):
    for prefix, f in FLOORS:
        if rel == prefix or rel.startswith(prefix):
            return f
    return None


def main(root):
    base = os.path.join(root, "include", "kattn")
    bad, unknown, checked = [], [], 0
    for dirpath, _, files in os.walk(base):
        for name in sorted(files):
            if not name.endswith((".hpp", ".cuh")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, base)
            src = floor_of(rel)
            if src is None:
                unknown.append(rel)
                continue
            with open(path, encoding="utf-8") as fh:
                for lineno, line in enumerate(fh, 1):
                    m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                    if not m:
                        continue
                    target = os.path.relpath(os.path.normpath(os.path.join(dirpath, m.group(1))), base)
                    dst = floor_of(target)
                    checked += 1
                    if dst is None:
                        unknown.append(f"{rel}:{lineno} -> {target}")
                    elif dst > src:
                        bad.append(f"{rel}:{lineno} (floor {src}) includes {target} (floor {dst})")
    for u in unknown:
        print(f"floors: not on any floor: {u}")
    for b in bad:
        print(f"floors: climbs up: {b}")
    print(f"floors: {checked} includes checked, {len(bad)} climb, {len(unknown)} unplaced")
    return 1 if bad or unknown or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
