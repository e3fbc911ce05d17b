#!/usr/bin/env python3
"""Data-parallel training on two "machines" joined by a real, rate-limited network.

Two network namespaces on this host, joined by a veth pair (10.232.0.1 and 10.232.0.2), both
ends limited by a tbf qdisc to each bandwidth of --bandwidths in turn (bench/netns.py). Per
bandwidth, the training benchmark (bench/src/train.cpp, bench/py_train.py) runs as a 2-machine
job with one process per machine, for each side of --sides:

  cpp/no, cpp/bf16, cpp/fp16,  `accel launch --num_machines 2 ... [--comm_hook H] accel_bench
  cpp/powersgd                 train` in each namespace
  python/no, python/bf16, ...  `python -m torch.distributed.run --nnodes 2 --nproc_per_node 1
                               ... py_train.py [--comm_hook H]` in each namespace (Accelerate's
                               DistributedDataParallelKwargs(comm_hook=...))

PowerSGD runs with rank --powersgd-rank and compresses from the third step on both sides
(start_powerSGD_iter 2, the least torch accepts), so the warm-up covers the uncompressed steps.

The sides' order rotates from one repetition to the next; the table gives medians. Every
launch records what the programs say they used: each rank's gradient transport (C++: the
`accel launch -v` line "accelerate: rank R of 2: gradients are summed through ..."; Python:
torch.distributed.get_backend()) and the gradient compression (C++: Accelerator::comm_hook();
Python: the hook DDP logged).

Wire bound. A step all-reduces G = P x b bytes of gradients (P parameters, b = 4 bytes
uncompressed, 2 with fp16/bf16). Gloo's ring all-reduce on n processes sends 2(n-1)/n x G
bytes out of each process (reduce-scatter, then all-gather); for n = 2 that is G: each process
sends the other half of its buffer, then its summed half back, so each direction of the link
carries G per step, both directions at once. Each direction is shaped to R bit/s, and tbf
counts Ethernet frames: 1448 bytes of TCP payload per 1514-byte frame (MTU 1500, TCP
timestamps). So

    steps/s <= R x 1448 / (8 x P x b x 1514)      (R in bit/s)

wide (5,267,466 params) at 1 Gbit/s: 5.67 steps/s uncompressed, 11.35 with bf16; at 10 Gbit/s
56.7 and 113.5 (above what 2 cores compute). PowerSGD sends each compressed rows x cols matrix as
(rows + cols) x r fp32 values (P, then Q) and the rest as it is: for wide at rank 1, 12,820
values, 51 KB a step (the bound is thousands of steps/s: the CPU decides). A side reaches the bound only if the all-reduce
overlaps all of forward and backward; the table shows each side's share of it.

--check verifies the namespaces, the shaping and the teardown (no timing assertions) and
exits non-zero on any failure. Needs root. Run it from the repository: bench/machines.py.
"""
import argparse
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import netns  # noqa: E402
import run as bench_run  # noqa: E402  (QuietWaiter, measured, base_env, json_line)

# Parameter counts (bench/src/bench.h), for the wire bound and the step counts before the
# first launch reports the real count.
MODEL_PARAMS = {"mlp": 85_002, "wide": 5_267_466, "conv": 206_922}
# Their parameters' shapes, for what PowerSGD sends.
MODEL_SHAPES = {
    "mlp": [(256, 64), (256,), (256, 256), (256,), (10, 256), (10,)],
    "wide": [(2048, 512), (2048,), (2048, 2048), (2048,), (10, 2048), (10,)],
    "conv": [(16, 1, 3, 3), (16,), (32, 16, 3, 3), (32,), (128, 1568), (128,), (10, 128), (10,)],
}
VALUE_BYTES = {"no": 4, "fp16": 2, "bf16": 2, "powersgd": 4}
FRAME = 1514 / 1448  # bytes on the wire (Ethernet frame) per byte of TCP payload
IMPLS = {"cpp": "C++", "python": "Python"}
TRANSPORT_LINE = re.compile(r"accelerate: rank (\d+) of (\d+): gradients are summed through (.+)$")
RANK_PREFIX = re.compile(r"^\[rank\d+\] ")


