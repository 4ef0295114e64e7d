"""A small, complete MLP training loop: the main example that `scripts/demo` records.

Each flag changes one thing, so two runs that differ in one known way can be recorded and
diffed: the seed, the learning rate, the data, the thread count, an extra op, a blow-up.
Prints one line per step with the loss in full precision (repr), so runs can be compared
bit for bit.
"""
import argparse

import numpy as np
import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, d_in, d_hidden, d_out, dropout, extra_op):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.act = nn.GELU()
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(d_hidden, d_out)
        self.extra_op = extra_op

    def forward(self, x):
        h = self.act(self.fc1(x))
        if self.extra_op:
            h = h * 1.0001  # the "code change" of the structure test: one inserted op
        return self.fc2(self.drop(h))


def make_data(n, d_in, n_classes, data_seed, poke):
    rng = np.random.default_rng(data_seed)
    x = rng.standard_normal((n, d_in)).astype(np.float32)
    w = rng.standard_normal((d_in, n_classes)).astype(np.float32)
    y = (x @ w).argmax(axis=1).astype(np.int64)
    if poke is not None:  # one changed value in the data set
        i, j, value = poke
        x[int(i), int(j)] = float(value)
    return x, y


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seed", type=int, default=0, help="torch seed (init, dropout)")
    p.add_argument("--data-seed", type=int, default=1234, help="NumPy seed of the data set")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave)")
    p.add_argument("--extra-op", action="store_true", help="insert one op in the forward pass")
    p.add_argument("--poke", nargs=3, metavar=("ROW", "COL", "VALUE"),
                   help="change one value of the NumPy data set")
    p.add_argument("--blowup-step", type=int, default=-1,
                   help="from this step on, scale the input so the loss becomes inf")
    args = p.parse_args()

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    d_in, n_classes, n = 16, 4, args.batch * 8
    x_np, y_np = make_data(n, d_in, n_classes, args.data_seed, args.poke)
    model = MLP(d_in, args.hidden, n_classes, args.dropout, args.extra_op)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    for step in range(args.steps):
        lo = (step * args.batch) % n
        xb = torch.from_numpy(x_np[lo:lo + args.batch])
        yb = torch.from_numpy(y_np[lo:lo + args.batch])
        if 0 <= args.blowup_step <= step:
            xb = xb * 1e38  # overflows float32 in the first matmul
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item()!r}", flush=True)


if __name__ == "__main__":
    main()
