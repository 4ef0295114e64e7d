"""Times training steps of examples/train_lm.py's transformer LM in one mode of the overhead
benchmark: plain (also what runs under `tdbg record`), `logger` (inside DispatchLogger) or
`profiler` (inside torch.profiler with record_shapes=True). Prints one JSON line with the
wall time of every timed step."""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
sys.path.insert(0, HERE)
import train_lm  # noqa: E402
from dispatch_logger import DispatchLogger  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["plain", "logger", "profiler"], default="plain")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--block", type=int, default=32)
    p.add_argument("--d", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    vocab = 256
    total = args.warmup + args.steps
    data = train_lm.TokenWindows(args.batch * args.block * total * 2, vocab, args.block, 42)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch, shuffle=True,
                                         drop_last=True,
                                         generator=torch.Generator().manual_seed(7))
    model = train_lm.TinyLM(vocab, args.d, 4, args.layers, args.block, 0.1)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    batches = iter(loader)

    def step():
        xb, yb = next(batches)
        logits = model(xb)
        loss = loss_fn(logits.reshape(-1, vocab), yb.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    times = []
    ops = None
    if args.mode == "profiler":
        from torch.profiler import ProfilerActivity, profile
        context = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
    elif args.mode == "logger":
        context = DispatchLogger()
    else:
        context = None
    if context is not None:
        context.__enter__()
    try:
        for i in range(total):
            start = time.perf_counter()
            loss = step()
            elapsed = time.perf_counter() - start
            if i >= args.warmup:
                times.append(elapsed)
            if i == 0 and args.mode == "logger":
                ops = len(context.records)
    finally:
        if context is not None:
            context.__exit__(None, None, None)
    print(json.dumps({"mode": args.mode, "times": times, "loss": loss, "ops_first_step": ops}))


if __name__ == "__main__":
    main()
