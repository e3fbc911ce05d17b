#!/usr/bin/env bash
# Builds what the benchmarks need, runs them, and prints their tables (docs/benchmarks.md):
#   runtime   bench/run.py: one-process overhead, 2-process training vs Python Accelerate, sync
#   scaling   bench/scaling.py: 1 process (1 and 2 threads) vs 2 processes, per model and batch;
#             bench/lockstep.py: a 2-process step's sync, waiting for the peer vs the sum
#   machines  bench/machines.py: a 2-machine job over a tbf-limited veth pair (needs root)
#   rewrite   bench/rewrite_speed.py: accel-rewrite vs clang++ -fsyntax-only and clang-tidy
# What it builds:
#   - the runtime and tools in build/ (scripts/setup when it was never built; else incremental)
#   - bench/.venv with torch==2.13.0+cpu and accelerate==1.15.0 (the Python side)
#   - accel_bench in build-bench/, a consumer project of build/package
# Usage: bench/run.sh [--suites runtime,scaling,machines,rewrite] [--out DIR] [run.py args...]
#   --suites  which to run (default: all four; about 50 minutes on 2 cores)
#   --out     keep every number as DIR/<suite>.json (default: a fresh directory under /tmp)
# Other arguments go to bench/run.py (e.g. --reps 5, --only train, --json results.json).
# Environment: ACCEL_BUILD_DIR (default build/), ACCEL_BENCH_BUILD_DIR (default build-bench/).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${ACCEL_BUILD_DIR:-$root/build}
bench_build=${ACCEL_BENCH_BUILD_DIR:-$root/build-bench}
venv=bench/.venv
say() { printf 'bench: %s\n' "$*" >&2; }

suites=runtime,scaling,machines,rewrite
out=
run_py_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --suites) suites=${2:?--suites needs a list}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    *) run_py_args+=("$1"); shift ;;
  esac
done
for suite in ${suites//,/ }; do
  case $suite in
    runtime | scaling | machines | rewrite) ;;
    *) say "unknown suite '$suite' (runtime, scaling, machines, rewrite)"; exit 2 ;;
  esac
done
wants() { [[ ",$suites," == *",$1,"* ]]; }
out=${out:-$(mktemp -d /tmp/accel-bench.XXXXXX)}
mkdir -p "$out"

if [ ! -f "$build/package/accelConfig.cmake" ]; then
  say "no runtime build in $build: running scripts/setup"
  scripts/setup
fi
targets=(accel_runtime accel)
wants rewrite && targets+=(accel-rewrite)
say "runtime: cmake --build $build --target ${targets[*]}"
mkdir -p "$bench_build"
cmake --build "$build" --target "${targets[@]}" >"$bench_build/runtime-build.log" 2>&1 ||
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

# Each suite prints its own table; a failing suite does not stop the others.
status=0
run_suite() {
  local name=$1
  shift
  say "suite $name: $*"
  "$@" || { say "suite $name failed (exit $?)"; status=1; }
}
wants runtime && run_suite runtime "$venv/bin/python" bench/run.py --binary "$bench_build/accel_bench" \
  --json "$out/runtime.json" ${run_py_args[@]+"${run_py_args[@]}"}
wants scaling && run_suite scaling python3 bench/scaling.py --binary "$bench_build/accel_bench" \
  --json "$out/scaling.json"
# Where the 2-process jobs' sync time goes (docs/benchmarks.md, "The limit for mlp and conv").
wants scaling && run_suite lockstep python3 bench/lockstep.py --model mlp \
  --binary "$bench_build/accel_bench" --accel "$build/bin/accel" --json "$out/lockstep-mlp.json"
wants scaling && run_suite lockstep python3 bench/lockstep.py --model conv --steps 400 \
  --warmup 40 --binary "$bench_build/accel_bench" --accel "$build/bin/accel" \
  --json "$out/lockstep-conv.json"
if wants machines; then
  if [ "$(id -u)" = 0 ]; then
    run_suite machines python3 bench/machines.py --binary "$bench_build/accel_bench" \
      --accel "$build/bin/accel" --python "$venv/bin/python" --json "$out/machines.json"
  else
    say "suite machines skipped: it needs root (ip netns, tc)"
  fi
fi
wants rewrite && run_suite rewrite python3 bench/rewrite_speed.py --build "$build" \
  --json "$out/rewrite.json"
say "every number is in $out"
exit $status
