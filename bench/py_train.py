"""Benchmark 2 (Python side): the training loop of src/train.cpp with Hugging Face Accelerate.

Started by bench/run.py through torch.distributed.run (2 processes, Gloo on CPU). Same models,
data shapes, per-process batch, optimizer and thread count as the C++ side; rank 0 prints one
JSON line.
"""
import argparse
import json
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from accelerate import Accelerator


def make_model(name):
    # Keep in step with make_model in src/main.cpp.
    if name == "mlp":
        return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    if name == "wide":
        return nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                             nn.Linear(2048, 10))
    if name == "conv":
        return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    raise ValueError(f"unknown model {name!r}")


SAMPLE_SHAPE = {"mlp": (64,), "wide": (512,), "conv": (1, 28, 28)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = make_model(args.model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    generator = torch.Generator().manual_seed(1234)
    inputs = torch.randn((args.samples, *SAMPLE_SHAPE[args.model]), generator=generator)
    targets = torch.randint(10, (args.samples,), generator=generator)
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=args.batch, shuffle=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    done, start, last_loss = 0, None, 0.0
    total = args.warmup + args.steps
    while done < total:
        for data, target in loader:
            if done == args.warmup:
                accelerator.wait_for_everyone()
                start = time.perf_counter()
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(data), target)
            accelerator.backward(loss)
            optimizer.step()
            done += 1
            if done == total:
                last_loss = loss.item()
                break
    accelerator.wait_for_everyone()
    elapsed = time.perf_counter() - start
    if accelerator.is_main_process:
        print(json.dumps({
            "bench": "train", "impl": "python", "model": args.model,
            "processes": accelerator.num_processes,
            "distributed_type": str(accelerator.distributed_type), "batch": args.batch,
            "steps": args.steps, "params": sum(p.numel() for p in model.parameters()),
            "seconds": round(elapsed, 4), "steps_per_s": round(args.steps / elapsed, 3),
            "loss": round(last_loss, 4)}), flush=True)
    # An orderly shutdown (outside the timed region): left to interpreter exit, Gloo's threads
    # sometimes abort the process ("terminate called without an active exception").
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
