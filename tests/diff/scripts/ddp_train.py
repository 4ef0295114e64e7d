"""Data-parallel training on two CPU ranks (torch.distributed, gloo, on loopback) for the diff
end-to-end tests: each rank trains the same DistributedDataParallel model on its own NumPy
data; `--poke-rank R --poke-step S` changes one value of rank R's data at step S, and
`--metric-op max` all-reduces the logged loss with MAX instead of SUM, and `--nan-rank R` makes
rank R's logged loss NaN at step 2 (the all-reduce brings it to the other rank), and
`--nan-data-rank R` puts NaN in rank R's data at step 2 (DDP's all-reduce brings it on), and
`--extra-rank R --extra-step S` makes rank R run two more ops in its forward at step S, then raise
after its backward. Lines the tests expect
`tdbg diff` to name carry a `# MARK:<name>` comment. Prints each rank's losses and the metric.
"""
import argparse
import contextlib
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def worker(rank, args):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = np.random.RandomState(100 + rank).randn(args.steps, 4, 9).astype(np.float32)
    if rank == args.poke_rank:
        data[args.poke_step, 0, 0] += 1e-3
    if rank == args.nan_data_rank:
        data[2, 0, 0] = np.nan
    losses, metric = [], []
    metric_op = dist.ReduceOp.MAX if args.metric_op == "max" else dist.ReduceOp.SUM
    for step in range(args.steps):
        batch = torch.from_numpy(data[step])  # MARK:data
        x, y = batch[:, :8], batch[:, 8:]
        # (--no-sync-step: that step's gradients are not all-reduced, DDP's no_sync().)
        with model.no_sync() if step == args.no_sync_step else contextlib.nullcontext():
            out = model(x)
            extra = rank == args.extra_rank and step == args.extra_step
            if extra:
                out = out * 2.0 + 1.0  # MARK:extra
            loss = ((out - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
        if extra:
            raise RuntimeError("rank %d: --extra-step" % rank)
        opt.step()
        if step == args.raise_step:
            raise RuntimeError("rank %d: --raise-step" % rank)
        losses.append("%.9g" % loss.item())
        logged = loss.detach().clone()
        if rank == args.nan_rank and step == 2:
            logged = logged * float("nan")  # MARK:nan
        dist.all_reduce(logged, op=metric_op)  # MARK:metric
        # Kept alive until the next step: torch 1.13 hangs one run in four in
        # destroy_process_group when Python drops an all-reduced tensor before gloo's worker
        # thread has released it (the worker then needs the GIL that the process group's
        # destructor holds), with or without tdbg.
        reduced = logged
        if args.nan_rank >= 0:
            logged = reduced / 2  # the mean over the ranks
        metric.append("%.9g" % logged.item())
    os.write(1, ("rank %d losses %s metric %s\n" % (rank, " ".join(losses), " ".join(metric))).encode())  # one write
    # The model dropped while the process group lives: torch 1.13's Reducer, destroyed
    # holding the GIL as the group's last owner, joins gloo's worker threads, one of which
    # may be releasing a tensor that needs the GIL (a hang at exit, one run in several on a
    # loaded machine, with or without tdbg).
    del model, opt
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--poke-rank", type=int, default=-1)
    p.add_argument("--poke-step", type=int, default=0)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--metric-op", choices=["sum", "max"], default="sum")
    p.add_argument("--nan-rank", type=int, default=-1)
    p.add_argument("--nan-data-rank", type=int, default=-1)
    p.add_argument("--no-sync-step", type=int, default=-1)
    p.add_argument("--raise-step", type=int, default=-1)
    p.add_argument("--extra-rank", type=int, default=-1)
    p.add_argument("--extra-step", type=int, default=-1)
    args = p.parse_args()
    if args.port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            args.port = s.getsockname()[1]
    mp.spawn(worker, args=(args,), nprocs=2)


if __name__ == "__main__":
    main()
