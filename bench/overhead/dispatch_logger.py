"""A TorchDispatchMode-based op logger: the approach of PyTorch's DebugMode, the peer tdbg's
overhead is compared with. Records each dispatched op's name and the norm of each floating
output tensor, in Python, for every op of the program."""
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class DispatchLogger(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.records = []  # (op name, [output norms])

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        norms = []
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > 0:
                norms.append(float(t.detach().norm()))
        self.records.append((str(func), norms))
        return out
