#!/usr/bin/env bash
# Every public header compiles on its own (one concept per header, no hidden include
# order). Thrust/CUDA headers are skipped here: they have their own build. The MPI
# communicator compiles with MPI's flags when pkg-config knows MPI (skipped otherwise);
# the NCCL one needs the CUDA toolkit and is built with the CUDA tests.
set -euo pipefail
root=$1
cxx=${CXX:-g++}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
cd "$root/include"
mpi_flags=$(pkg-config --cflags mpi 2>/dev/null || true)
for h in $(find kattn -name '*.hpp' ! -path '*/thrust*' ! -name 'nccl_communicator.hpp' | sort); do
    extra=()
    if [[ $h == kattn/dist/mpi_communicator.hpp ]]; then
        [[ -n $mpi_flags ]] || { echo "skip: $h (MPI not found by pkg-config)"; continue; }
        read -r -a extra <<< "$mpi_flags"
    fi
    printf '#include <%s>\n#include <%s>\nint main() { return 0; }\n' "$h" "$h" > "$tmp/tu.cpp"
    if ! "$cxx" -std=c++20 -fopenmp -fsyntax-only -I"$root/include" "${extra[@]}" "$tmp/tu.cpp" 2> "$tmp/err"; then
        echo "FAIL: $h does not compile on its own (or is not include-guarded):"
        head -20 "$tmp/err"
        fail=1
    fi
done
exit $fail
