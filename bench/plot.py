#!/usr/bin/env python3
"""Plots of issue 19's benchmarks, from the JSON files the benchmarks write (docs/benchmarks.md).

    /usr/bin/python3 bench/plot.py --scaling scaling.json --out docs/scaling.png
    /usr/bin/python3 bench/plot.py --machines 10g.json 1g.json --out docs/machines.png

--scaling (bench/scaling.py --json): per model, samples/s against the per-process batch for each
mode, beside the efficiency of 2 processes (2p1t / 2 x 1p1t) per model and batch, with the
issue's goals. --machines (bench/machines.py --json, one file or several: a later file's
bandwidths replace an earlier one's): the median step time of every side against the link's
bandwidth, with the wire bound. Needs Debian's python3-matplotlib.
"""
import argparse
import json
import sys

MODE_LABELS = {"1p1t": "1 process, 1 thread", "1p2t": "1 process, 2 threads",
               "2p1t": "2 processes (as shipped)", "pair": "2 independent jobs (ceiling)"}


def scaling_figure(plt, data):
    summary = data["summary"]
    models = list(dict.fromkeys(key.split("/")[0] for key in summary))
    batches = sorted({int(key.split("/")[1]) for key in summary})
    modes = [m for m in MODE_LABELS if any(m in row["median_samples_per_s"]
                                           for row in summary.values())]
    fig, axes = plt.subplots(1, len(models) + 1, figsize=(4.2 * (len(models) + 1), 4.2))
    for ax, model in zip(axes, models):
        for mode in modes:
            points = [(b, summary[f"{model}/{b}"]["median_samples_per_s"].get(mode))
                      for b in batches if f"{model}/{b}" in summary]
            points = [(b, v) for b, v in points if v is not None]
            ax.plot([b for b, _ in points], [v for _, v in points], marker="o",
                    label=MODE_LABELS[mode])
        ideal = [(b, 2 * summary[f"{model}/{b}"]["median_samples_per_s"]["1p1t"])
                 for b in batches if "1p1t" in summary.get(f"{model}/{b}", {}).get(
                     "median_samples_per_s", {})]
        ax.plot([b for b, _ in ideal], [v for _, v in ideal], linestyle="--", color="grey",
                label="2 x 1 process (the limit)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(batches)
        ax.set_xticklabels([str(b) for b in batches])
        ax.set_ylim(bottom=0)
        ax.set_title(model)
        ax.set_xlabel("batch per process")
        ax.set_ylabel("samples/s")
    axes[0].legend(fontsize="small", loc="upper left")

    ax = axes[-1]
    width = 0.8 / len(batches)
    for k, batch in enumerate(batches):
        values = [summary.get(f"{m}/{batch}", {}).get("efficiency", 0) * 100 for m in models]
        xs = [i + (k - (len(batches) - 1) / 2) * width for i in range(len(models))]
        ax.bar(xs, values, width, label=f"batch {batch}")
    for goal in data.get("goals", []):
        name = goal["goal"]
        if name.startswith("efficiency "):
            model = name.split()[1]
            if model in models:
                i = models.index(model)
                target = float(goal["target"].strip(">= %"))
                ax.hlines(target, i - 0.45, i + 0.45, colors="black", linestyles="dotted")
    ax.set_xticks(range(len(models)))
    ax.set_xticklabels(models)
    ax.set_ylim(0, 110)
    ax.set_ylabel("efficiency, % (dotted: goal at batch 64)")
    ax.set_title("2 processes / (2 x 1 process)")
    ax.legend(fontsize="small", loc="lower right")
    fig.suptitle(f"Scaling on one machine ({data['machine']['cores']} cores, commit "
                 f"{data['machine']['commit']}, medians of interleaved launches)")
    fig.tight_layout()
    return fig


def machines_figure(plt, data):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    rates = sorted(data["bandwidths"].values(), key=lambda entry: entry["bits_per_s"])
    gbits = [entry["bits_per_s"] / 1e9 for entry in rates]
    sides = list(dict.fromkeys(side for entry in rates for side in entry["sides"]))
    for side in sides:
        points = [(g, 1000 / entry["sides"][side]["median_steps_per_s"])
                  for entry, g in zip(rates, gbits)
                  if entry["sides"].get(side, {}).get("median_steps_per_s")]
        if points:
            ax.plot([g for g, _ in points], [ms for _, ms in points], marker="o", label=side)
    # The wire bound depends on the bytes a side sends: 32-bit gradients, or 16-bit ones.
    for hook, label in (("no", "wire bound, 32-bit gradients"),
                        ("bf16", "wire bound, 16-bit gradients")):
        bounds = [(g, 1000 / entry["sides"][side]["wire_bound_steps_per_s"])
                  for entry, g in zip(rates, gbits)
                  for side in [f"cpp/{hook}"] if side in entry["sides"]]
        if bounds:
            ax.plot([g for g, _ in bounds], [ms for _, ms in bounds], linestyle="--",
                    color="grey" if hook == "no" else "silver", label=label)
    ax.set_xscale("log")
    ax.set_xticks(gbits)
    ax.set_xticklabels([f"{g:g} Gbit/s" for g in gbits])
    ax.set_ylim(bottom=0)
    ax.set_ylabel("ms per step (median of launches)")
    ax.set_title(f"{data['settings']['model']} on 2 machines (netns + tbf), "
                 f"commits {', '.join(dict.fromkeys(data['commits']))}")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--scaling", help="bench/scaling.py --json output")
    source.add_argument("--machines", nargs="+", help="bench/machines.py --json output(s)")
    parser.add_argument("--out", required=True, help="the PNG to write")
    args = parser.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot.py: matplotlib is missing (Debian: apt-get install python3-matplotlib; "
                 "run with /usr/bin/python3)")
    try:
        if args.scaling:
            with open(args.scaling) as f:
                fig = scaling_figure(plt, json.load(f))
        else:
            data = {"bandwidths": {}, "commits": []}
            for path in args.machines:
                with open(path) as f:
                    part = json.load(f)
                data["settings"] = part["settings"]
                data["commits"].append(part.get("commit", "?").split()[0])
                data["bandwidths"].update(part["bandwidths"])
            fig = machines_figure(plt, data)
    except (OSError, ValueError, KeyError) as error:
        sys.exit(f"plot.py: cannot plot {args.scaling or args.machines}: {error!r}")
    fig.savefig(args.out, dpi=100)
    print(f"plot.py: wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
