"""Runs accel's benchmarks and prints one table (docs/benchmarks.md). Use bench/run.sh, which
builds what this needs first.

  1. overhead  one process: runtime loop vs the plain LibTorch loop (interleaved, in one process)
  2. train     2 processes on Gloo: the C++ runtime vs Python Accelerate, per model
  3. sync      2 processes: gradient sync cost vs one raw c10d all-reduce of the same floats
"""
import argparse
import datetime
import json
import os
import platform
import resource
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK",
                 "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS")
# Per model: timed steps and warm-up steps of benchmark 2.
TRAIN_MODELS = {"mlp": (300, 30), "wide": (60, 6), "conv": (100, 10)}


def cpu_busy(seconds=0.5):
    """Fraction of all cores busy over `seconds`, from /proc/stat."""
    def sample():
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
        idle = values[3] + values[4]  # idle + iowait
        return sum(values), idle
    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    return 1.0 - (idle1 - idle0) / max(1, total1 - total0)


class QuietWaiter:
    """Waits before each timed launch until other programs leave the CPU (a shared 2-core
    machine: a compiler in the background halves a process's speed), within a total budget.
    (measured() then records what other programs used while a launch ran.)"""

    def __init__(self, threshold, budget):
        self.threshold, self.budget, self.waited, self.seen = threshold, budget, 0.0, []

    def __call__(self):
        busy = cpu_busy()
        while busy > self.threshold and self.waited < self.budget:
            time.sleep(1.0)
            self.waited += 1.5
            busy = cpu_busy()
        self.seen.append(busy)
        return busy


def cpu_seconds():
    """(busy CPU seconds of the whole machine, CPU seconds of our finished children)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    busy = (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return busy, children.ru_utime + children.ru_stime


def measured(launch):
    """Runs launch() and adds to its result the share of the CPU that other programs used
    meanwhile (machine busy time minus our processes' time, over wall time x cores)."""
    busy0, ours0 = cpu_seconds()
    start = time.time()
    result = launch()
    busy1, ours1 = cpu_seconds()
    wall = time.time() - start
    other = max(0.0, (busy1 - busy0) - (ours1 - ours0))
    result["background_cpu"] = round(other / (wall * os.cpu_count()), 3)
    BACKGROUND.append(result["background_cpu"])
    return result


BACKGROUND = []  # every launch's background_cpu


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(threads):
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env["OMP_NUM_THREADS"] = str(threads)
    env["MKL_NUM_THREADS"] = str(threads)
    return env


def json_line(text, what):
    for line in text.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"{what}: no result line in its output:\n{text}")


def wait_all(workers, timeout):
    """Each worker's output, in order; whatever still runs when one times out (or on any
    other error) is killed, so that no process outlives the benchmark."""
    outputs = []
    try:
        for w in workers:
            outputs.append(w.communicate(timeout=timeout)[0])
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    return outputs


