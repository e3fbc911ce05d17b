"""Worker output through the launcher: a worker writes 200 MB without a newline
(`head -c 200000000 /dev/zero | tr '\\0' a`, issue 29's case) under `accel launch`, against the
same bytes through `cat`, both to /dev/null, interleaved, medians reported; and the launcher's
peak memory against it printing one short line. Goals: at most 2x cat's time, at most 16 MiB
more memory.

Needs only Python 3 (no venv):
    python3 bench/output_streaming.py [--reps 7] [--mb 200] [--accel build/bin/accel]
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(command, env):
    """Wall seconds and peak resident KiB of `command` (and what it reaped)."""
    start = time.perf_counter()
    with open(os.devnull, "wb") as null:
        process = subprocess.Popen(command, env=env, stdout=null, stderr=null)
        _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{command[0]} failed: status {status}")
    return seconds, usage.ru_maxrss


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--accel", default=os.path.join(ROOT, "build", "bin", "accel"))
    args = parser.parse_args()

    env = dict(os.environ, HF_HOME=tempfile.mkdtemp(prefix="accel-bench-home-"))
    produce = f"head -c {args.mb * 1000 * 1000} /dev/zero | tr '\\0' a"
    ours = [args.accel, "launch", "/bin/sh", "-c", produce]
    cat = ["/bin/sh", "-c", produce + " | cat"]
    short = [args.accel, "launch", "/bin/sh", "-c", "echo a"]
    run(ours, env), run(cat, env)  # warm the page cache for both
    ours_s, cat_s, ours_kib = [], [], []
    for _ in range(args.reps):
        seconds, kib = run(ours, env)
        ours_s.append(seconds)
        ours_kib.append(kib)
        cat_s.append(run(cat, env)[0])
    short_kib = run(short, env)[1]
    a, b = statistics.median(ours_s), statistics.median(cat_s)
    growth = (max(ours_kib) - short_kib) / 1024
    print(f"accel launch   median {a:6.3f} s  (min {min(ours_s):.3f})")
    print(f"cat            median {b:6.3f} s  (min {min(cat_s):.3f})")
    print(f"ratio accel / cat: {a / b:.2f}x  (goal <= 2x)")
    # ru_maxrss of a child forked from Python starts at Python's own size, the same for both
    # runs: only the difference says what the launcher added.
    print(f"launcher peak memory {growth:+.1f} MiB over the same launcher printing one short "
          f"line (goal <= 16 MiB)")


if __name__ == "__main__":
    main()
