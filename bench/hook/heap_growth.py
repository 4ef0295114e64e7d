#!/usr/bin/env python3
"""Whether recording grows the recorded program's heap per step: bench/overhead/lm_steps.py's
transformer LM for a short and a long run (--steps 100 600), untraced and with
libtdbg_torch.so (default and hashing off). For each run it prints, at the end of the run,
glibc's heap (mallinfo2: bytes the arenas hold, of which in use and free, and the number of
free chunks), the peak RSS and the minor page faults; then the growth per step between the two
lengths, beside the untraced program's.

Why: tdbg's own small allocations made on the program's thread (one per new argument text,
for example) land between the program's tensor buffers and keep freed buffers from merging, so
glibc grows the heap for the next buffer. That cost shows as page faults and RSS growing with
the run's length, not in a short timing run. Session 6 measured 0.6 MB and 168 page faults per
step from interned texts before they moved to mmap'd memory (tracer/string_pool.h).

--stable-malloc runs every variant with GLIBC_TUNABLES fixing malloc's trim and mmap thresholds
(as hook_overhead.py does): every tensor buffer then comes from the heap, the case where
fragmentation shows most.

Usage: heap_growth.py --lib BUILD/lib/libtdbg_torch.so [--steps 100 600] [--stable-malloc]
"""
import argparse
import json
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = os.path.join(HERE, "..", "overhead", "lm_steps.py")

# Runs lm_steps.py in this process, then prints mallinfo2's view of the heap as JSON.
WRAPPER = r"""
import ctypes, json, runpy, sys
class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
m = libc.mallinfo2()
print(json.dumps({"heap": m.arena + m.hblkhd, "in_use": m.uordblks + m.hblkhd,
                  "free": m.fordblks, "free_chunks": m.ordblks}))
"""


def run(python, steps, env):
    proc = subprocess.Popen([python, "-c", WRAPPER, STEPS, "--steps", str(steps), "--warmup", "0"],
                            env=env, stdout=subprocess.PIPE, text=True)
    stdout = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("lm_steps.py --steps %d failed" % steps)
    heap = json.loads(stdout.strip().splitlines()[-1])
    heap["rss"] = usage.ru_maxrss * 1024
    heap["faults"] = usage.ru_minflt
    return heap


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", required=True)
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--steps", type=int, nargs=2, default=[100, 600])
    p.add_argument("--stable-malloc", action="store_true")
    args = p.parse_args()
    lib = os.path.abspath(args.lib)
    work = tempfile.mkdtemp(prefix="tdbg-heap-bench-")
    variants = [("untraced", None), ("hook default", {}), ("hook TDBG_HASH=none", {"TDBG_HASH": "none"})]
    short, long = args.steps
    mb = 1 << 20
    print("| variant | steps | heap MB | in use MB | free MB | free chunks | max RSS MB | minor faults |")
    print("|---|---|---|---|---|---|---|---|")
    growth = []
    for name, extra in variants:
        results = []
        for steps in (short, long):
            env = dict(os.environ, OMP_NUM_THREADS="1")
            env.pop("LD_PRELOAD", None)
            if args.stable_malloc:
                env["GLIBC_TUNABLES"] = ("glibc.malloc.trim_threshold=1073741824:"
                                         "glibc.malloc.mmap_threshold=1073741824")
            if extra is not None:
                out = os.path.join(work, "%s-%d" % (name.replace(" ", "_").replace("=", "_"), steps))
                env.update(LD_PRELOAD=lib, TDBG_OUT=out, TDBG_QUIET="1")
                env.update(extra)
            r = run(args.python, steps, env)
            results.append(r)
            print("| %s | %d | %.1f | %.1f | %.1f | %d | %.0f | %d |" % (
                name, steps, r["heap"] / mb, r["in_use"] / mb, r["free"] / mb, r["free_chunks"],
                r["rss"] / mb, r["faults"]))
        a, b = results
        n = float(long - short)
        growth.append((name, (b["heap"] - a["heap"]) / n / 1024, (b["free"] - a["free"]) / n / 1024,
                       (b["rss"] - a["rss"]) / n / 1024, (b["faults"] - a["faults"]) / n))
    print()
    print("| variant | heap KiB/step | free KiB/step | RSS KiB/step | faults/step |")
    print("|---|---|---|---|---|")
    for name, heap, free, rss, faults in growth:
        print("| %s | %.0f | %.0f | %.0f | %.1f |" % (name, heap, free, rss, faults))


if __name__ == "__main__":
    main()
