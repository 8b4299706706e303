#!/usr/bin/env bash
# Every public header compiles on its own (one concept per header, no hidden include
# order). Thrust/CUDA headers are skipped here: they have their own build. The MPI
# communicator compiles with MPI's flags when pkg-config knows MPI (skipped otherwise);
# the NCCL one needs the CUDA toolkit and is built with the CUDA tests.
# Headers are checked in parallel, one compiler per core (syntax only, so each takes
# a second or two); every failure is reported, not just the first.
set -euo pipefail
root=$1
export KATTN_CXX=${CXX:-g++}
export KATTN_ROOT=$root
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export KATTN_TMP=$tmp
mpi_flags=$(pkg-config --cflags mpi 2>/dev/null || true)
export KATTN_MPI_FLAGS=$mpi_flags

check_one() {
    local h=$1 extra=()
    if [[ $h == kattn/dist/mpi_communicator.hpp ]]; then
        [[ -n $KATTN_MPI_FLAGS ]] || { echo "skip: $h (MPI not found by pkg-config)"; return 0; }
        read -r -a extra <<< "$KATTN_MPI_FLAGS"
    fi
    local tu=$KATTN_TMP/${h//\//_}.cpp
    printf '#include <%s>\n#include <%s>\nint main() { return 0; }\n' "$h" "$h" > "$tu"
    if ! "$KATTN_CXX" -std=c++20 -fopenmp -fsyntax-only -I"$KATTN_ROOT/include" "${extra[@]}" "$tu" 2> "$tu.err"; then
        echo "FAIL: $h does not compile on its own (or is not include-guarded):"
        head -20 "$tu.err"
        return 1
    fi
}
export -f check_one

cd "$root/include"
jobs=$(nproc 2>/dev/null || echo 2)
# xargs exits 123 when any check failed; the messages are already printed.
find kattn -name '*.hpp' ! -path '*/thrust*' ! -name 'nccl_communicator.hpp' | sort |
    xargs -P "$jobs" -n 1 bash -c 'check_one "$1"' _
