#!/usr/bin/env python3
"""The rewrite is a fixed point: accel-rewrite applied to its own output changes nothing.

Runs the tool on every input the repository has (the lit inputs test/rewrite/*.cpp and
test/rewrite/cli/*.cpp, the corpus programs test/corpus/*.cpp, examples/mnist/train.cpp), then
again on each output, and requires the second output to be byte for byte the first. Prints a
unified diff of the second pass for every file that is not a fixed point, and the tool's
messages for every run that failed; exits 1 if any file failed.

usage: fixed-point.py --tool ACCEL_REWRITE --src-root ROOT --work DIR [-j N] [--log FILE]
                      [--runtime-include DIR] TORCH_INCLUDE_DIR...

--log FILE also writes the report to FILE (for FileCheck; stdout is what lit shows).

Flags: C++17 for the lit inputs (what their RUN lines give with %torch_flags), C++20 for the
corpus and the example (what their CMake targets compile with); LibTorch's include directories
as -isystem, and the runtime's include directory so that the second pass sees
<accelerate/accelerate.h>, which the first inserts.
"""
import argparse
import concurrent.futures
import difflib
import glob
import os
import subprocess
import sys

# Inputs meant not to parse (their tests expect exit status 2): nothing to rewrite.
NOT_PARSING = {"test/rewrite/cli/parse-error.cpp"}
# Files in test/corpus that are not corpus programs.
NOT_PROGRAMS = {"test/corpus/corpus_test.cpp", "test/corpus/pch.cpp"}


def inputs(root):
    """(relative path, C++ standard) for every input, in a stable order."""
    found = []
    for pattern, std in (("test/rewrite/*.cpp", "c++17"), ("test/rewrite/cli/*.cpp", "c++17"),
                         ("test/corpus/*.cpp", "c++20"), ("examples/mnist/train.cpp", "c++20")):
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            relative = os.path.relpath(path, root)
            if relative not in NOT_PARSING and relative not in NOT_PROGRAMS:
                found.append((relative, std))
    return found


def rewrite(tool, source, output, flags):
    """(exit status, messages); a tool that cannot be started is a failure like any other."""
    try:
        result = subprocess.run([tool, source, "-o", output, "--"] + flags, capture_output=True,
                                text=True)
    except OSError as error:
        return 127, f"cannot run {tool}: {error}\n"
    return result.returncode, result.stderr + result.stdout


def check(args, relative, std):
    """None when the file is a fixed point, else what to print."""
    source = os.path.join(args.src_root, relative)
    stem = relative.replace("/", "__")
    first = os.path.join(args.work, stem + ".pass1.cpp")
    second = os.path.join(args.work, stem + ".pass2.cpp")
    flags = [f"-std={std}"] + [f"-isystem{d}" for d in args.torch_include_dirs]
    if args.runtime_include:
        flags.append(f"-I{args.runtime_include}")
    # Corpus programs include their own headers (models/classifier.h) relative to the source;
    # the first pass's output lives elsewhere.
    flags.append(f"-I{os.path.dirname(source)}")
    for output, given in ((first, source), (second, first)):
        status, messages = rewrite(args.tool, given, output, flags)
        if status != 0:
            which = "first" if output == first else "second"
            return f"{relative}: the {which} pass exited {status}\n{messages}"
    with open(first, "rb") as f:
        once = f.read()
    with open(second, "rb") as f:
        twice = f.read()
    if once == twice:
        return None
    diff = difflib.unified_diff(once.decode("utf-8", "replace").splitlines(keepends=True),
                                twice.decode("utf-8", "replace").splitlines(keepends=True),
                                fromfile=f"{relative} (rewritten once)",
                                tofile=f"{relative} (rewritten twice)")
    return f"{relative}: not a fixed point\n" + "".join(diff)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tool", required=True)
    parser.add_argument("--src-root", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--runtime-include")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--log")
    parser.add_argument("torch_include_dirs", nargs="*")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)

    files = inputs(args.src_root)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda item: check(args, *item), files))
    report = []
    for (relative, _), problem in zip(files, results):
        if problem is None:
            report.append(f"fixed point: {relative}\n")
        else:
            report.append(problem if problem.endswith("\n") else problem + "\n")
    failures = sum(problem is not None for problem in results)
    report.append(f"{len(files) - failures} of {len(files)} files are fixed points\n")
    sys.stdout.write("".join(report))
    if args.log:
        with open(args.log, "w", encoding="utf-8") as log:
            log.write("".join(report))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