def default_python():
    for candidate in (os.path.join(HERE, ".venv", "bin", "python"),
                      os.path.join(ROOT, ".venv-accelerate", "bin", "python")):
        if os.path.exists(candidate):
            return candidate
    return sys.executable


def wire_values(model, hook, params, rank=1):
    """Values each direction of the link carries per step: every parameter's gradient, or with
    PowerSGD the factors of the matrices it compresses (DDP's rule: when they are less than
    half the matrix) and the rest as it is."""
    if hook != "powersgd":
        return params
    values = 0
    for shape in MODEL_SHAPES[model]:
        numel = math.prod(shape)
        if len(shape) < 2:
            values += numel
            continue
        rows, cols = shape[0], numel // shape[0]
        r = min(rank, rows, cols)
        values += (rows + cols) * r if (rows + cols) * r * 2 < rows * cols else numel
    return values


def wire_bound(values, hook, bits):
    """Steps per second the link allows (see the module's docstring)."""
    return bits / (8 * values * VALUE_BYTES[hook] * FRAME)


def side_label(side):
    impl, hook = side.split("/")
    return f"{IMPLS[impl]}, " + ("no compression" if hook == "no" else hook)


def strip_prefixes(text):
    return "\n".join(RANK_PREFIX.sub("", line) for line in text.splitlines())


# ---- one 2-machine job ----------------------------------------------------------------------
def run_machines(argvs, env, timeout):
    """Starts argvs[0] and argvs[1] (one per machine) and waits for both; a failure of one
    stops the other after a grace period. Returns (exit codes, outputs)."""
    procs, outputs, readers = [], ["", ""], []
    try:
        for m, argv in enumerate(argvs):
            p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, errors="replace", start_new_session=True)
            procs.append(p)

            def read(m=m, p=p):
                outputs[m] = p.stdout.read()
            readers.append(threading.Thread(target=read, daemon=True))
            readers[-1].start()
        deadline, failed_at = time.time() + timeout, None
        while any(p.poll() is None for p in procs):
            if time.time() > deadline:
                raise TimeoutError(f"the job ran past {timeout} s")
            if failed_at is None and any(p.poll() not in (None, 0) for p in procs):
                failed_at = time.time()
            if failed_at is not None and time.time() - failed_at > 10:
                break  # the other machine waits for a peer that is gone
            time.sleep(0.1)
    finally:
        for p in procs:
            stop_group(p)
        for t in readers:
            t.join(timeout=5)
    return [p.returncode for p in procs], outputs


def stop_group(p):
    """Ends the process group of one of our launches (started with start_new_session, so its
    group id is its own process id): SIGTERM, then SIGKILL."""
    if p.poll() is not None:
        return
    for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            pass


