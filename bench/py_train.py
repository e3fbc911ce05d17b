"""Benchmark 2 (Python side): the training loop of src/train.cpp with Hugging Face Accelerate.

Started by bench/run.py through torch.distributed.run (2 processes, Gloo on CPU), or by
bench/machines.py on two machines (one torchrun per machine). Same models, data shapes,
per-process batch, optimizer and thread count as the C++ side; rank 0 prints one JSON line,
with what each rank used: the process group's backend and the DDP communication hook (the
gradient compression, Accelerate's DistributedDataParallelKwargs(comm_hook=...)).
"""
import argparse
import json
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from accelerate import Accelerator
from accelerate.utils import DDPCommunicationHookType, DistributedDataParallelKwargs


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


def used(model):
    """This rank's process-group backend and DDP communication hook, as torch reports them."""
    dist = torch.distributed
    record = {"rank": dist.get_rank() if dist.is_initialized() else 0,
              "backend": dist.get_backend() if dist.is_initialized() else "none (one process)",
              "ddp": isinstance(model, nn.parallel.DistributedDataParallel),
              "comm_hook": "no", "comm_hook_logged": None,
              "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME")}
    if record["ddp"]:
        # DDP's own log of the hook registered on it: the hook function's name, e.g.
        # "bf16_compress_hook"; absent or empty when none was registered.
        logged = model._get_ddp_logging_data().get("comm_hook") or None
        record["comm_hook_logged"] = logged
        for name in ("fp16", "bf16"):
            if logged and logged.startswith(name):
                record["comm_hook"] = name
        if logged and logged.startswith("powerSGD"):
            record["comm_hook"] = "powersgd"
        if logged and record["comm_hook"] == "no":
            record["comm_hook"] = logged
    return record


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--comm_hook", default="no", choices=("no", "fp16", "bf16", "powersgd"),
                        help="DDP gradient compression, Accelerate's way")
    parser.add_argument("--powersgd_rank", type=int, default=1)
    parser.add_argument("--powersgd_start_iter", type=int, default=2,
                        help="DDP's start_powerSGD_iter (torch wants at least 2)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    handlers = []
    if args.comm_hook == "powersgd":
        # One bucket: with several, DDP's PowerSGD hook on Gloo fails with a collective
        # mismatch (each bucket's second all-reduce is started from a Gloo thread when its
        # first completes, so the processes can start them in different orders).
        handlers.append(DistributedDataParallelKwargs(
            bucket_cap_mb=1024, comm_hook=DDPCommunicationHookType.POWER_SGD,
            comm_state_option={"matrix_approximation_rank": args.powersgd_rank,
                               "start_powerSGD_iter": args.powersgd_start_iter}))
    elif args.comm_hook != "no":
        handlers.append(DistributedDataParallelKwargs(
            comm_hook=DDPCommunicationHookType(args.comm_hook)))
    accelerator = Accelerator(cpu=True, kwargs_handlers=handlers)
    torch.manual_seed(0)
    model = make_model(args.model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    generator = torch.Generator().manual_seed(1234)
    inputs = torch.randn((args.samples, *SAMPLE_SHAPE[args.model]), generator=generator)
    targets = torch.randint(10, (args.samples,), generator=generator)
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=args.batch, shuffle=True)
    try:
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    except TypeError as error:
        # torch's DDP refuses bf16_compress_hook unless it runs on CUDA with NCCL >= 2.10 or on
        # XPU with XCCL, so Accelerate's BF16 hook cannot run on CPU with Gloo: say so as the
        # result (bench/machines.py records it) rather than as a crash.
        if args.comm_hook == "no" or "communication hook" not in str(error):
            raise
        if accelerator.is_main_process:
            print(json.dumps({"bench": "train", "impl": "python", "model": args.model,
                              "comm_hook": args.comm_hook, "refused": str(error),
                              "backend": torch.distributed.get_backend()}), flush=True)
        torch.distributed.destroy_process_group()
        return

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
    # What each rank actually used, recorded by the program (outside the timed region).
    ranks = [used(model)]
    if torch.distributed.is_initialized():
        ranks = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(ranks, used(model))
    if accelerator.is_main_process:
        print(json.dumps({
            "bench": "train", "impl": "python", "model": args.model,
            "processes": accelerator.num_processes,
            "distributed_type": str(accelerator.distributed_type), "batch": args.batch,
            "steps": args.steps, "params": sum(p.numel() for p in model.parameters()),
            "seconds": round(elapsed, 4), "steps_per_s": round(args.steps / elapsed, 3),
            "loss": round(last_loss, 4), "backend": ranks[0]["backend"],
            "comm_hook": ranks[0]["comm_hook"], "ranks": ranks}), flush=True)
    # An orderly shutdown (outside the timed region): left to interpreter exit, Gloo's threads
    # sometimes abort the process ("terminate called without an active exception").
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
