"""A training loop that refills one NumPy array in place every step under a tensor made once
with torch.from_numpy (as input pipelines with a preallocated batch buffer do). Used by
tests/diff/diff_e2e.py: `--poke-step K` changes one value of step K's batch.

Lines the tests expect `tdbg diff` to name carry a `# MARK:<name>` comment.
"""
import argparse

import numpy as np
import torch

p = argparse.ArgumentParser()
p.add_argument("--poke-step", type=int, default=None)
args = p.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)
buf = np.zeros((8, 4), dtype=np.float32)
x = torch.from_numpy(buf)  # shares its memory with buf from here on
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
rng = np.random.RandomState(0)
for step in range(5):
    buf[:] = rng.rand(8, 4)  # the new batch, written through NumPy
    if step == args.poke_step:
        buf[2, 1] += 0.5
    opt.zero_grad()
    loss = model(x).pow(2).mean()  # MARK:read
    loss.backward()
    opt.step()
    print(step, "%.6f" % loss.item())