class Bench:
    def __init__(self, args, pair, hf_home):
        self.args, self.pair, self.hf_home = args, pair, hf_home
        self.port = 29500
        self.problems = []

    def env(self):
        env = bench_run.base_env(self.args.threads)
        env["HF_HOME"] = self.hf_home  # no user's default_config.yaml on either side
        return env

    def argv(self, side, m, port, steps, warmup):
        impl, hook = side.split("/")
        a, pair = self.args, self.pair
        job = ["--model", a.model, "--batch", str(a.batch), "--steps", str(steps),
               "--warmup", str(warmup), "--threads", str(a.threads)]
        if impl == "cpp":
            cmd = [a.accel, "launch", "--num_machines", "2", "--num_processes", "2",
                   "--machine_rank", str(m), "--main_process_ip", pair.addresses[0],
                   "--main_process_port", str(port), "--rdzv_timeout", "120", "-v"]
            if hook != "no":
                cmd += ["--comm_hook", hook]
            if hook == "powersgd":
                cmd += ["--powersgd_rank", str(a.powersgd_rank), "--powersgd_start_iter", "2"]
            cmd += [a.binary, "train", *job]
        else:
            cmd = [a.python, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1",
                   f"--node_rank={m}", f"--master_addr={pair.addresses[0]}",
                   f"--master_port={port}", os.path.join(HERE, "py_train.py"), *job]
            if hook != "no":
                cmd += ["--comm_hook", hook]
            if hook == "powersgd":
                cmd += ["--powersgd_rank", str(a.powersgd_rank), "--powersgd_start_iter", "2"]
        return pair.exec_argv(m, cmd, {"GLOO_SOCKET_IFNAME": pair.veth[m]})

    def launch(self, side, steps, warmup):
        """One 2-machine job; the result line of rank 0 plus what the launch recorded."""
        impl, hook = side.split("/")
        self.port += 1
        argvs = [self.argv(side, m, self.port, steps, warmup) for m in (0, 1)]
        link0 = self.pair.link_bytes(0)
        qdisc0 = [self.pair.qdisc(m)[0] or {} for m in (0, 1)]
        started = time.time()
        codes, outputs = run_machines(argvs, self.env(), self.args.timeout)
        wall = time.time() - started
        link1 = self.pair.link_bytes(0)
        qdisc1 = [self.pair.qdisc(m)[0] or {} for m in (0, 1)]
        text = [strip_prefixes(o) for o in outputs]
        if any(codes):
            raise RuntimeError(f"{side}: machine exit codes {codes}\n--- machine 0:\n{outputs[0]}"
                               f"\n--- machine 1:\n{outputs[1]}\ncommand (machine 0): "
                               + " ".join(argvs[0]))
        result = bench_run.json_line(text[0], side)
        result["command"] = [" ".join(argv) for argv in argvs]
        result["wall_s"] = round(wall, 1)  # the whole launch: start-up, rendezvous, warm-up
        moved = (link1[0] - link0[0], link1[1] - link0[1])
        # Bytes each direction carried during the launch (set-up and warm-up included), as
        # the tbf counts them (Ethernet frames, headers included: what the rate limits) and as
        # the veth counts them (GSO packets, about the TCP payload).
        framed = [q1.get("bytes", 0) - q0.get("bytes", 0) for q0, q1 in zip(qdisc0, qdisc1)]
        result["wire"] = {
            "tbf_bytes_0_to_1": framed[0], "tbf_bytes_1_to_0": framed[1],
            "veth_bytes_0_to_1": moved[0], "veth_bytes_1_to_0": moved[1],
            "per_step_0_to_1": round(framed[0] / (steps + warmup)),
            "per_step_1_to_0": round(framed[1] / (steps + warmup)),
            "qdisc_drops": [q1.get("drops", 0) - q0.get("drops", 0)
                            for q0, q1 in zip(qdisc0, qdisc1)],
            "qdisc_overlimits": [q1.get("overlimits", 0) - q0.get("overlimits", 0)
                                 for q0, q1 in zip(qdisc0, qdisc1)]}
        if "refused" in result:
            return result
        # What the programs say they used.
        if impl == "cpp":
            ranks = {}
            for m in (0, 1):
                for line in text[m].splitlines():
                    found = TRANSPORT_LINE.search(line)
                    if found:
                        ranks[int(found.group(1))] = {"machine": m, "transport": found.group(3)}
            result["ranks"] = [dict(rank=r, **ranks[r]) for r in sorted(ranks)]
            transports = [ranks.get(r, {}).get("transport") for r in (0, 1)]
        else:
            transports = [r.get("backend") for r in result.get("ranks", [])]
            hooks = [r.get("comm_hook") for r in result.get("ranks", [])]
            if hooks != [hook, hook]:
                self.problem(f"{side}: ranks report comm hooks {hooks}, asked for {hook}")
        result["transports"] = transports
        if len(transports) != 2 or not all(t and t.startswith("gloo") for t in transports):
            self.problem(f"{side}: ranks report gradient transports {transports}, expected gloo "
                         "across the veth pair")
        if result.get("comm_hook") != hook:
            self.problem(f"{side}: the program reports comm_hook {result.get('comm_hook')!r}, "
                         f"asked for {hook!r}")
        return result

    def problem(self, text):
        print(f"PROBLEM: {text}", flush=True)
        self.problems.append(text)


