#!/usr/bin/env python3
"""Per-step cost of recording a libtorch C++ program (examples/cpp/train.cpp, `train_cpp`):
untraced, the hook in its default mode (every op, hashes, native call sites), with hashing
off, and with stacks off (no call sites). The hook is preloaded directly (LD_PRELOAD of
libtdbg_torch.so, TDBG_OUT), as bench/hook/hook_overhead.py does for Python. Variants run as
separate processes in interleaved rounds; a step's time is (time for --steps N minus time for
--steps 0) / N, the median over rounds, so the start-up (loading libtorch) is left out.

The example's net is tiny (8 -> 32 -> 1 on 64 rows, about 60 ops a step of a few
microseconds each): the ratios are those of the hook's fixed cost per op, an upper bound for a
real model's.

--lib-b OTHER.so adds the default mode of a second build (a change against its parent).

Usage: cpp_overhead.py --lib BUILD/lib/libtdbg_torch.so --program BUILD/bin/train_cpp
                       [--steps 1000] [--rounds 3] [--lib-b OTHER.so]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time


def timed(cmd, env):
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", required=True)
    p.add_argument("--program", required=True)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--lib-b", default="")
    args = p.parse_args()

    variants = [("untraced", None, {}),
                ("tdbg default", args.lib, {}),
                ("tdbg hashing off", args.lib, {"TDBG_HASH": "none"}),
                ("tdbg no call sites", args.lib, {"TDBG_STACKS": "0"})]
    if args.lib_b:
        variants.append(("build B default", args.lib_b, {}))
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("TDBG_")}
    per_step = {name: [] for name, _, _ in variants}
    work = tempfile.mkdtemp(prefix="tdbg_cpp_bench_")
    try:
        for _ in range(args.rounds):
            for name, lib, extra in variants:
                env = dict(base_env)
                if lib:
                    env.update({"LD_PRELOAD": lib, "TDBG_QUIET": "1", **extra})
                times = []
                for steps in (0, args.steps):
                    out = os.path.join(work, "run")
                    shutil.rmtree(out, ignore_errors=True)
                    env["TDBG_OUT"] = out
                    times.append(timed([args.program, "--steps", str(steps)], env))
                per_step[name].append((times[1] - times[0]) / args.steps)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = statistics.median(per_step["untraced"])
    print(f"train_cpp, {args.steps} steps, {args.rounds} rounds (median per step)")
    for name, _, _ in variants:
        t = statistics.median(per_step[name])
        print(f"  {name:20s} {t * 1e6:9.1f} us/step  {t / base:6.2f}x")


if __name__ == "__main__":
    main()
