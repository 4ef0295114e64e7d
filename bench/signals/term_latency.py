#!/usr/bin/env python3
"""How much later a recorded process dies of a SIGTERM than the same process untraced.

tdbg catches a terminating signal left at its default action, commits what was recorded and
then lets the signal end the process (interpose/ending_signals.cc); meanwhile the program runs
on. This measures, side by side in interleaved trials, the time from `kill(pid, SIGTERM)` to
the parent's `waitpid` for a tight loop of small ops: untraced, and under libtdbg_preload.so
(with the default --flush-ms, so a commit holds at most that long of ops). It prints the
median of each and the difference, and checks that each recorded run's database holds the
end metadata.

Usage: term_latency.py --preload BUILD/lib/libtdbg_preload.so [--trials 5] [--run-for 2]
"""
import argparse
import glob
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

PROGRAM = r'''
import os, sys, time, torch
torch.set_num_threads(1)
x = torch.zeros(4)
print(os.getpid(), flush=True)
while True:
    x = x + 1
'''


def one_trial(python, env, run_for):
    proc = subprocess.Popen([python, "-c", PROGRAM], stdout=subprocess.PIPE, env=env, text=True)
    pid = int(proc.stdout.readline())
    time.sleep(run_for)
    start = time.perf_counter()
    os.kill(pid, signal.SIGTERM)
    proc.wait()
    elapsed = time.perf_counter() - start
    if proc.returncode != -signal.SIGTERM:
        sys.exit(f"the program ended with {proc.returncode}, not by SIGTERM")
    return elapsed * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preload", required=True, help="libtdbg_preload.so of a build")
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--run-for", type=float, default=2.0,
                        help="seconds the program runs before the signal")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="tdbg-term-bench-")
    plain, traced = [], []
    try:
        for trial in range(args.trials):
            plain.append(one_trial(args.python, dict(os.environ), args.run_for))
            run = os.path.join(work, "run%d" % trial)
            env = dict(os.environ, LD_PRELOAD=os.path.abspath(args.preload), TDBG_OUT=run,
                       TDBG_QUIET="1")
            traced.append(one_trial(args.python, env, args.run_for))
            dbs = glob.glob(os.path.join(run, "*.sqlite"))
            meta = dict(sqlite3.connect(dbs[0]).execute("select key, value from meta")) if dbs else {}
            if meta.get("exit_status") != "signal 15" or "end_time_ns" not in meta:
                sys.exit(f"trial {trial}: the recording was not ended by the signal ({meta.get('exit_status')})")
            shutil.rmtree(run)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mp, mt = statistics.median(plain), statistics.median(traced)
    print("trials                 %d (program ran %.1f s before each SIGTERM)" % (args.trials, args.run_for))
    print("untraced  SIGTERM->exit  median %6.1f ms  (%s)" % (mp, ", ".join("%.1f" % v for v in plain)))
    print("recorded  SIGTERM->exit  median %6.1f ms  (%s)" % (mt, ", ".join("%.1f" % v for v in traced)))
    print("extra time the program runs under tdbg: %.1f ms (ratio %.2fx)" % (mt - mp, mt / mp))


if __name__ == "__main__":
    main()