# ---- the benchmark --------------------------------------------------------------------------
def plan_steps(args, side, bits):
    """(steps, warmup): --steps/--warmup, else enough steps for --seconds of timed steady
    state at the wire bound or --max-steps-per-s, whichever is lower (a launch cannot go
    faster than either, so it times at least --seconds)."""
    hook = side.split("/")[1]
    values = wire_values(args.model, hook, MODEL_PARAMS[args.model], args.powersgd_rank)
    rate = min(wire_bound(values, hook, bits), args.max_steps_per_s)
    steps = args.steps or max(10, math.ceil(args.seconds * rate))
    warmup = args.warmup if args.warmup is not None else max(3, math.ceil(steps / 10))
    return steps, warmup


def benchmark(args):
    sides = args.sides.split(",")
    for side in sides:
        impl, _, hook = side.partition("/")
        if impl not in IMPLS or hook not in VALUE_BYTES:
            sys.exit(f"machines.py: unknown side {side!r} (impl/hook: impl in cpp, python; "
                     "hook in no, fp16, bf16, powersgd)")
    bandwidths = [(b, netns.parse_rate(b)) for b in args.bandwidths.split(",")]
    if any(s.startswith("cpp/") for s in sides):
        for path in (args.accel, args.binary):
            if not os.access(path, os.X_OK):
                sys.exit(f"machines.py: {path} is missing; build it (bench/run.sh, or the cmake "
                         "commands in it) or pass --accel/--binary")
    started = time.time()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "runtime", "bench"],
                           capture_output=True, text=True).stdout.strip()
    info = machine_info(args.python)
    results = {"machine": info, "command": " ".join(sys.argv),
               "commit": commit + (" (runtime/ or bench/ modified)" if dirty else ""),
               "settings": {k: v for k, v in vars(args).items() if k != "json"},
               "wire_bound_formula": "steps/s <= R * 1448 / (8 * P * b * 1514): each direction "
                                     "carries the P*b gradient bytes once per step (ring "
                                     "all-reduce, 2 processes), tbf counts 1514-byte frames "
                                     "for 1448 bytes of TCP payload",
               "bandwidths": {}}
    print(f"# {info.get('date', '')}  {info.get('cpu', '?')}, {info.get('cores', '?')} cores; "
          f"torch {info.get('torch', '?')}, accelerate {info.get('accelerate', '?')}; "
          f"commit {results['commit']}", flush=True)
    quiet = bench_run.QuietWaiter(args.quiet_threshold, args.quiet_budget)
    hf_home = tempfile.mkdtemp(prefix="accel-machines-hf-")
    refused = {}
    tables = []
    pair = netns.TwoMachines()
    bench = Bench(args, pair, hf_home)
    try:
        with pair:
            for name, bits in bandwidths:
                shaping = pair.shape(bits, args.burst, args.latency)
                qdiscs = [pair.qdisc(m) for m in (0, 1)]
                for m, (q, text) in enumerate(qdiscs):
                    if not q or q.get("kind") != "tbf" or q["options"]["rate"] * 8 != bits:
                        raise RuntimeError(f"machine {m}: the veth's qdisc is not tbf at {name}: "
                                           f"{text}")
                entry = {"bits_per_s": bits, "burst_bytes": shaping[1], "latency": shaping[2],
                         "qdisc": [text for _, text in qdiscs], "sides": {}}
                results["bandwidths"][name] = entry
                plans = {s: plan_steps(args, s, bits) for s in sides}
                launches = {s: [] for s in sides}
                print(f"\n== {netns.format_rate(bits)}: tbf burst {shaping[1]} B, latency "
                      f"{shaping[2]}; steps (warm-up) per side: "
                      + ", ".join(f"{s} {p[0]} ({p[1]})" for s, p in plans.items()), flush=True)
                for rep in range(args.reps):
                    order = sides[rep % len(sides):] + sides[:rep % len(sides)]
                    for side in order:
                        if side in refused:
                            continue
                        quiet()
                        try:
                            r = bench_run.measured(lambda: bench.launch(side, *plans[side]))
                        except (RuntimeError, TimeoutError, ValueError) as error:
                            # One failed launch costs its numbers, not the whole run's.
                            bench.problem(f"{name} {side}: launch failed: {error}")
                            launches[side].append({"failed": str(error)[-4000:]})
                            continue
                        if "refused" in r:
                            refused[side] = r["refused"]
                            print(f"  {side}: refused: {r['refused']}", flush=True)
                        else:
                            short = "/".join(sorted({(t or "?").split(" ")[0]
                                                     for t in r["transports"]}))
                            print(f"  {side}: {r['steps_per_s']:.2f} steps/s "
                                  f"(transport {short} x{len(r['transports'])}, "
                                  f"comm_hook {r['comm_hook']}, "
                                  f"{r['wire']['per_step_0_to_1'] / 1e6:.1f} MB/step 0->1, "
                                  f"background CPU {r['background_cpu']:.0%})", flush=True)
                        launches[side].append(r)
                tables.append(summarize(args, name, bits, entry, sides, plans, launches,
                                        refused))
    finally:
        shutil.rmtree(hf_home, ignore_errors=True)
    left = pair.leftovers()
    if left:
        bench.problem("left after teardown: " + ", ".join(left))
    results["problems"] = bench.problems
    results["seconds"] = round(time.time() - started, 1)
    results["background_cpu"] = {"max": max(bench_run.BACKGROUND, default=0),
                                 "median": statistics.median(bench_run.BACKGROUND or [0]),
                                 "waited_s": quiet.waited}
    print()
    for table in tables:
        print(table)
    print(f"{results['seconds']} s; CPU share other programs used during the launches: median "
          f"{results['background_cpu']['median']:.0%}, max "
          f"{results['background_cpu']['max']:.0%}; waited {quiet.waited:.0f} s for a quiet "
          "machine")
    if bench.problems:
        print("PROBLEMS:\n  " + "\n  ".join(bench.problems))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 1 if bench.problems else 0


