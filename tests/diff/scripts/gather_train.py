"""Two CPU ranks (torch.distributed, gloo, on loopback) that each train their own small model
and all_gather every rank's loss each step, as training scripts log them. Gloo copies
all_gather's results out of its flat buffer on its worker threads, in another order each run:
for the diff end-to-end tests, two identical runs must still diff identical. Prints each
rank's losses and the gathered ones.
"""
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, port):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(rank)
    model = torch.nn.Linear(6, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.randn(8, 4, 7)
    seen = []
    for step in range(8):
        x, y = data[step, :, :6], data[step, :, 6:]
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        gathered = [torch.zeros(1) for _ in range(2)]
        dist.all_gather(gathered, loss.detach().reshape(1))
        seen.append(" ".join("%.9g" % g.item() for g in gathered))
    os.write(1, ("rank %d gathered %s\n" % (rank, " | ".join(seen))).encode())  # one write
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(port,), nprocs=2)