def run_cpp_job(binary, args, processes, threads, timeout, extra_env=None):
    """Starts `processes` copies with torchrun's variables (there is no `accel launch` yet)."""
    port = free_port()
    workers = []
    for rank in range(processes):
        env = base_env(threads)
        env.update(extra_env or {})
        env.update(RANK=str(rank), WORLD_SIZE=str(processes), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(processes), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        workers.append(subprocess.Popen([binary, *args, "--threads", str(threads)], env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True))
    outputs = wait_all(workers, timeout)
    for rank, (w, out) in enumerate(zip(workers, outputs)):
        if w.returncode != 0:
            raise RuntimeError(f"accel_bench {' '.join(args)}: rank {rank} exited "
                               f"{w.returncode}:\n{out}")
    return json_line(outputs[0], "accel_bench " + " ".join(args))


def run_python_job(python, args, processes, threads, timeout):
    """Python Accelerate on CPU: torch.distributed.run starts the processes (accelerate launch
    --cpu starts only one process unless mpirun is used), Accelerator() picks MULTI_CPU/Gloo."""
    cmd = [python, "-m", "torch.distributed.run", f"--nproc_per_node={processes}",
           "--master_addr=127.0.0.1", f"--master_port={free_port()}",
           os.path.join(HERE, "py_train.py"), *args, "--threads", str(threads)]
    done = subprocess.run(cmd, env=base_env(threads), capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"py_train.py {' '.join(args)} exited {done.returncode}:\n"
                           f"{done.stdout}\n{done.stderr}")
    return json_line(done.stdout, "py_train.py")


def machine_info():
    """The machine, the software and the checkout a measurement ran on (every bench script's
    JSON carries it)."""
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    git = lambda *a: subprocess.run(["git", "-C", ROOT, *a], capture_output=True,
                                    text=True).stdout.strip()
    dirty = git("status", "--porcelain", "runtime")
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(memory, 1),
            "os": platform.platform(), "python": platform.python_version(),
            "commit": git("rev-parse", "--short", "HEAD") + (" (runtime/ modified)" if dirty else ""),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def machine():
    """machine_info() with the versions of torch and Accelerate the Python side ran."""
    import torch
    import accelerate
    return {**machine_info(), "torch": torch.__version__, "accelerate": accelerate.__version__}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=os.path.join(ROOT, "build-bench", "accel_bench"))
    parser.add_argument("--python", default=sys.executable,
                        help="Python with torch and accelerate (default: this one)")
    parser.add_argument("--threads", type=int, default=1, help="threads per process, both sides")
    parser.add_argument("--reps", type=int, default=5,
                        help="launches per side and model in benchmark 2 (interleaved)")
    parser.add_argument("--overhead-reps", type=int, default=60)
    parser.add_argument("--sync-reps", type=int, default=40)
    parser.add_argument("--sync-layers", type=int, default=8)
    parser.add_argument("--models", default=",".join(TRAIN_MODELS))
    parser.add_argument("--only", default="overhead,train,sync")
    parser.add_argument("--json", help="also write every result to this file")
    parser.add_argument("--quiet-threshold", type=float, default=0.15,
                        help="before each launch wait until at most this fraction of the CPU "
                             "is busy (other programs)")
    parser.add_argument("--quiet-budget", type=float, default=120,
                        help="seconds of such waiting in all, then run regardless")
    args = parser.parse_args()
    only = set(args.only.split(","))
    timeout = 300
    started = time.time()
    results = {"machine": machine(), "command": " ".join(sys.argv)}
    info = results["machine"]
    print(f"# {info['date']}  {info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB; "
          f"torch {info['torch']}, accelerate {info['accelerate']}; commit {info['commit']}",
          flush=True)

    quiet = QuietWaiter(args.quiet_threshold, args.quiet_budget)
    rows = []
    if "overhead" in only:
        quiet()
        env = base_env(args.threads)

        def overhead():
            done = subprocess.run([args.binary, "overhead", "--reps", str(args.overhead_reps),
                                   "--threads", str(args.threads)],
                                  env=env, capture_output=True, text=True, timeout=timeout)
            if done.returncode != 0:
                raise RuntimeError(f"accel_bench overhead exited {done.returncode}:\n"
                                   f"{done.stdout}{done.stderr}")
            return json_line(done.stdout, "accel_bench overhead")
        r = measured(overhead)
        results["overhead"] = r
        rows.append(("1 overhead, 1 process, mlp",
                     f"runtime {r['runtime_step_us']:.1f} us/step, plain {r['plain_step_us']:.1f} us/step",
                     f"{r['ratio_of_medians']:.3f}x time", "<= 1.02x",
                     r["ratio_of_medians"] <= 1.02))
        print(f"overhead: {r}", flush=True)

    if "train" in only:
        results["train"] = {}
        for model in args.models.split(","):
            steps, warmup = TRAIN_MODELS[model]
            job = ["--model", model, "--steps", str(steps), "--warmup", str(warmup)]
            # Three sides: the runtime as shipped (gradients summed through shared memory, as
            # both processes share the machine), the runtime with gradients on Gloo like the
            # Python side's, and Python Accelerate.
            sides = {"cpp": [], "cpp_gloo": [], "py": []}
            launch = {
                "cpp": lambda: run_cpp_job(args.binary, ["train", *job], 2, args.threads,
                                           timeout),
                "cpp_gloo": lambda: run_cpp_job(args.binary, ["train", *job], 2, args.threads,
                                                timeout, {"ACCELERATE_SHARED_MEMORY": "false"}),
                "py": lambda: run_python_job(args.python, job, 2, args.threads, timeout),
            }
            names = list(sides)
            for rep in range(args.reps):
                # The order rotates: no side always goes first.
                for side in names[rep % 3:] + names[:rep % 3]:
                    quiet()
                    sides[side].append(measured(launch[side]))
            cpp, cpp_gloo, py = sides["cpp"], sides["cpp_gloo"], sides["py"]
            c = statistics.median(r["steps_per_s"] for r in cpp)
            g = statistics.median(r["steps_per_s"] for r in cpp_gloo)
            p = statistics.median(r["steps_per_s"] for r in py)
            results["train"][model] = {"cpp": cpp, "cpp_gloo": cpp_gloo, "python": py,
                                       "cpp_median": c, "cpp_gloo_median": g,
                                       "python_median": p, "speedup": c / p,
                                       "speedup_gloo": g / p}
            goal = 1.5 if model == "mlp" else None
            rows.append((f"2 train, 2 processes, {model} ({cpp[0]['params']:,} params)",
                         f"C++ {c:.1f} steps/s (Gloo only {g:.1f}), Python {p:.1f} steps/s",
                         f"{c / p:.2f}x faster (Gloo only {g / p:.2f}x)",
                         ">= 1.5x" if goal else "(none)", c / p >= goal if goal else None))
            print(f"train {model}: C++ {[r['steps_per_s'] for r in cpp]} "
                  f"C++ Gloo only {[r['steps_per_s'] for r in cpp_gloo]} "
                  f"Python {[r['steps_per_s'] for r in py]} (background CPU "
                  f"{[r['background_cpu'] for r in cpp]} / {[r['background_cpu'] for r in cpp_gloo]}"
                  f" / {[r['background_cpu'] for r in py]})", flush=True)

    if "sync" in only:
        # As shipped (shared memory), then with the gradients on Gloo as well.
        for key, label, extra in (("sync", "", None),
                                  ("sync_gloo", ", Gloo only",
                                   {"ACCELERATE_SHARED_MEMORY": "false"})):
            quiet()
            r = measured(lambda: run_cpp_job(args.binary, ["sync", "--reps", str(args.sync_reps),
                                                           "--layers", str(args.sync_layers)],
                                             2, args.threads, timeout, extra))
            results[key] = r
            rows.append((f"3 sync{label}, 2 processes, {r['params']:,} params "
                         f"({r['megabytes']:.1f} MB)",
                         f"backward {r['backward_ms']:.1f} ms, +sync {r['backward_sync_ms']:.1f} ms "
                         f"-> sync {r['sync_ms']:.1f} ms; raw all-reduce "
                         f"{r['raw_allreduce_ms']:.1f} ms",
                         f"{r['sync_vs_raw']:.3f}x raw", ">= 0.9x", r["sync_vs_raw"] >= 0.9))
            print(f"{key}: {r}", flush=True)

    results["seconds"] = round(time.time() - started, 1)
    results["background_cpu"] = {"max": max(BACKGROUND, default=0),
                                 "median": statistics.median(BACKGROUND or [0]),
                                 "waited_s": quiet.waited}
    widths = [max(len(str(row[i])) for row in rows + [("benchmark", "measured", "ratio", "goal")])
              for i in range(4)]
    print()
    header = ("benchmark", "measured", "ratio", "goal", "met")
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths + [4])) + " |"
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths + [4]) + "|")
    for row in rows:
        met = "-" if row[4] is None else ("yes" if row[4] else "NO")
        print(line((*row[:4], met)))
    print(f"\n{results['seconds']} s; CPU share other programs used during the launches: median "
          f"{results['background_cpu']['median']:.0%}, max {results['background_cpu']['max']:.0%}; "
          f"waited {quiet.waited:.0f} s for a quiet machine")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