def summarize(args, name, bits, entry, sides, plans, launches, refused):
    """Fills entry['sides'] and entry['ratios']; returns the markdown table for `name`."""
    params = next((r["params"] for rs in launches.values() for r in rs if "params" in r),
                  MODEL_PARAMS[args.model])
    medians = {}
    rows = []
    for side in sides:
        hook = side.split("/")[1]
        bound = wire_bound(wire_values(args.model, hook, params, args.powersgd_rank), hook, bits)
        ok = [r for r in launches[side] if "steps_per_s" in r]
        data = {"steps": plans[side][0], "warmup": plans[side][1], "launches": launches[side],
                "wire_bound_steps_per_s": round(bound, 3)}
        if side in refused:
            data["refused"] = refused[side]
            rows.append(f"| {side_label(side)} | refused: {refused[side]} | | | | | | |")
        elif ok:
            median = statistics.median(r["steps_per_s"] for r in ok)
            medians[side] = median
            samples = median * args.batch * 2
            per_step = [statistics.median(r["wire"][f"per_step_{d}"] for r in ok)
                        for d in ("0_to_1", "1_to_0")]
            transports = sorted({(t or "?").split(" ")[0] for r in ok for t in r["transports"]})
            data.update(median_steps_per_s=median, samples_per_s=round(samples, 1),
                        of_wire_bound=round(median / bound, 3))
            rows.append(f"| {side_label(side)} | {median:.2f} | {samples:.0f} | "
                        f"{median / bound:.0%} of {bound:.2f} | "
                        f"{', '.join('%.2f' % r['steps_per_s'] for r in ok)} | "
                        f"{per_step[0] / 1e6:.1f} / {per_step[1] / 1e6:.1f} MB | "
                        f"{'/'.join(transports)} x2 | "
                        f"{max(r['background_cpu'] for r in ok):.0%} |")
        entry["sides"][side] = data
    ratios = []
    is_goal_rate = bits == 10**9

    def ratio(label, a, b, goal=None):
        if a not in sides or b not in sides:
            return
        if a in refused or b in refused:
            which = a if a in refused else b
            ratios.append((label, f"- ({which} refused)", "", ""))
            entry.setdefault("ratios", {})[label] = None
            return
        if a not in medians or b not in medians:
            return
        value = medians[a] / medians[b]
        entry.setdefault("ratios", {})[label] = round(value, 3)
        goal_text = f">= {goal}x" if goal and is_goal_rate else "-"
        met = ("yes" if value >= goal else "NO") if goal and is_goal_rate else "-"
        ratios.append((label, f"{value:.2f}x", goal_text, met))

    ratio("C++ / Python, no compression", "cpp/no", "python/no", 1.2)
    for hook in ("bf16", "fp16"):
        ratio(f"C++ {hook} / C++ no compression", f"cpp/{hook}", "cpp/no",
              1.7 if hook == "bf16" else None)
        ratio(f"Python {hook} / Python no compression", f"python/{hook}", "python/no")
        ratio(f"C++ {hook} / Python {hook}", f"cpp/{hook}", f"python/{hook}")
    ratio("C++ powersgd / C++ no compression", "cpp/powersgd", "cpp/no")
    ratio("Python powersgd / Python no compression", "python/powersgd", "python/no")
    ratio("C++ powersgd / Python powersgd", "cpp/powersgd", "python/powersgd")
    # torch refuses the bf16 hook on CPU; fp16 puts the same bytes on the wire.
    ratio("C++ bf16 / Python fp16 (same bytes on the wire)", "cpp/bf16", "python/fp16")
    lines = [f"### {netns.format_rate(bits)} ({name}): tbf on both veth ends, burst "
             f"{entry['burst_bytes']} B, latency {entry['latency']}; model {args.model} "
             f"({params:,} params), 2 machines x 1 process, batch {args.batch} per process",
             f"wire bound: {params * 4 / 1e6:.2f} MB of fp32 gradients per step -> "
             f"{wire_bound(params, 'no', bits):.2f} steps/s; bf16/fp16 {params * 2 / 1e6:.2f} MB "
             f"-> {wire_bound(params, 'bf16', bits):.2f} steps/s",
             "",
             "| side | steps/s | samples/s | of wire bound (steps/s) | launches (steps/s) | "
             "wire per step 0->1 / 1->0 | transport | background CPU (max) |",
             "|---|---:|---:|---|---|---:|---|---:|", *rows, "",
             "| ratio | value | goal | met |", "|---|---:|---|---|",
             *(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in ratios), ""]
    return "\n".join(lines)


