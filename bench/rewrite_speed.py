#!/usr/bin/env python3
"""accel-rewrite's speed on the corpus programs, against clang's own tools (issue 8).

For each program of test/corpus, side by side in one run, with the same flags:
  clang++ -fsyntax-only        the parse alone
  clang-tidy, one check        the usual way to run a checker over a file
  accel-rewrite --no-cache     every header parsed each time
  accel-rewrite cold           an empty preamble cache: the preamble is built, then used
  accel-rewrite warm           the preamble loaded from the cache the cold run filled
then `accel-rewrite --check` over the whole corpus with -j1 and -j2, cold and warm.

Prints a Markdown table (docs/benchmarks.md holds the last one), writes --json, and plots
time per file to --plot when matplotlib is installed (Debian: python3-matplotlib, for
/usr/bin/python3); --replot draws the plot again from a --json file.

    python3 bench/rewrite_speed.py [--build build] [--json out.json] [--plot docs/rewrite-speed.png]
    python3 bench/rewrite_speed.py --only syntax_only,cold --files early_stopping,gan_adamw
    python3 bench/rewrite_speed.py --only syntax_only,cold --reps 3 \
        --cold-variant untuned=ACCEL_REWRITE_MALLOC_TUNING=false

--reps N runs each file's measurements N times, interleaved, and keeps the mean: this machine
varies by 15% from one launch to the next. --cold-variant NAME=VAR=VALUE[,VAR=VALUE] adds a
cold run with those environment variables to every repetition, beside the plain one.
"""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "test", "corpus")
NOT_PROGRAMS = {"corpus_test.cpp", "pch.cpp"}
# What is measured per file, then over the whole corpus ("whole": --check -j1 and -j2).
MEASURES = ("syntax_only", "clang_tidy", "no_cache", "cold", "warm", "whole")
# Flags that name what to compile, not how: kept from the build's compile commands.
KEPT_PREFIXES = ("-std=", "-I", "-isystem", "-D", "-U")


def corpus_programs():
    return sorted(f for f in os.listdir(CORPUS) if f.endswith(".cpp") and f not in NOT_PROGRAMS)


def language_flags(build, source):
    """The -std/-I/-isystem/-D flags of source's compile command in the database of the corpus
    project (build/test/corpus/programs, which `cmake --build build --target corpus_programs`
    configures)."""
    database = os.path.join(build, "test", "corpus", "programs", "compile_commands.json")
    if not os.path.exists(database):
        sys.exit(f"rewrite_speed: no {database}; build the corpus first: "
                 f"cmake --build {build} --target corpus_programs")
    with open(database) as f:
        for entry in json.load(f):
            if os.path.realpath(entry["file"]) == os.path.realpath(source):
                args = entry.get("arguments") or shlex.split(entry["command"])
                flags, i = [], 1
                while i < len(args):
                    arg = args[i]
                    if arg in ("-I", "-isystem", "-D", "-U") and i + 1 < len(args):
                        flags += [arg, args[i + 1]]
                        i += 2
                        continue
                    if arg.startswith(KEPT_PREFIXES):
                        flags.append(arg)
                    i += 1
                return flags
    sys.exit(f"rewrite_speed: {source} is not in {database}; build the corpus first")


def timed(command, ok=(0,), env=None):
    start = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=None if env is None else {**os.environ, **env})
    seconds = time.perf_counter() - start
    if done.returncode not in ok:
        sys.exit(f"rewrite_speed: {shlex.join(command)} exited with {done.returncode}:\n"
                 f"{done.stderr[-3000:]}")
    return seconds


