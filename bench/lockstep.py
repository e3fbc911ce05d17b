#!/usr/bin/env python3
"""Where a 2-process step's synchronisation time goes: waiting for the peer, or the sum itself.

Runs `accel_bench phases --trace 1` as a 2-process job on this machine (`accel launch`,
gradients through shared memory, one thread per process) and reads both ranks' per-step
timestamps, taken on one clock: when each reached its last gradient (its arrival at the sum)
and when its backward returned (the sum done). Per step and rank:

  wait for the peer   the later arrival less this rank's own (zero for the later rank)
  sum                 this rank's return less the later arrival: the all-reduce itself with
                      its barriers, once both have arrived, plus finalize
  arrival gap         |arrival of rank 0 - arrival of rank 1|: how far apart the two processes'
                      work (loading, forward, backward) ran in that step

In lockstep every step waits for the slower process, so the wait is what the steps' own
variability costs; no sum can be faster than its slowest participant. Prints one line per
launch and the medians of the launches' means.

Usage: bench/lockstep.py [--model mlp] [--batch 64] [--steps 3000] [--reps 3] [--json F]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def one_launch(args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    command = [args.accel, "launch", "--num_processes", "2", "--num_cpu_threads_per_process", "1",
               args.binary, "phases", "--model", args.model, "--batch", str(args.batch),
               "--steps", str(args.steps), "--warmup", str(args.warmup), "--trace", "1"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"lockstep.py: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    ranks = {}
    for line in done.stdout.splitlines():
        start = line.find('{"bench"')
        if start >= 0:
            result = json.loads(line[start:])
            ranks[result["rank"]] = result
    if sorted(ranks) != [0, 1]:
        sys.exit(f"lockstep.py: expected a result line from ranks 0 and 1, got {sorted(ranks)}")
    arrive = [ranks[r]["arrive_us"] for r in (0, 1)]
    leave = [ranks[r]["leave_us"] for r in (0, 1)]
    steps = len(arrive[0])
    later = [max(arrive[0][i], arrive[1][i]) for i in range(steps)]
    wait = [later[i] - arrive[r][i] for r in (0, 1) for i in range(steps)]
    summed = [leave[r][i] - later[i] for r in (0, 1) for i in range(steps)]
    gap = [abs(arrive[0][i] - arrive[1][i]) for i in range(steps)]
    step = [leave[0][i + 1] - leave[0][i] for i in range(steps - 1)]
    return {"samples_per_s": ranks[0]["samples_per_s"], "step_us": statistics.mean(step),
            "wait_us": statistics.mean(wait), "sum_us": statistics.mean(summed),
            "gap_mean_us": statistics.mean(gap), "gap_median_us": statistics.median(gap)}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    build = os.environ.get("ACCEL_BUILD_DIR", os.path.join(ROOT, "build"))
    bench_build = os.environ.get("ACCEL_BENCH_BUILD_DIR", os.path.join(ROOT, "build-bench"))
    parser.add_argument("--model", default="mlp", choices=("mlp", "conv", "wide"))
    parser.add_argument("--batch", type=int, default=64, help="per process")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--accel", default=os.path.join(build, "bin", "accel"))
    parser.add_argument("--binary", default=os.path.join(bench_build, "accel_bench"))
    parser.add_argument("--json", help="also write every launch's numbers to this file")
    args = parser.parse_args()
    for path in (args.accel, args.binary):
        if not os.access(path, os.X_OK):
            sys.exit(f"lockstep.py: {path} is missing; build it (bench/run.sh) or pass "
                     "--accel/--binary")
    launches = []
    for rep in range(args.reps):
        result = one_launch(args)
        launches.append(result)
        print(f"{args.model} B={args.batch} launch {rep + 1}: {result['samples_per_s']:.0f} "
              f"samples/s, step {result['step_us']:.0f} us: wait for the peer "
              f"{result['wait_us']:.0f} us ({result['wait_us'] / result['step_us']:.0%}), sum "
              f"{result['sum_us']:.0f} us ({result['sum_us'] / result['step_us']:.0%}); arrival "
              f"gap mean {result['gap_mean_us']:.0f} us, median {result['gap_median_us']:.0f} us",
              flush=True)
    medians = {key: statistics.median(launch[key] for launch in launches)
               for key in launches[0]}
    print(f"medians of {args.reps}: step {medians['step_us']:.0f} us, wait for the peer "
          f"{medians['wait_us']:.0f} us ({medians['wait_us'] / medians['step_us']:.0%}), sum "
          f"{medians['sum_us']:.0f} us ({medians['sum_us'] / medians['step_us']:.0%})")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"model": args.model, "batch": args.batch, "steps": args.steps,
                       "launches": launches, "medians": medians}, out, indent=1)


if __name__ == "__main__":
    main()
