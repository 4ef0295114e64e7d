#!/usr/bin/env python3
"""The overhead benchmark of issue 3 ("Speed"): per-step time of examples/train_lm.py's
transformer LM, measured side by side in one run — untraced, `tdbg record` (default),
`tdbg record --hash none`, a TorchDispatchMode logger (DebugMode's approach) and
torch.profiler with record_shapes=True — printed as slowdown ratios against untraced. Beside
them (no goal of the issue): hashing off without stacks or module paths, and the steps before
a `--steps` window.

Variants run as separate processes in interleaved rounds (A B C D E, A B C D E, ...) so that
load from other work on the machine falls on all of them alike; each variant's figure is the
median over all its timed steps (and, beside it, the 20th percentile: glibc's malloc returns
and re-faults the pages of large tensor buffers, so step times of one process can swing between
two modes, and the low percentile shows the fast mode). Every variant gets the same thread
settings. --stable-malloc runs every variant with GLIBC_TUNABLES fixing malloc's trim and mmap
thresholds: steadier figures and a faster baseline than a default process sees.

The recording cost is mostly a fixed cost per dispatched op, so the ratio depends on how much
work an op does. The default model (d 64, block 32, batch 16) has tiny ops (about 1 us of
compute per dispatched op on one core): the worst case. --d, --block, --batch and --layers
size the model (lm_steps.py's options) to show a model with more work per op.

Usage: run_overhead.py --tdbg BUILD/bin/tdbg [--rounds 3] [--steps 20] [--threads 1]
                       [--stable-malloc] [--d 64] [--block 32] [--batch 16] [--layers 4]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = os.path.join(HERE, "lm_steps.py")


def blas_library(python):
    code = ("import torch, re; torch.ones(2,2) @ torch.ones(2,2);"
            "print(' '.join(sorted({l.split()[-1] for l in open('/proc/self/maps') "
            "if re.search(r'blas|lapack', l)})))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return out.stdout.strip() or "(not found in the process map)"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tdbg", required=True, help="the tdbg executable")
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--stable-malloc", action="store_true")
    for name in ("d", "block", "batch", "layers"):
        p.add_argument("--" + name, type=int, help="model size, passed to lm_steps.py")
    args = p.parse_args()

    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = str(args.threads)
    env.pop("LD_PRELOAD", None)
    if args.stable_malloc:
        env["GLIBC_TUNABLES"] = ("glibc.malloc.trim_threshold=1073741824:"
                                 "glibc.malloc.mmap_threshold=1073741824")
    work = tempfile.mkdtemp(prefix="tdbg-overhead-")
    base = [STEPS, "--steps", str(args.steps), "--warmup", str(args.warmup),
            "--threads", str(args.threads)]
    model = []
    for name in ("d", "block", "batch", "layers"):
        if getattr(args, name) is not None:
            model += ["--" + name, str(getattr(args, name))]
    base += model

    def tdbg(extra, name):
        run = os.path.join(work, name)
        return [args.tdbg, "record", "--force", "--quiet", "-o", run] + extra + ["--", args.python]

    variants = [
        ("untraced", [args.python] + base),
        ("tdbg default", tdbg([], "default") + base),
        ("tdbg --hash none", tdbg(["--hash", "none"], "nohash") + base),
        # Not a goal of the issue: says how much of the cost is source stacks and module paths.
        ("tdbg --hash none --no-stacks --no-modules",
         tdbg(["--hash", "none", "--no-stacks", "--no-modules"], "bare") + base),
        # The steps before a --steps window (the second pass of a long run, on its way to
        # the window): what the hook costs where it records nothing.
        ("tdbg before its --steps window", tdbg(["--steps", "1000000:"], "ahead") + base),
        ("TorchDispatchMode logger", [args.python] + base + ["--mode", "logger"]),
        ("torch.profiler record_shapes", [args.python] + base + ["--mode", "profiler"]),
    ]
    times = {name: [] for name, _ in variants}
    extra = {}
    for r in range(args.rounds):
        for name, argv in variants:
            out = subprocess.run(argv, capture_output=True, text=True, env=env)
            if out.returncode != 0:
                print(f"{name}: failed ({out.returncode}): {out.stderr[-800:]}", file=sys.stderr)
                sys.exit(1)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            times[name] += result["times"]
            if result.get("ops_first_step"):
                extra["ops_first_step"] = result["ops_first_step"]
            print(f"round {r + 1}/{args.rounds} {name}: "
                  f"{statistics.median(result['times']) * 1e3:.1f} ms/step", file=sys.stderr)

    def p20(values):
        return statistics.quantiles(values, n=5)[0]

    base_ms = statistics.median(times["untraced"]) * 1e3
    base_p20 = p20(times["untraced"]) * 1e3
    print(f"threads {args.threads}, {args.rounds} rounds x {args.steps} steps, BLAS: "
          f"{blas_library(args.python)}, dispatched ops per step: {extra.get('ops_first_step')}"
          f"{', stable malloc' if args.stable_malloc else ''}"
          f"{', model ' + ' '.join(model) if model else ''}")
    print(f"{'variant':42} {'ms/step (median)':>17} {'ratio':>7} "
          f"{'ms/step (p20)':>14} {'ratio':>7}")
    for name, _ in variants:
        ms = statistics.median(times[name]) * 1e3
        fast = p20(times[name]) * 1e3
        print(f"{name:42} {ms:17.1f} {ms / base_ms:6.2f}x {fast:14.1f} {fast / base_p20:6.2f}x")
    sizes = []
    for sub in ("default", "nohash", "bare"):
        d = os.path.join(work, sub)
        total = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)) if os.path.isdir(d) else 0
        sizes.append(f"{sub} {total / 1e6:.1f} MB")
    print("run directories: " + ", ".join(sizes))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
