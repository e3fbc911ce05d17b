#!/usr/bin/env python3
"""The rewrite is a fixed point: accel-rewrite applied to its own output changes nothing.

Runs the tool on every input the repository has (the lit inputs test/rewrite/*.cpp and
test/rewrite/cli/*.cpp, the corpus programs test/corpus/*.cpp, examples/mnist/train.cpp), then
again on each output, and requires the second output to be byte for byte the first. Prints a
unified diff of the second pass for every file that is not a fixed point, and the tool's
messages for every run that failed; exits 1 if any file failed.

Each run parses LibTorch's headers for an include block of its own (a cold preamble), so no
pass is run twice: a lit input whose own test already rewrites its output again with every rule
is left to that test, and where the build has rewritten a program (--build-root: the corpus
and the example, rewritten at build time), its output is the first pass.

usage: fixed-point.py --tool ACCEL_REWRITE --src-root ROOT --work DIR [-j N] [--log FILE]
                      [--runtime-include DIR] [--build-root DIR] TORCH_INCLUDE_DIR...

--log FILE also writes the report to FILE (for FileCheck; stdout is what lit shows).

Flags: C++17 for the lit inputs (what their RUN lines give with %torch_flags), C++20 for the
corpus and the example (what their CMake targets compile with); LibTorch's include directories
as -isystem, and the runtime's include directory so that the second pass sees
<accelerate/accelerate.h>, which the first inserts: the flags of the lit tests' %torch_flags,
so that a lit input's parse reuses the preamble its own test built. The source's directory is
added (-I) only for a file that includes a header by a quoted name.
"""
import argparse
import concurrent.futures
import difflib
import glob
import os
import re
import subprocess
import sys

# Inputs meant not to parse (their tests expect exit status 2): nothing to rewrite.
NOT_PARSING = {"test/rewrite/cli/parse-error.cpp"}
# Files in test/corpus that are not corpus programs.
NOT_PROGRAMS = {"test/corpus/corpus_test.cpp"}
# A lit test that rewrites its output again with every rule and diffs the two (accel-*.cpp):
# its input's fixed point is checked there.
OWN_SECOND_PASS = re.compile(r"RUN: %accel-rewrite %t/\S+ -o %t/again\.cpp")
# Where the build writes its rewrite of a program (test/corpus/CMakeLists.txt,
# examples/CMakeLists.txt), relative to the build root.
BUILD_REWRITES = {"test/corpus/": "test/corpus/{stem}_dist.cpp",
                  "examples/mnist/": "examples/mnist/{stem}_dist.cpp"}


def inputs(root):
    """(relative path, C++ standard) for every input, in a stable order."""
    found = []
    for pattern, std in (("test/rewrite/*.cpp", "c++17"), ("test/rewrite/cli/*.cpp", "c++17"),
                         ("test/corpus/*.cpp", "c++20"), ("examples/mnist/train.cpp", "c++20")):
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            relative = os.path.relpath(path, root)
            if relative in NOT_PARSING or relative in NOT_PROGRAMS:
                continue
            with open(path, encoding="utf-8") as f:
                if OWN_SECOND_PASS.search(f.read()):
                    continue
            found.append((relative, std))
    return found


def build_rewrite(args, relative):
    """The build's rewrite of RELATIVE, or None when the build has none newer than both the
    tool and the source (a tool rebuilt alone leaves the build's rewrites behind)."""
    if not args.build_root:
        return None
    directory, name = os.path.split(relative)
    pattern = BUILD_REWRITES.get(directory + "/")
    if pattern is None:
        return None
    path = os.path.join(args.build_root, pattern.format(stem=os.path.splitext(name)[0]))
    try:
        written = os.path.getmtime(path)
        if written < os.path.getmtime(args.tool) or \
                written < os.path.getmtime(os.path.join(args.src_root, relative)):
            return None
    except OSError:
        return None
    return path


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
    # The flags of the lit tests' %torch_flags, so that a lit input's parse shares the preamble
    # its own test built (the cache keys on them).
    flags = [f"-std={std}"] + [f"-isystem{d}" for d in args.torch_include_dirs]
    if args.runtime_include:
        flags.append(f"-I{args.runtime_include}")
    # Corpus programs include their own headers (models/classifier.h) relative to the source;
    # the first pass's output lives elsewhere.
    with open(source, encoding="utf-8", errors="replace") as text:
        if re.search(r'^\s*#\s*include\s*"', text.read(), re.MULTILINE):
            flags.append(f"-I{os.path.dirname(source)}")
    passes = [(first, source), (second, first)]
    built = build_rewrite(args, relative)
    if built:
        first = built
        passes = [(second, built)]
    statuses = []
    for output, given in passes:
        status, messages = rewrite(args.tool, given, output, flags)
        # 6: written, with a training loop declined; a second pass must decline it again.
        if status not in (0, 6):
            which = "first" if output == first else "second"
            return f"{relative}: the {which} pass exited {status}\n{messages}"
        statuses.append(status)
    if len(set(statuses)) > 1:
        return f"{relative}: the passes exited {statuses[0]} and then {statuses[1]}\n"
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
    parser.add_argument("--build-root")
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
