#!/usr/bin/env bash
# Consumption test driver: build and run tests/consumer/main.cpp against kattn
# the way a user would.
#
# usage: run.sh <route> <source_root> <build_tmp>
#   route        subproject | pkgconfig | cmake | installed (pkgconfig and cmake, one install)
#   source_root  the kattn source tree
#   build_tmp    a scratch directory owned by this route (wiped on every run)
#
# Routes:
#   subproject  a standalone Meson project with subprojects/kattn -> source_root,
#               dependency('kattn'); kattn's own tests/examples/bench must not build.
#   pkgconfig   install kattn into build_tmp/prefix, compile with
#               g++ $(pkg-config --cflags kattn) ... $(pkg-config --libs kattn).
#   cmake       install kattn into build_tmp/prefix, find_package(kattn) with
#               CMAKE_PREFIX_PATH=build_tmp/prefix, link kattn::kattn.
#   installed   pkgconfig, then cmake, against one install (what the test suite runs:
#               installing compiles the kernel library libkattn_simd once instead of twice).
# Every step must succeed; the program must run and exit 0.
set -euo pipefail

if [[ $# -ne 3 ]]; then
    echo "usage: $0 <subproject|pkgconfig|cmake|installed> <source_root> <build_tmp>" >&2
    exit 2
fi
route=$1
src=$(cd "$2" && pwd -P)
tmp=$3
here=$src/tests/consumer

step() { echo "==> [$route] $*"; }

# Fresh scratch directory on every run (repeatable; one per route, so parallel-safe).
rm -rf "$tmp"
mkdir -p "$tmp"
tmp=$(cd "$tmp" && pwd -P)

# Install kattn into a private prefix (pkgconfig and cmake routes).
install_kattn() {
    step "configure kattn with --prefix=$tmp/prefix"
    meson setup "$tmp/kattn-build" "$src" --prefix="$tmp/prefix" \
        -Dtests=disabled -Dexamples=disabled -Dbench=disabled -Dnative=false
    step "install kattn"
    meson install -C "$tmp/kattn-build" --quiet
    test -f "$tmp/prefix/include/kattn/kattn.hpp"
    test -f "$tmp/prefix/lib/cmake/kattn/kattnConfig.cmake"
    test -f "$tmp/prefix/lib/cmake/kattn/kattnConfigVersion.cmake"
}

# Build the consumer against the installed prefix: pkg-config flags, or find_package.
build_pkgconfig() {
    step "compile with pkg-config flags"
    bash "$here/pkgconfig/build.sh" "$tmp/prefix" "$here/main.cpp" "$tmp/app-pkgconfig"
    apps+=("$tmp/app-pkgconfig")
}
build_cmake() {
    local proj=$tmp/project-cmake
    mkdir -p "$proj"
    cp "$here/cmake/CMakeLists.txt" "$here/main.cpp" "$proj/"
    local gen=()
    if command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
    step "cmake configure (find_package(kattn))"
    cmake -S "$proj" -B "$proj/build" "${gen[@]}" \
        -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release
    step "cmake build"
    cmake --build "$proj/build"
    apps+=("$proj/build/app")
}

apps=()
case $route in
subproject)
    proj=$tmp/project
    mkdir -p "$proj/subprojects"
    cp "$here/subproject/meson.build" "$here/main.cpp" "$proj/"
    ln -s "$src" "$proj/subprojects/kattn"
    step "meson setup (kattn as subproject)"
    meson setup "$proj/build" "$proj" --force-fallback-for=kattn
    # kattn's own targets must not be built for a consumer.
    if grep -q -E 'kattn_tests|quickstart|bench_attention' "$proj/build/build.ninja"; then
        echo "error: kattn's tests/examples/bench are part of a consumer's build" >&2
        exit 1
    fi
    # kattn's kernel library is compiled with -march=x86-64-v3/v4 (its own objects); the
    # consumer's objects must get none.
    if awk '/^build app\.p\//{own=1; next} /^build /{own=0} own && /-march=/' "$proj/build/build.ninja" |
        grep -q .; then
        echo "error: -march leaks into a consumer's build" >&2
        exit 1
    fi
    step "meson compile"
    meson compile -C "$proj/build"
    apps+=("$proj/build/app")
    ;;
pkgconfig)
    install_kattn
    build_pkgconfig
    ;;
cmake)
    install_kattn
    build_cmake
    ;;
installed)
    install_kattn
    build_pkgconfig
    build_cmake
    ;;
*)
    echo "error: unknown route '$route' (expected subproject, pkgconfig, cmake or installed)" >&2
    exit 2
    ;;
esac

for app in "${apps[@]}"; do
    step "run $app"
    "$app"
done
step "ok"
