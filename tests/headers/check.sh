#!/usr/bin/env bash
# Every public header compiles on its own (one concept per header, no hidden include
# order). Thrust/CUDA headers are skipped here: they have their own build.
set -euo pipefail
root=$1
cxx=${CXX:-g++}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
cd "$root/include"
for h in $(find kattn -name '*.hpp' ! -path '*/thrust*' | sort); do
    printf '#include <%s>\n#include <%s>\nint main() { return 0; }\n' "$h" "$h" > "$tmp/tu.cpp"
    if ! "$cxx" -std=c++20 -fopenmp -fsyntax-only -I"$root/include" "$tmp/tu.cpp" 2> "$tmp/err"; then
        echo "FAIL: $h does not compile on its own (or is not include-guarded):"
        head -20 "$tmp/err"
        fail=1
    fi
done
exit $fail