def machine_info(python):
    """run.py's machine() (CPU, memory, torch and accelerate versions), run by `python`."""
    code = ("import json, sys; sys.path.insert(0, %r); import run; print(json.dumps(run.machine()))"
            % HERE)
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"error": done.stderr.strip()[-500:]}


# ---- --check --------------------------------------------------------------------------------
class CheckFailed(Exception):
    pass


def check(args):
    """Verifies the set-up, the shaping, reachability and the teardown; no timing assertions."""
    done = []

    def ok(what):
        done.append(what)
        print(f"ok: {what}", flush=True)

    def expect(condition, what):
        if not condition:
            raise CheckFailed(what)

    bandwidths = [(b, netns.parse_rate(b)) for b in args.bandwidths.split(",")]
    pair = netns.TwoMachines()
    try:
        with pair:
            listed = netns.namespaces()
            expect(all(ns in listed for ns in pair.ns),
                   f"namespaces {pair.ns} not in `ip netns list`: {listed}")
            ok(f"namespaces {pair.ns[0]} and {pair.ns[1]} exist")
            for m in (0, 1):
                out = subprocess.run(["ip", "-n", pair.ns[m], "-j", "addr", "show", "dev",
                                      pair.veth[m]], capture_output=True, text=True).stdout
                addresses = [a["local"] for link in json.loads(out or "[]")
                             for a in link.get("addr_info", []) if a.get("family") == "inet"]
                up = "UP" in (json.loads(out or "[{}]")[0].get("flags") or [])
                expect(pair.addresses[m] in addresses and up,
                       f"{pair.veth[m]} in {pair.ns[m]}: addresses {addresses}, up {up}; "
                       f"expected {pair.addresses[m]}, up")
                ok(f"{pair.veth[m]} is up in {pair.ns[m]} with {pair.addresses[m]}")
            for name, bits in bandwidths:
                rate, burst, latency = pair.shape(bits, args.burst, args.latency)
                for m in (0, 1):
                    q, text = pair.qdisc(m)
                    expect(q is not None and q.get("kind") == "tbf",
                           f"{pair.veth[m]} in {pair.ns[m]}: root qdisc is not tbf:\n{text}")
                    expect(q["options"]["rate"] * 8 == bits,
                           f"{pair.veth[m]}: tbf rate {q['options']['rate'] * 8} bit/s, asked "
                           f"{bits} ({name}):\n{text}")
                    # tc stores the burst as time at the rate: it reads back rounded.
                    expect(abs(q["options"]["burst"] - burst) <= max(64, burst // 100),
                           f"{pair.veth[m]}: tbf burst {q['options']['burst']}, asked {burst}")
                    ok(f"{name}: `tc -s qdisc show` in {pair.ns[m]}: "
                       f"{text.splitlines()[0].strip()}")
                # Reachability both ways, through the shaped veth (the qdisc counts the bytes).
                nbytes = max(1 << 20, min(64 << 20, bits // 8 // 4))
                for sender in (0, 1):
                    receiver = 1 - sender
                    before = (pair.qdisc(sender)[0]["bytes"], pair.link_bytes(sender)[0])
                    got, seconds = netns.transfer(pair, sender, nbytes, python=sys.executable)
                    after = (pair.qdisc(sender)[0]["bytes"], pair.link_bytes(sender)[0])
                    expect(got == nbytes, f"TCP {pair.addresses[sender]} -> "
                                          f"{pair.addresses[receiver]}: {got} of {nbytes} bytes")
                    expect(after[0] - before[0] >= nbytes,
                           f"{pair.veth[sender]}'s tbf counted {after[0] - before[0]} bytes for "
                           f"{nbytes} sent: the traffic did not go through it")
                    ok(f"{name}: TCP {pair.ns[sender]} ({pair.addresses[sender]}) -> "
                       f"{pair.ns[receiver]} ({pair.addresses[receiver]}): {nbytes} bytes, "
                       f"{after[0] - before[0]} through the tbf (frames with headers, as it "
                       f"counts them), {after[1] - before[1]} through the veth (GSO packets); "
                       f"{nbytes * 8 / seconds / 1e6:.0f} Mbit/s of payload (information, "
                       "not checked)")
        left = pair.leftovers()
        expect(not left, "left after teardown: " + ", ".join(left))
        ok(f"teardown: nothing of {pair.ns[0]}, {pair.ns[1]} or the veth pair is left")

        # Teardown on a signal, and the sweep of a pair whose creator was SIGKILLed.
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
            code = ("import sys, time; sys.path.insert(0, %r); import netns; "
                    "netns.install_signal_handlers(); p = netns.TwoMachines().up(); "
                    "print(' '.join(p.ns), flush=True); time.sleep(120)" % HERE)
            child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                     text=True)
            try:
                names = child.stdout.readline().split()
                expect(len(names) == 2 and all(n in netns.namespaces() for n in names),
                       f"a child's pair was not created: {names}")
                child.send_signal(sig)
                child.wait(timeout=30)
            finally:
                if child.poll() is None:
                    child.kill()
                    child.wait()
            if sig == signal.SIGKILL:
                expect(all(n in netns.namespaces() for n in names),
                       "a SIGKILLed creator's pair vanished by itself?")
                removed = netns.remove_stale()
                expect(sorted(removed) == sorted(names),
                       f"remove_stale() removed {removed}, expected {names}")
            left = [n for n in names if n in netns.namespaces()]
            expect(not left, f"after {signal.Signals(sig).name} to its creator, left: {left}")
            ok(f"{signal.Signals(sig).name} to a pair's creator: nothing left"
               + (" once remove_stale() ran (as every new pair does)"
                  if sig == signal.SIGKILL else ""))
    except CheckFailed as failure:
        print(f"FAILED: {failure}", file=sys.stderr, flush=True)
        return 1
    except Exception as error:  # set-up errors: no root, no `ip`, no tbf, ...
        print(f"FAILED: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        return 1
    finally:
        pair.down()
    print(f"machines.py --check: all {len(done)} checks passed", flush=True)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    bench_build = os.environ.get("ACCEL_BENCH_BUILD_DIR", os.path.join(ROOT, "build-bench"))
    build = os.environ.get("ACCEL_BUILD_DIR", os.path.join(ROOT, "build"))
    parser.add_argument("--check", action="store_true",
                        help="verify namespaces, shaping, reachability and teardown; no timing")
    parser.add_argument("--bandwidths", default="1gbit,10gbit",
                        help="tc rates, comma-separated (bit units: kbit, mbit, gbit)")
    parser.add_argument("--sides",
                        default="cpp/no,cpp/bf16,cpp/fp16,cpp/powersgd,python/no,python/bf16,"
                                "python/fp16,python/powersgd",
                        help="impl/hook, impl in cpp, python; hook in no, fp16, bf16, powersgd. torch "
                             "refuses the bf16 hook on CPU (Gloo): python/bf16 is recorded as "
                             "refused after its first launch, python/fp16 is the compressed "
                             "Python side")
    parser.add_argument("--reps", type=int, default=3, help="launches per side and bandwidth")
    parser.add_argument("--powersgd-rank", type=int, default=1,
                        help="PowerSGD's matrix_approximation_rank, both sides")
    parser.add_argument("--model", default="wide", choices=sorted(MODEL_PARAMS))
    parser.add_argument("--batch", type=int, default=64, help="per process")
    parser.add_argument("--threads", type=int, default=1, help="compute threads per process")
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="timed steady state per launch at least (chooses the steps)")
    parser.add_argument("--max-steps-per-s", type=float, default=20.0,
                        help="what the model trains at with gradients on Gloo and no network "
                             "limit (wide: 19 steps/s on 2 cores, docs/benchmarks.md), for "
                             "choosing the steps where the wire bound is higher")
    parser.add_argument("--steps", type=int, help="timed steps per launch (default: --seconds)")
    parser.add_argument("--warmup", type=int, help="warm-up steps (default: steps/10, >= 3)")
    parser.add_argument("--burst", type=int,
                        help="tbf burst in bytes (default: 1 ms of the rate, >= 64 KiB)")
    parser.add_argument("--latency", default="10ms", help="tbf latency (bounds its queue)")
    parser.add_argument("--accel", default=os.path.join(build, "bin", "accel"))
    parser.add_argument("--binary", default=os.path.join(bench_build, "accel_bench"))
    parser.add_argument("--python", default=default_python(),
                        help="Python with torch and accelerate (default: bench/.venv, else "
                             ".venv-accelerate)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per launch")
    parser.add_argument("--json", help="also write every number to this file")
    parser.add_argument("--quiet-threshold", type=float, default=0.15)
    parser.add_argument("--quiet-budget", type=float, default=120)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("machines.py: needs root (ip netns, tc)")
    netns.install_signal_handlers()
    sys.exit(check(args) if args.check else benchmark(args))


if __name__ == "__main__":
    main()
