#!/usr/bin/env bash
# Builds what the benchmarks need and runs all three (docs/benchmarks.md):
#   - the runtime in build/ (scripts/setup when it was never built; else an incremental build)
#   - bench/.venv with torch==2.13.0+cpu and accelerate==1.15.0 (the Python side)
#   - accel_bench in build-bench/, a consumer project of build/package
# Arguments go to bench/run.py (e.g. --reps 5, --only train, --json results.json).
# Environment: ACCEL_BUILD_DIR (default build/), ACCEL_BENCH_BUILD_DIR (default build-bench/).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${ACCEL_BUILD_DIR:-$root/build}
bench_build=${ACCEL_BENCH_BUILD_DIR:-$root/build-bench}
venv=bench/.venv
say() { printf 'bench: %s\n' "$*" >&2; }

if [ ! -f "$build/package/accelConfig.cmake" ]; then
  say "no runtime build in $build: running scripts/setup"
  scripts/setup
fi
say "runtime: cmake --build $build --target accel_runtime"
mkdir -p "$bench_build"
cmake --build "$build" --target accel_runtime >"$bench_build/runtime-build.log" 2>&1 ||
  { cat "$bench_build/runtime-build.log" >&2; exit 1; }

if ! "$venv/bin/python" -c 'import torch, accelerate' 2>/dev/null; then
  say "making $venv (torch==2.13.0+cpu, accelerate==1.15.0)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet 'torch==2.13.0+cpu' 'accelerate==1.15.0'
fi

if [ ! -f "$bench_build/build.ninja" ]; then
  say "configuring $bench_build"
  cmake -S bench -B "$bench_build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -Daccel_DIR="$build/package" >"$bench_build/configure.log" 2>&1 ||
    { cat "$bench_build/configure.log" >&2; exit 1; }
fi
say "building accel_bench"
cmake --build "$bench_build" >"$bench_build/build.log" 2>&1 || { cat "$bench_build/build.log" >&2; exit 1; }

exec "$venv/bin/python" bench/run.py --binary "$bench_build/accel_bench" "$@"
