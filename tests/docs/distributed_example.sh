#!/usr/bin/env bash
# Compiles the first C++ program of docs/distributed.md against MPI and runs it on 2 ranks,
# so the documented use of kattn::dist::sequence_parallel cannot drift from the API.
# Usage: distributed_example.sh <source root> <mpirun>
set -euo pipefail
root=$1
mpirun=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk '/^```cpp$/{inside=1; next} /^```$/{if (inside) exit} inside' "$root/docs/distributed.md" > "$tmp/dist.cpp"
grep -q 'int main' "$tmp/dist.cpp" || { echo "docs/distributed.md: the first \`\`\`cpp block is not a program"; exit 1; }
read -r -a mpi_flags <<< "$(pkg-config --cflags --libs mpi)"
${CXX:-g++} -std=c++20 -O2 -fopenmp -DOMPI_SKIP_MPICXX=1 -I"$root/include" "$tmp/dist.cpp" "${mpi_flags[@]}" -o "$tmp/dist"
OMP_NUM_THREADS=1 "$mpirun" -np 2 --oversubscribe "$tmp/dist"
echo "docs/distributed.md example compiled and ran on 2 ranks"
