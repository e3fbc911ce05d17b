"""Launcher start-up: `accel launch --num_processes 2 /bin/true` against
`accelerate launch --num_processes 2 --no_python /bin/true` (Python Accelerate 1.15), the whole
command timed from start to exit, interleaved, medians reported. Goal: accel <= 0.1x the time.

Run with bench/.venv's Python (bench/run.sh makes it):
    bench/.venv/bin/python bench/launch_overhead.py [--reps 15] [--accel build/bin/accel]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(command, env):
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--accel", default=os.path.join(ROOT, "build", "bin", "accel"))
    parser.add_argument("--accelerate",
                        default=os.path.join(os.path.dirname(sys.executable), "accelerate"))
    args = parser.parse_args()

    # Neither launcher may pick up a config file of the user's.
    home = tempfile.mkdtemp(prefix="accel-bench-home-")
    env = dict(os.environ, HF_HOME=home)
    ours = [args.accel, "launch", "--num_processes", "2", "/bin/true"]
    theirs = [args.accelerate, "launch", "--num_processes", "2", "--no_python", "/bin/true"]
    timed(ours, env), timed(theirs, env)  # warm the page cache for both
    ours_s, theirs_s = [], []
    for _ in range(args.reps):
        ours_s.append(timed(ours, env))
        theirs_s.append(timed(theirs, env))
    a, b = statistics.median(ours_s), statistics.median(theirs_s)
    print(f"accel launch        median {a * 1000:8.1f} ms  (min {min(ours_s) * 1000:.1f})")
    print(f"accelerate launch   median {b * 1000:8.1f} ms  (min {min(theirs_s) * 1000:.1f})")
    print(f"ratio accel / accelerate: {a / b:.3f}x  (goal <= 0.1x)")


if __name__ == "__main__":
    main()
