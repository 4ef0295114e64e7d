#!/usr/bin/env python3
"""Memory the dispatch hook keeps per thread: a Python program starts N short-lived threads
that each run two torch ops, untraced and with libtdbg_torch.so, for two values of N; prints
the peak RSS of each run and the extra KiB per thread (the slope between the two N).

Usage: thread_memory.py --lib BUILD/lib/libtdbg_torch.so [--threads 200 3000]
"""
import argparse
import os
import subprocess
import tempfile

PROGRAM = r"""
import resource, sys, threading, torch
x = torch.ones(8)
def work():
    (x + 1) * 2
for _ in range(int(sys.argv[1])):
    t = threading.Thread(target=work)
    t.start()
    t.join()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_kib(python, n, env):
    out = subprocess.run([python, "-c", PROGRAM, str(n)], env=env, capture_output=True,
                         text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", required=True)
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--threads", type=int, nargs=2, default=[200, 3000])
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="tdbg-thread-memory-")
    lo, hi = args.threads
    print("| variant | peak RSS MB, %d threads | peak RSS MB, %d threads | KiB per thread |"
          % (lo, hi))
    print("|---|---|---|---|")
    for name, extra in (("untraced", None), ("hook", {})):
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        rss = []
        for n in (lo, hi):
            if extra is not None:
                env.update(LD_PRELOAD=os.path.abspath(args.lib), TDBG_QUIET="1",
                           TDBG_OUT=os.path.join(work, "%s-%d" % (name, n)))
            rss.append(peak_kib(args.python, n, env))
        print("| %s | %d | %d | %.1f |" % (name, rss[0] // 1024, rss[1] // 1024,
                                          (rss[1] - rss[0]) / float(hi - lo)))


if __name__ == "__main__":
    main()
