"""A tiny training loop for the diff end-to-end tests: each flag changes one known thing.

Lines the tests expect `tdbg diff` / `tdbg nan` to name carry a `# MARK:<name>` comment; the
test driver finds their line numbers by that marker, so editing this file does not break it.
"""
import argparse

import numpy as np
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, extra_op, mask=False, conv=False, transpose=None):
        super().__init__()
        self.transpose = transpose
        self.conv = nn.Conv1d(1, 2, 3, padding=1) if conv else None
        self.fc1 = nn.Linear(16 if conv else 8, 16)  # MARK:init
        self.fc2 = nn.Linear(16, 2)
        self.extra_op = extra_op
        self.mask = mask

    def forward(self, x):
        if self.conv is not None:
            x = self.conv(x.unsqueeze(1)).flatten(1)  # MARK:conv
        h = torch.relu(self.fc1(x))  # MARK:fc1
        if self.transpose is not None:
            # The same values as a transposed view, or as a contiguous copy of it.
            g = h.t() if self.transpose == "view" else h.t().contiguous()  # MARK:transpose
            h = torch.tanh(g).t()
        if self.extra_op:
            h = h * 1.0001  # MARK:extra
        if self.mask:
            # Causal self-attention over the batch rows, with the usual -inf mask: Inf on
            # purpose, which `tdbg nan` must not report.
            n = h.shape[0]
            causal = torch.full((n, n), float("-inf")).triu(1)  # MARK:mask
            h = torch.softmax(h @ h.t() / 4.0 + causal, dim=-1) @ h
        return self.fc2(h)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--poke", type=float, default=None, help="change x[3, 5] of the NumPy data")
    p.add_argument("--extra-op", action="store_true")
    p.add_argument("--mask", action="store_true", help="attention with a -inf causal mask")
    p.add_argument("--loader-seed", type=int, default=None,
                   help="feed batches from a shuffled DataLoader with this generator seed")
    p.add_argument("--inf-step", type=int, default=-1, help="the loss becomes Inf at this step")
    p.add_argument("--conv", action="store_true", help="a Conv1d before fc1")
    p.add_argument("--loss-scale", type=float, default=None, help="a Python number times the loss")
    p.add_argument("--tensor-scale", type=float, default=None,
                   help="the loss times torch.tensor(this), made from a Python number")
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--transpose", choices=["view", "copy"], default=None,
                   help="run tanh on fc1's output transposed, as a view or as a contiguous copy")
    p.add_argument("--data-write-step", type=int, default=-1,
                   help="scale fc1's weight through .data (a counter of its own) at this step")
    p.add_argument("--bad-data", default=None, metavar="STEP:VALUE",
                   help="the NumPy data of STEP holds VALUE (nan: one NaN; inf: Inf beside -Inf)")
    p.add_argument("--in-thread", action="store_true",
                   help="run the training loop in a Python thread instead of the main one")
    p.add_argument("--threads", type=int, default=0,
                   help="sum a large tensor with this many threads first (a parallel reduction)")
    args = p.parse_args()

    torch.manual_seed(args.seed)
    if args.threads > 0:
        big = torch.randn(1 << 22)
        torch.set_num_threads(args.threads)
        total = big.sum()  # MARK:reduce
        print(f"reduction {total.item()!r}")

    rng = np.random.default_rng(1234)
    x_np = rng.standard_normal((64, 8)).astype(np.float32)
    y_np = (x_np.sum(axis=1) > 0).astype(np.int64)
    if args.poke is not None:
        x_np[3, 5] = args.poke
    if args.bad_data is not None:
        step, value = args.bad_data.split(":")
        row = int(step) * 16 + 1
        if value == "nan":
            x_np[row, 3] = np.nan
        else:
            x_np[row, 3], x_np[row, 4] = np.inf, -np.inf
    model = Net(args.extra_op, args.mask, args.conv, args.transpose)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()

    if args.loader_seed is not None:
        data = torch.utils.data.TensorDataset(torch.from_numpy(x_np), torch.from_numpy(y_np))
        g = torch.Generator()
        g.manual_seed(args.loader_seed)
        loader = torch.utils.data.DataLoader(data, batch_size=16, shuffle=True, generator=g,
                                             num_workers=args.workers)
        batches = iter(loader)  # MARK:loader
    if args.in_thread:
        import threading
        worker = threading.Thread(target=train, args=(args, model, opt, loss_fn, x_np, y_np,
                                                       batches if args.loader_seed is not None else None))
        worker.start()
        worker.join()
    else:
        train(args, model, opt, loss_fn, x_np, y_np,
              batches if args.loader_seed is not None else None)


def train(args, model, opt, loss_fn, x_np, y_np, batches):
    for step in range(args.steps):
        if args.loader_seed is not None:
            xb, yb = next(batches)  # MARK:batch
        else:
            xb = torch.from_numpy(x_np[step * 16:(step + 1) * 16])  # MARK:data
            yb = torch.from_numpy(y_np[step * 16:(step + 1) * 16])
        opt.zero_grad()
        if step == args.data_write_step:
            model.fc1.weight.data.mul_(1.001)  # MARK:datawrite
        loss = loss_fn(model(xb), yb)
        if args.loss_scale is not None:
            loss = loss * args.loss_scale  # MARK:scale
        if args.tensor_scale is not None:
            loss = loss * torch.tensor(args.tensor_scale)  # MARK:tscale
        if step == args.inf_step:
            loss = loss * 1e39  # MARK:inf
        loss.backward()
        opt.step()  # MARK:step
        print(f"step {step} loss {loss.item()!r}", flush=True)


if __name__ == "__main__":
    main()