def tool(name):
    path = shutil.which(name)
    if not path:
        sys.exit(f"rewrite_speed: {name} not found (Debian: clang-22, clang-tidy-22)")
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--json", help="write the measurements here")
    parser.add_argument("--plot", help="write a PNG of time per file here")
    parser.add_argument("--check-tidy", default="bugprone-use-after-move",
                        help="the one clang-tidy check (default: %(default)s)")
    parser.add_argument("--files", help="comma-separated corpus programs (default: all)")
    parser.add_argument("--only", default=",".join(MEASURES),
                        help="which of %(default)s to measure")
    parser.add_argument("--reps", type=int, default=1,
                        help="run each file's measurements this many times, interleaved")
    parser.add_argument("--cold-variant", action="append", default=[],
                        metavar="NAME=VAR=VALUE[,VAR=VALUE]",
                        help="also a cold run with these environment variables (repeatable)")
    parser.add_argument("--replot", metavar="JSON",
                        help="only plot (to --plot) the measurements of an earlier --json")
    opts = parser.parse_args()
    variants = {}
    for spec in opts.cold_variant:
        name, _, assignments = spec.partition("=")
        pairs = [a.partition("=") for a in assignments.split(",") if a]
        if not name or not pairs or any(not var or sep != "=" for var, sep, _ in pairs):
            sys.exit(f"rewrite_speed: --cold-variant {spec}: expected NAME=VAR=VALUE[,VAR=VALUE]")
        variants[name] = {var: value for var, _, value in pairs}
    if opts.reps < 1:
        sys.exit("rewrite_speed: --reps must be at least 1")
    if opts.replot:
        with open(opts.replot) as f:
            plot(json.load(f)["files"], opts.plot or "rewrite-speed.png")
        return
    rewrite = os.path.join(opts.build, "bin", "accel-rewrite")
    if not os.access(rewrite, os.X_OK):
        sys.exit(f"rewrite_speed: no {rewrite}; run scripts/setup first")
    clangxx, clang_tidy = tool("clang++-22"), tool("clang-tidy-22")

    only = set(opts.only.split(","))
    if only - set(MEASURES):
        sys.exit(f"rewrite_speed: --only: unknown {sorted(only - set(MEASURES))}; "
                 f"choose from {','.join(MEASURES)}")
    programs = corpus_programs()
    if opts.files:
        wanted = [f if f.endswith(".cpp") else f + ".cpp" for f in opts.files.split(",")]
        missing = sorted(set(wanted) - set(programs))
        if missing:
            sys.exit(f"rewrite_speed: --files: not corpus programs: {', '.join(missing)}")
        programs = wanted
    work = tempfile.mkdtemp(prefix="accel-rewrite-speed-")
    database = []
    for name in programs:
        source = os.path.join(CORPUS, name)
        database.append({"directory": CORPUS, "file": source,
                         "arguments": [clangxx, *language_flags(opts.build, source), "-c", source]})
    with open(os.path.join(work, "compile_commands.json"), "w") as f:
        json.dump(database, f, indent=1)

    rows = []
    for i, entry in enumerate(database):
        source = entry["file"]
        flags = entry["arguments"][1:-2]
        cache = os.path.join(work, f"cache-{i}")
        row = {"file": os.path.basename(source)}
        check = [rewrite, "--check", "--format=json", "-p", work]
        commands = {
            "syntax_only": ([clangxx, *flags, "-fsyntax-only", "-w", source], (0,)),
            "clang_tidy": ([clang_tidy, "-p", work, f"--checks=-*,{opts.check_tidy}", "--quiet",
                            source], (0, 1)),
            "no_cache": ([*check, "--no-cache", source], (0, 1)),
            "cold": ([*check, "--cache-dir", cache, source], (0, 1)),
            "warm": ([*check, "--cache-dir", cache, source], (0, 1)),
        }
        for name, env in variants.items():
            commands[f"cold[{name}]"] = ([*check, "--cache-dir", f"{cache}-{name}", source], (0, 1),
                                         env)
        for _ in range(opts.reps):
            for key, (command, ok, *env) in commands.items():
                if key.startswith("cold"):  # every cold run starts from an empty cache
                    shutil.rmtree(command[command.index("--cache-dir") + 1], ignore_errors=True)
                if key == "warm" and "cold" not in only:
                    timed(commands["cold"][0], ok=(0, 1))  # warm needs a filled cache
                if key in only or key.startswith("cold["):
                    seconds = timed(command, ok=ok, env=env[0] if env else None)
                    row[key] = row.get(key, 0.0) + seconds / opts.reps
        if os.path.isdir(cache):
            row["entry_mb"] = sum(os.path.getsize(os.path.join(cache, e))
                                  for e in os.listdir(cache)) / 1e6
        rows.append(row)
        print(f"{row['file']:24} " + "  ".join(f"{key} {row[key]:6.2f}" for key in commands
                                                if key in row), file=sys.stderr)

    sources = [entry["file"] for entry in database]
    whole = {}
    if "whole" in only:
        for jobs in (1, 2):
            cache = os.path.join(work, f"whole-j{jobs}")
            check = [rewrite, "--check", "--format=json", "-p", work, f"-j{jobs}", "--cache-dir",
                     cache]
            whole[f"cold_j{jobs}"] = timed([*check, *sources], ok=(0, 1))
            whole[f"warm_j{jobs}"] = timed([*check, *sources], ok=(0, 1))
        whole["entries"] = len(os.listdir(os.path.join(work, "whole-j1")))

    def mean(key):
        return sum(r[key] for r in rows) / len(rows)

    def cell(value):
        return "-" if value is None else f"{value:.2f} s"

    measured = [k for k in MEASURES[:-1] if k in only]
    ratios = {}
    if {"cold", "syntax_only"} <= only:
        ratios["cold / syntax-only"] = mean("cold") / mean("syntax_only")
        per_file = sorted(r["cold"] / r["syntax_only"] for r in rows)
        ratios["cold / syntax-only, per file: lowest"] = per_file[0]
        ratios["cold / syntax-only, per file: highest"] = per_file[-1]
    for name in variants:
        if "syntax_only" in only:
            ratios[f"cold[{name}] / syntax-only"] = mean(f"cold[{name}]") / mean("syntax_only")
    if {"warm", "clang_tidy"} <= only:
        ratios["warm / clang-tidy"] = mean("warm") / mean("clang_tidy")
    if whole:
        ratios["--check -j2 / -j1, cold"] = whole["cold_j2"] / whole["cold_j1"]
        ratios["--check -j2 / -j1, warm"] = whole["warm_j2"] / whole["warm_j1"]
    titles = {"syntax_only": "clang++ -fsyntax-only", "clang_tidy": "clang-tidy (1 check)",
              "no_cache": "accel-rewrite --no-cache", "cold": "accel-rewrite cold",
              "warm": "accel-rewrite warm"}
    print("| file | " + " | ".join(titles[k] for k in measured) + " |")
    print("|---|" + "---:|" * len(measured))
    for r in rows + [{"file": "**mean**", **{k: mean(k) for k in measured}}]:
        print(f"| {r['file']} | " + " | ".join(cell(r.get(k)) for k in measured) + " |")
    print()
    if whole:
        print(f"`--check` over the {len(sources)} programs ({whole['entries']} cache entries): "
              f"-j1 cold {whole['cold_j1']:.1f} s, -j2 cold {whole['cold_j2']:.1f} s; "
              f"-j1 warm {whole['warm_j1']:.1f} s, -j2 warm {whole['warm_j2']:.1f} s")
        print()
    for name, value in ratios.items():
        print(f"- {name}: {value:.2f}x")

    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"files": rows, "whole_corpus": whole, "ratios": ratios}, f, indent=1)
    if opts.plot:
        plot(rows, opts.plot)
    shutil.rmtree(work, ignore_errors=True)


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("rewrite_speed: no plot: matplotlib is missing (Debian: apt-get install "
              "python3-matplotlib)", file=sys.stderr)
        return
    series = [("syntax_only", "clang++-22 -fsyntax-only"), ("clang_tidy", "clang-tidy-22, 1 check"),
              ("cold", "accel-rewrite, cold cache"), ("warm", "accel-rewrite, warm cache")]
    series = [(key, label) for key, label in series if all(key in r for r in rows)]
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(11, 4.8))
    for k, (key, label) in enumerate(series):
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(rows))]
        ax.bar(xs, [r[key] for r in rows], width, label=label)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["file"].removesuffix(".cpp") for r in rows], rotation=30, ha="right")
    ax.set_ylabel("seconds per file")
    ax.set_title("accel-rewrite on the corpus programs (LibTorch 2.13 headers, 2 cores)")
    ax.set_ylim(0, 1.3 * max(max(r[key] for key, _ in series) for r in rows))
    ax.legend(ncol=4, loc="upper center")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"rewrite_speed: plot written to {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
