#!/usr/bin/env bash
# Compile and link a consumer program with the flags pkg-config reports for kattn.
# usage: build.sh <install-prefix> <main.cpp> <output-binary>
# Called by tests/consumer/run.sh (route "pkgconfig").
set -euo pipefail

prefix=$1 src=$2 out=$3

pc=$(find "$prefix" -name kattn.pc -print -quit)
if [[ -z $pc ]]; then
    echo "error: no kattn.pc under $prefix" >&2
    exit 1
fi
export PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

pkg-config --exists --print-errors kattn
cflags=$(pkg-config --cflags kattn)
libs=$(pkg-config --libs kattn)
echo "pkg-config --modversion kattn: $(pkg-config --modversion kattn)"
echo "pkg-config --cflags kattn: $cflags"
echo "pkg-config --libs kattn: $libs"

# Machine-specific flags must never leak into consumers.
if [[ " $cflags $libs " == *-march=* || " $cflags $libs " == *-mtune=* ]]; then
    echo "error: kattn.pc exports an -march/-mtune flag" >&2
    exit 1
fi
if [[ " $cflags " != *" -fopenmp "* ]]; then
    echo "error: kattn.pc Cflags lack -fopenmp" >&2
    exit 1
fi

# shellcheck disable=SC2086  # word splitting of pkg-config output is intended
# An installed libkattn_simd outside the loader's paths needs an rpath (or LD_LIBRARY_PATH).
rpath=()
if [[ " $libs " == *" -lkattn_simd "* ]]; then
    rpath=("-Wl,-rpath,$(pkg-config --variable=libdir kattn)")
fi
${CXX:-g++} -std=c++20 $cflags "$src" -o "$out" $libs "${rpath[@]}"
