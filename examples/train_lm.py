"""A small transformer language model trained on a synthetic corpus through a DataLoader.

The realistic CPU workload of the overhead benchmark (several thousand dispatcher ops per
step) and an end-to-end example with DataLoader workers (fork), dropout and AdamW.
Prints one line per step with the loss in full precision.
"""
import argparse
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class TokenWindows(Dataset):
    """Fixed windows over a synthetic token stream with some structure to learn."""

    def __init__(self, n_tokens, vocab, block, data_seed):
        g = torch.Generator().manual_seed(data_seed)
        base = torch.randint(0, vocab, (n_tokens,), generator=g)
        # A learnable pattern: every token is often followed by (token * 7 + 3) % vocab.
        follow = (base * 7 + 3) % vocab
        mask = torch.rand(n_tokens, generator=g) < 0.7
        self.tokens = torch.where(mask, torch.roll(follow, 1), base)
        self.block = block

    def __len__(self):
        return (len(self.tokens) - 1) // self.block

    def __getitem__(self, i):
        s = i * self.block
        chunk = self.tokens[s:s + self.block + 1]
        return chunk[:-1], chunk[1:]


class Block(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, dropout=dropout, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(dropout))

    def forward(self, x, mask):
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        x = x + a
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, vocab, d, heads, layers, block, dropout):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, block, d))
        self.blocks = nn.ModuleList([Block(d, heads, dropout) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        mask = torch.triu(torch.full((block, block), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos[:, :t]
        for b in self.blocks:
            x = b(x, self.mask[:t, :t])
        return self.head(self.ln(x))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-seed", type=int, default=42)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--block", type=int, default=32)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--d", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave)")
    p.add_argument("--shuffle-seed", type=int, default=7)
    args = p.parse_args()

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    data = TokenWindows(args.batch * args.block * max(args.steps, 1) * 2, args.vocab, args.block,
                        args.data_seed)
    loader = DataLoader(data, batch_size=args.batch, shuffle=True, drop_last=True,
                        num_workers=args.workers,
                        generator=torch.Generator().manual_seed(args.shuffle_seed))
    model = TinyLM(args.vocab, args.d, args.heads, args.layers, args.block, 0.1)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()

    step = 0
    while step < args.steps:
        for xb, yb in loader:
            logits = model(xb)
            loss = loss_fn(logits.reshape(-1, args.vocab), yb.reshape(-1))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            print(f"step {step} loss {loss.item()!r} ppl {math.exp(min(loss.item(), 50)):.3f}",
                  flush=True)
            step += 1
            if step >= args.steps:
                break


if __name__ == "__main__":
    main()
