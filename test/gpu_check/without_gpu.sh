#!/bin/sh
# scripts/gpu-check on a machine without a GPU (every development and CI machine): it must stop
# before building anything, exit 1, and name what is missing, without a Python traceback.
# Usage: without_gpu.sh SOURCE_DIR CPU_TORCH_PYTHON
set -u
source_dir=$1
cpu_python=$2
script=$source_dir/scripts/gpu-check
work=$(mktemp -d "${TMPDIR:-/tmp}/accel-gpu-check-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# run NAME EXPECTED_EXIT ARGS...: runs the script, keeps its output in $work/NAME.out
run() {
  name=$1 expected=$2
  shift 2
  "$script" "$@" >"$work/$name.out" 2>&1
  code=$?
  [ "$code" = "$expected" ] || fail "$name: exit $code, expected $expected; output:
$(cat "$work/$name.out")"
  if grep -q Traceback "$work/$name.out"; then
    fail "$name: a Python traceback:
$(cat "$work/$name.out")"
  fi
  [ ! -e "$work/build-$name" ] || fail "$name: created its build directory $work/build-$name"
}

expect() {
  grep -qF -- "$2" "$work/$1.out" || fail "$1: output lacks '$2':
$(cat "$work/$1.out")"
}

# A CPU build of torch (the project's .venv): named, with why it does not do.
run cpu_torch 1 --dry-run --no-corpus --python "$cpu_python" --build-dir "$work/build-cpu_torch"
expect cpu_torch "gpu-check: missing: a CUDA build of torch: $cpu_python: torch "
expect cpu_torch "is a CPU build (torch.version.cuda is None)"
expect cpu_torch "gpu-check: error: "
expect cpu_torch "nothing was built"

# The same without --dry-run: the checks come before the build, so nothing is built either.
run cpu_torch_build 1 --no-corpus --python "$cpu_python" --build-dir "$work/build-cpu_torch_build"
expect cpu_torch_build "is a CPU build (torch.version.cuda is None)"

# A CUDA build of torch that sees no GPU (a stand-in Python answering the script's probe).
cat >"$work/cuda-python" <<'PY'
#!/bin/sh
cat >/dev/null
printf 'torch=2.11.0+cu130\ncuda=13.0\ngpus=0\ntorch_dir=/nonexistent\n'
PY
chmod +x "$work/cuda-python"
run no_gpu 1 --no-corpus --python "$work/cuda-python" --build-dir "$work/build-no_gpu"
expect no_gpu "gpu-check: missing: a CUDA GPU: torch 2.11.0+cu130 (CUDA 13.0) at $work/cuda-python sees none"

# A Python that is not there, and one without torch: named, no traceback.
run no_python 1 --dry-run --no-corpus --python "$work/no-such-python" --build-dir "$work/build-no_python"
expect no_python "$work/no-such-python: not found"
printf '#!/bin/sh\nexec env PYTHONPATH= PYTHONNOUSERSITE=1 python3 -S "$@"\n' >"$work/bare-python"
chmod +x "$work/bare-python"
run no_torch 1 --dry-run --no-corpus --python "$work/bare-python" --build-dir "$work/build-no_torch"
expect no_torch "$work/bare-python: cannot import torch: No module named 'torch'"

# The corpus sources are a prerequisite unless --no-corpus: an empty directory is named.
mkdir "$work/empty"
run no_corpus 1 --dry-run --python "$cpu_python" --corpus "$work/empty" --build-dir "$work/build-no_corpus"
expect no_corpus "gpu-check: missing: the rewritten corpus sources in $work/empty"

# Bad usage: exit 2.
run usage 2 --no-such-option
expect usage "gpu-check: error: unknown argument '--no-such-option'"
run usage_value 2 --python
expect usage_value "gpu-check: error: --python needs a value"

if [ "$failures" != 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "gpu-check without a GPU: every case stopped before building, named what is missing"
