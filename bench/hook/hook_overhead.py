#!/usr/bin/env python3
"""Per-step and per-op cost of libtdbg_torch.so alone (no preload, no `tdbg record`), on
bench/overhead/lm_steps.py's transformer LM: untraced, the hook in its default mode, with
hashing off, and with stacks and module paths off. Variants run as separate processes in
interleaved rounds so that load from other work falls on all of them alike; each figure is the
median over all timed steps of all rounds (and the ratio of 20th percentiles, the fast mode; see
--stable-malloc). The per-op cost divides the extra time per step by
the ops the hook recorded per step. Max RSS is the peak resident memory of the process: with
--steps 10 and --steps 40 side by side it shows whether recording grows memory per step.

glibc's malloc returns and re-faults the pages of large tensor buffers, so untraced step times
swing between two modes on some machines (here 27 ms and 65 ms). --stable-malloc runs every
variant with GLIBC_TUNABLES fixing malloc's trim and mmap thresholds: steadier figures, and a
faster baseline (so a higher ratio) than what a default process sees.

--lib-b OTHER.so adds the default and hashing-off variants of a second build of the hook (a
change against its parent, say), run in the same rounds.

Usage: hook_overhead.py --lib BUILD/lib/libtdbg_torch.so [--rounds 3] [--steps 10] [--stable-malloc]
                        [--lib-b OTHER/libtdbg_torch.so]
"""
import argparse
import glob
import json
import os
import sqlite3
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = os.path.join(HERE, "..", "overhead", "lm_steps.py")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", required=True)
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--stable-malloc", action="store_true")
    p.add_argument("--lib-b", help="a second build of libtdbg_torch.so to compare")
    args = p.parse_args()
    lib = os.path.abspath(args.lib)
    work = tempfile.mkdtemp(prefix="tdbg-hook-bench-")
    variants = [
        ("untraced", None),
        ("hook default", {}),
        ("hook TDBG_HASH=none", {"TDBG_HASH": "none"}),
        ("hook no stacks/modules", {"TDBG_STACKS": "0", "TDBG_MODULES": "0"}),
        # The floor: torch calls the hook for every op, which returns at once (no op matches),
        # so this is the cost of RecordFunction with inputs and outputs, not of recording.
        ("hook, no op selected (floor)", {"TDBG_OPS": "^$"}),
    ]
    if args.lib_b:
        lib_b = os.path.abspath(args.lib_b)
        variants += [("B: hook default", {"LD_PRELOAD": lib_b}),
                     ("B: hook TDBG_HASH=none", {"TDBG_HASH": "none", "LD_PRELOAD": lib_b})]
    times = {name: [] for name, _ in variants}
    rss = {name: 0 for name, _ in variants}
    ops_per_step = {}
    for r in range(args.rounds):
        for name, extra in variants:
            env = dict(os.environ, OMP_NUM_THREADS="1")
            env.pop("LD_PRELOAD", None)
            if args.stable_malloc:
                env["GLIBC_TUNABLES"] = ("glibc.malloc.trim_threshold=1073741824:"
                                         "glibc.malloc.mmap_threshold=1073741824")
            out = None
            if extra is not None:
                out = os.path.join(work, "%s-%d" % (name.replace(" ", "_").replace("/", "_"), r))
                env.update(LD_PRELOAD=lib, TDBG_OUT=out, TDBG_QUIET="1")
                env.update(extra)
            proc = subprocess.Popen([args.python, STEPS, "--steps", str(args.steps), "--warmup",
                                     str(args.warmup)], env=env, stdout=subprocess.PIPE,
                                    text=True)
            stdout = proc.stdout.read()
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode != 0:
                raise SystemExit("%s failed with status %d" % (name, proc.returncode))
            times[name] += json.loads(stdout.strip().splitlines()[-1])["times"]
            rss[name] = max(rss[name], usage.ru_maxrss // 1024)
            if out:
                dbs = glob.glob(os.path.join(out, "*.sqlite"))
                con = sqlite3.connect(dbs[0])
                n = con.execute("select sum(count) from op_blocks").fetchone()[0] or 0
                ops_per_step[name] = n / float(args.steps + args.warmup)
    def p20(values):
        return statistics.quantiles(values, n=5)[0]

    base = statistics.median(times["untraced"])
    base_p20 = p20(times["untraced"])
    print("| variant | ms/step | ratio | ratio at p20 | ops/step | extra us/op | max RSS MB |")
    print("|---|---|---|---|---|---|---|")
    for name, _ in variants:
        t = statistics.median(times[name])
        ops = ops_per_step.get(name)
        extra = "" if not ops else "%.1f" % ((t - base) * 1e6 / ops)
        print("| %s | %.1f | %.2f | %.2f | %s | %s | %d |" % (
            name, t * 1e3, t / base, p20(times[name]) / base_p20, "%.0f" % ops if ops else "",
            extra, rss[name]))


if __name__ == "__main__":
    main()
