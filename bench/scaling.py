"""Scaling efficiency of data parallelism on one machine (docs/benchmarks.md, "Scaling").

For each model and per-process batch size, the samples per second of `accel_bench train`:

  1p1t  one process, one compute thread (no launcher variables: no process group, no sync)
  1p2t  one process, two compute threads (intra-op parallelism, OMP_NUM_THREADS=2)
  2p1t  two processes, one thread each: the runtime as shipped (gradients summed through
        shared memory), started with torchrun's variables (or `accel launch`, --launcher)
  pair  the ceiling: two independent one-process jobs at once, no sync at all; what two copies
        of the work get from this machine (cores, caches and memory shared). Not a goal.
  2p1t:NAME  with --variant NAME=VAR=VALUE,...: 2p1t with those environment variables added
        (e.g. --variant gloo=ACCELERATE_SHARED_MEMORY=false), interleaved with the rest.

efficiency = 2p1t / (2 x 1p1t); the issue's goals: >= 90% for mlp and >= 95% for conv and wide
at batch 64, and 2p1t > 1p2t for every model at batch 64. Launches are interleaved (the order
of configurations and of modes rotates from one repetition to the next); medians are reported.

Needs build-bench/accel_bench (bench/run.sh builds it). Standard library only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402  (bench/run.py: QuietWaiter, measured, base_env, run_cpp_job, wait_all)

ROOT = run.ROOT
MODES = ("1p1t", "1p2t", "2p1t", "pair")
# Timed steps per (model, per-process batch): about 1.5-3 s of one process's work per launch
# on the 2-core development VM; --scale multiplies them. Warm-up: a tenth of them (at least 5).
STEPS = {("mlp", 16): 4000, ("mlp", 64): 1500,
         ("conv", 16): 400, ("conv", 64): 120,
         ("wide", 16): 200, ("wide", 64): 60}
# The goals: efficiency per model at batch 64; 2p1t faster than 1p2t at batch 64.
GOAL_BATCH = 64
EFFICIENCY_GOALS = {"mlp": 0.90, "conv": 0.95, "wide": 0.95}


def rate(result):
    """Samples per second of the whole job from one accel_bench train result line."""
    return result["steps"] * result["batch"] * result["processes"] / result["seconds"]


def one_process(binary, job, threads, timeout):
    done = subprocess.run([binary, *job, "--threads", str(threads)], env=run.base_env(threads),
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"accel_bench {' '.join(job)} exited {done.returncode}:\n"
                           f"{done.stdout}{done.stderr}")
    result = run.json_line(done.stdout, "accel_bench " + " ".join(job))
    result["samples_per_s"] = rate(result)
    return result


def independent_pair(binary, job, timeout):
    """Two one-process jobs at once (no launcher variables, nothing shared): their rates add."""
    env = run.base_env(1)
    workers = [subprocess.Popen([binary, *job, "--threads", "1"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for _ in range(2)]
    outputs = run.wait_all(workers, timeout)
    results = []
    for w, out in zip(workers, outputs):
        if w.returncode != 0:
            raise RuntimeError(f"accel_bench {' '.join(job)} exited {w.returncode}:\n{out}")
        results.append(run.json_line(out, "accel_bench " + " ".join(job)))
    return {"each": results, "samples_per_s": sum(rate(r) for r in results),
            "seconds": max(r["seconds"] for r in results)}


def accel_launch(accel, binary, job, timeout, extra_env=None):
    """Two processes started by `accel launch --num_processes 2`; rank 0 prints the result."""
    cmd = [accel, "launch", "--num_processes", "2", binary, *job, "--threads", "1"]
    env = run.base_env(1)
    env.update(extra_env or {})
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n"
                           f"{done.stdout}{done.stderr}")
    return run.json_line(done.stdout, "accel launch accel_bench " + " ".join(job))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=os.path.join(ROOT, "build-bench", "accel_bench"))
    parser.add_argument("--models", default="mlp,conv,wide")
    parser.add_argument("--batches", default="16,64", help="per-process batch sizes")
    parser.add_argument("--modes", default=",".join(MODES),
                        help="of 1p1t,1p2t,2p1t,pair (pair: the no-sync ceiling, not a goal)")
    parser.add_argument("--reps", type=int, default=5, help="launches per mode and configuration")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the timed steps")
    parser.add_argument("--samples", type=int, default=4096, help="dataset size (one epoch)")
    parser.add_argument("--launcher", choices=("env", "accel"), default="env",
                        help="2p1t: torchrun's variables set by this script (as run.py does), "
                             "or build/bin/accel launch --num_processes 2")
    parser.add_argument("--accel", default=os.path.join(
        os.environ.get("ACCEL_BUILD_DIR", os.path.join(ROOT, "build")), "bin", "accel"))
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=VAR=VALUE,...",
                        help="also run 2p1t with these environment variables, as mode "
                             "2p1t:NAME (repeatable)")
    parser.add_argument("--json", help="also write every result to this file")
    parser.add_argument("--quiet-threshold", type=float, default=0.15,
                        help="before each launch wait until at most this fraction of the CPU "
                             "is busy (other programs)")
    parser.add_argument("--quiet-budget", type=float, default=120,
                        help="seconds of such waiting in all, then run regardless")
    args = parser.parse_args()
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"scaling.py: no {args.binary}: build it with bench/run.sh (or --binary)")
    modes = [m for m in args.modes.split(",") if m]
    variants = {}
    for spec in args.variant:
        name, _, assignments = spec.partition("=")
        pairs = [a.partition("=") for a in assignments.split(",") if a]
        if not name or not pairs or any(not eq for _, eq, _ in pairs):
            sys.exit(f"scaling.py: --variant {spec!r} is not NAME=VAR=VALUE,...")
        variants[f"2p1t:{name}"] = {k: v for k, _, v in pairs}
        modes.append(f"2p1t:{name}")
    unknown = set(modes) - set(MODES) - set(variants)
    if unknown:
        sys.exit(f"scaling.py: unknown modes {sorted(unknown)} (of {', '.join(MODES)})")
    configs = [(m, int(b)) for m in args.models.split(",") for b in args.batches.split(",")]
    for config in configs:
        if config not in STEPS:
            sys.exit(f"scaling.py: no step count for model {config[0]}, batch {config[1]}")
    timeout = 300
    started = time.time()
    info = run.machine_info()
    print(f"# {info['date']}  {info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB; "
          f"commit {info['commit']}; launcher {args.launcher}", flush=True)

    def launcher(mode, job):
        if mode == "1p1t":
            return lambda: one_process(args.binary, job, 1, timeout)
        if mode == "1p2t":
            return lambda: one_process(args.binary, job, 2, timeout)
        if mode == "pair":
            return lambda: independent_pair(args.binary, job, timeout)

        def two_processes():
            if args.launcher == "accel":
                result = accel_launch(args.accel, args.binary, job, timeout, variants.get(mode))
            else:
                result = run.run_cpp_job(args.binary, job, 2, 1, timeout, variants.get(mode))
            result["samples_per_s"] = rate(result)
            return result
        return two_processes

    quiet = run.QuietWaiter(args.quiet_threshold, args.quiet_budget)
    launches = {config: {mode: [] for mode in modes} for config in configs}
    for rep in range(args.reps):
        # Rotate the configurations and, within each, the modes: nothing always goes first.
        for c in range(len(configs)):
            model, batch = config = configs[(c + rep) % len(configs)]
            steps = max(1, round(STEPS[config] * args.scale))
            job = ["train", "--model", model, "--batch", str(batch), "--steps", str(steps),
                   "--warmup", str(max(5, steps // 10)), "--samples", str(args.samples)]
            shift = (rep + c) % len(modes)
            for mode in modes[shift:] + modes[:shift]:
                quiet()
                result = run.measured(launcher(mode, job))
                result["rep"] = rep
                launches[config][mode].append(result)
            print(f"rep {rep + 1}/{args.reps} {model} B={batch}: " + ", ".join(
                f"{mode} {launches[config][mode][-1]['samples_per_s']:.0f}" for mode in modes)
                + " samples/s", flush=True)

    summary = {}
    for config in configs:
        med = {mode: statistics.median(r["samples_per_s"] for r in launches[config][mode])
               for mode in modes}
        row = {"median_samples_per_s": med}
        per_rep = lambda num, den: [n["samples_per_s"] / d["samples_per_s"] for n, d in
                                    zip(launches[config][num], launches[config][den])]
        if "2p1t" in med and "1p1t" in med:
            row["efficiency"] = med["2p1t"] / (2 * med["1p1t"])
            row["efficiency_per_rep_median"] = statistics.median(
                [x / 2 for x in per_rep("2p1t", "1p1t")])
        if "pair" in med and "1p1t" in med:
            row["pair_efficiency"] = med["pair"] / (2 * med["1p1t"])
        for v in variants:
            if "1p1t" in med:
                row["efficiency_" + v] = med[v] / (2 * med["1p1t"])
        if "2p1t" in med and "pair" in med:
            row["2p1t_vs_pair"] = med["2p1t"] / med["pair"]
        if "2p1t" in med and "1p2t" in med:
            row["2p1t_vs_1p2t"] = med["2p1t"] / med["1p2t"]
            row["2p1t_vs_1p2t_per_rep_median"] = statistics.median(per_rep("2p1t", "1p2t"))
        summary[f"{config[0]}/{config[1]}"] = row

    pct = lambda x: "-" if x is None else f"{x:.0%}"
    num = lambda x: "-" if x is None else f"{x:,.0f}"
    ratio = lambda x: "-" if x is None else f"{x:.2f}x"
    head = ["model", "B", "1p1t", "1p2t", "2p1t", "pair", "efficiency", "2p1t/1p2t",
            "pair eff.", "2p1t/pair", *variants]
    table = []
    for config in configs:
        row = summary[f"{config[0]}/{config[1]}"]
        med = row["median_samples_per_s"]
        table.append([config[0], str(config[1]), num(med.get("1p1t")), num(med.get("1p2t")),
                      num(med.get("2p1t")), num(med.get("pair")), pct(row.get("efficiency")),
                      ratio(row.get("2p1t_vs_1p2t")), pct(row.get("pair_efficiency")),
                      pct(row.get("2p1t_vs_pair")),
                      *(f"{num(med.get(v))} ({pct(row.get('efficiency_' + v))})"
                        for v in variants)])
    widths = [max(len(r[i]) for r in table + [head]) for i in range(len(head))]
    line = lambda cells: "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths)) + " |"
    print("\nsamples/s of the whole job (medians over", args.reps, "interleaved launches)")
    print(line(head))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in table:
        print(line(r))

    goals = []
    for model, target in EFFICIENCY_GOALS.items():
        row = summary.get(f"{model}/{GOAL_BATCH}", {})
        value = row.get("efficiency")
        goals.append((f"efficiency {model} B={GOAL_BATCH}", pct(value), f">= {target:.0%}",
                      None if value is None else value >= target))
    for model in EFFICIENCY_GOALS:
        row = summary.get(f"{model}/{GOAL_BATCH}", {})
        value = row.get("2p1t_vs_1p2t")
        goals.append((f"2p1t vs 1p2t {model} B={GOAL_BATCH}", ratio(value), "> 1.00x",
                      None if value is None else value > 1.0))
    print()
    gw = [max(len(g[i]) for g in goals) for i in range(3)]
    for name, value, goal, met in goals:
        verdict = "not measured" if met is None else ("met" if met else "NOT met")
        print(f"  {name.ljust(gw[0])}  {value.rjust(gw[1])}  goal {goal.ljust(gw[2])}  {verdict}")
    seconds = round(time.time() - started, 1)
    background = run.BACKGROUND or [0]
    print(f"\n{seconds} s; CPU share other programs used during the launches: median "
          f"{statistics.median(background):.0%}, max {max(background):.0%}; waited "
          f"{quiet.waited:.0f} s for a quiet machine")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "command": " ".join(sys.argv), "seconds": seconds,
                       "variants": variants,
                       "steps": {f"{m}/{b}": STEPS[(m, b)] for m, b in configs},
                       "scale": args.scale, "summary": summary,
                       "goals": [{"goal": n, "measured": v, "target": g, "met": m}
                                 for n, v, g, m in goals],
                       "background_cpu": {"median": statistics.median(background),
                                          "max": max(background), "waited_s": quiet.waited},
                       "launches": {f"{m}/{b}": launches[(m, b)] for m, b in configs}},
                      f, indent=2)


if __name__ == "__main__":
    main()
