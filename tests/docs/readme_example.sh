#!/usr/bin/env bash
# Compiles and runs the C++ example of README.md, so the README cannot drift from the API:
# #include lines stay at file scope, everything else becomes the body of main().
set -euo pipefail
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk '/^```cpp$/{inside=1; next} /^```$/{if (inside) exit} inside' "$root/README.md" > "$tmp/block.cpp"
[[ -s "$tmp/block.cpp" ]] || { echo "README.md has no \`\`\`cpp block"; exit 1; }
{
    grep '^#include' "$tmp/block.cpp"
    echo 'int main() {'
    grep -v '^#include' "$tmp/block.cpp"
    echo '    return (out.shape()[2] == 4096 && grads.dq.shape() == q.shape() && outc.size() == out.size()) ? 0 : 1;'
    echo '}'
} > "$tmp/readme.cpp"
${CXX:-g++} -std=c++20 -O2 -fopenmp -I"$root/include" "$tmp/readme.cpp" -o "$tmp/readme"
"$tmp/readme"
echo "README example compiled and ran"
