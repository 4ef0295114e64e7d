#!/usr/bin/env python3
"""End-to-end tests of `tdbg record` and libtdbg_preload.so on real programs.

Usage: record_test.py CASE  (environment: TDBG = the tdbg executable, TORCH_PYTHON = a
Python that has torch, DL_PROBE = the dl_semantics test program, WORK = a scratch folder).
Each case exits 0 on success, 1 with a one-line reason on failure, 77 when it cannot run here.
"""
import glob
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

TDBG = os.environ["TDBG"]
TORCH_PYTHON = os.environ.get("TORCH_PYTHON", "/usr/bin/python3")
WORK = os.environ["WORK"]
LIB_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(TDBG))), "lib")
PRELOAD = os.path.join(LIB_DIR, "libtdbg_preload.so")
HAVE_TORCH_HOOK = os.path.exists(os.path.join(LIB_DIR, "libtdbg_torch.so"))
SKIP = 77


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def fresh(name):
    path = os.path.join(WORK, name)
    shutil.rmtree(path, ignore_errors=True)
    return path


def databases(run):
    return sorted(glob.glob(os.path.join(run, "*.sqlite")))


def record(run, argv, **kwargs):
    return subprocess.run([TDBG, "record", "-o", run, "--"] + argv, **kwargs)


def have_torch():
    return subprocess.run([TORCH_PYTHON, "-c", "import torch"], capture_output=True).returncode == 0


def torch_hook_here():
    """Whether torch and the torch hook are here to record with; if not, says SKIP and why."""
    if have_torch() and HAVE_TORCH_HOOK:
        return True
    print("SKIP: no torch hook or no torch for " + TORCH_PYTHON)
    return False


def case_exit_status():
    run = fresh("exit_status")
    result = record(run, ["/bin/sh", "-c", "exit 3"], capture_output=True, text=True)
    check(result.returncode == 3, f"exit status {result.returncode}, want 3")
    check(databases(run) == [], f"a process without torch wrote {databases(run)}")
    check(os.path.exists(os.path.join(run, "tdbg-run.json")), "no tdbg-run.json in the run")
    # Nothing recorded is said, after the program, and again by the tool that reads the run.
    check("no process of the program loaded torch: nothing was recorded" in result.stderr,
          f"record says nothing was recorded: {result.stderr!r}")
    # A hook library named by hand that is not there: said, not "no process loaded torch".
    result = subprocess.run([TDBG, "record", "-o", fresh("no_hook"), "--", "/bin/true"],
                            capture_output=True, text=True,
                            env=dict(os.environ, TDBG_TORCH_LIB="/nonexistent/libhook.so"))
    check(result.returncode == 0
          and "TDBG_TORCH_LIB=/nonexistent/libhook.so names no file" in result.stderr
          and "no process of the program loaded torch" not in result.stderr,
          f"a missing TDBG_TORCH_LIB is named: {result.stderr!r}")
    diff = subprocess.run([TDBG, "diff", run, run], capture_output=True, text=True)
    check(diff.returncode == 2 and "no process of the recorded program loaded torch" in diff.stderr,
          f"diff says why the run holds nothing (exit {diff.returncode}): {diff.stderr!r}")
    if not have_torch() or not HAVE_TORCH_HOOK:
        return
    # A hook library that is there but does not load (not a library): torch was loaded, and
    # record says the hook was not, with the loader's reason, not "no process loaded torch".
    broken = os.path.join(WORK, "broken_hook.so")
    with open(broken, "w") as f:
        f.write("not a library\n")
    no_hook = fresh("broken_hook")
    result = subprocess.run([TDBG, "record", "-o", no_hook, "--", TORCH_PYTHON, "-c",
                             "import torch; print(torch.ones(2).sum().item())"],
                            capture_output=True, text=True,
                            env=dict(os.environ, TDBG_TORCH_LIB=broken))
    check(result.returncode == 0 and result.stdout == "2.0\n"
          and "the program loaded torch, but tdbg's torch hook could not be loaded into it ("
          + broken in result.stderr and "no process of the program loaded torch" not in result.stderr
          and not os.path.exists(os.path.join(no_hook, ".tdbg-hook-failed")),
          f"a hook that does not load is named, with why: {result.stderr!r}")
    # A torch process's database notes how it ended (meta exit_status, docs/schema.md).
    for code, want in (("sys.exit(3)", "3"), ("os._exit(5)", "5"), ("pass", "0"),
                       ("raise SystemExit('bye')", "1")):
        run = fresh("exit_status_torch")
        result = record(run, [TORCH_PYTHON, "-c", "import os, sys, torch; torch.ones(1).neg(); " + code],
                        capture_output=True)
        dbs = databases(run)
        check(len(dbs) == 1, f"{code}: one database, got {dbs}")
        if dbs:
            con = sqlite3.connect("file:%s?mode=ro" % dbs[0], uri=True)
            got = dict(con.execute("select key, value from meta")).get("exit_status")
            check(got == want and result.returncode == int(want),
                  f"{code}: exit_status {got!r} (exit {result.returncode}), want {want}")


def case_signal():
    run = fresh("signal")
    result = record(run, ["/bin/sh", "-c", "kill -SEGV $$"])
    check(result.returncode == -signal.SIGSEGV,
          f"exit status {result.returncode}, want killed by SIGSEGV (-{int(signal.SIGSEGV)}), as without tdbg")


def case_forward_sigterm():
    run = fresh("forward")
    # The program reports the signal it got on stdout, so forwarding is seen, not assumed.
    script = "trap 'echo got TERM; exit 42' TERM; echo ready; while :; do sleep 0.05; done"
    proc = subprocess.Popen([TDBG, "record", "-o", run, "--", "/bin/sh", "-c", script],
                            stdout=subprocess.PIPE)
    check(proc.stdout.readline() == b"ready\n", "program did not start")
    proc.send_signal(signal.SIGTERM)
    rest = proc.stdout.read()
    rc = proc.wait(timeout=30)
    check(rest == b"got TERM\n", f"program saw {rest!r}, want the forwarded TERM")
    check(rc == 42, f"exit status {rc}, want the program's 42")
    # `kill -ABRT` (a core dump of a hung job) goes to the program too.
    script = "trap 'echo got ABRT; exit 43' ABRT; echo ready; while :; do sleep 0.05; done"
    proc = subprocess.Popen([TDBG, "record", "-o", fresh("forward_abrt"), "--", "/bin/sh", "-c",
                             script], stdout=subprocess.PIPE)
    check(proc.stdout.readline() == b"ready\n", "program did not start")
    proc.send_signal(signal.SIGABRT)
    rest = proc.stdout.read()
    rc = proc.wait(timeout=30)
    check(rest == b"got ABRT\n" and rc == 43, f"SIGABRT: program saw {rest!r}, exit {rc}")


def case_same_folder():
    # Two recordings started into one folder at the same moment: one records, the other is
    # refused (t143: both were accepted in 1 of 3 tries, one manifest over the other's).
    for trial in range(5):
        run = os.path.join(WORK, "same_folder_%d" % trial)
        shutil.rmtree(run, ignore_errors=True)
        procs = [subprocess.Popen([TDBG, "record", "-q", "-o", run, "--", "/bin/sh", "-c", "sleep 0.5"],
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
        results = [(p.wait(timeout=60), p.stderr.read()) for p in procs]
        codes = sorted(rc for rc, _ in results)
        check(codes[0] == 0 and codes[1] != 0
              and any("a recording is still running into it" in err for _, err in results),
              f"trial {trial}: one recording, the other refused (got {results})")


def case_disk_full():
    # A folder on a disk with no space left: the program runs as without tdbg, and record
    # says the disk is full, not that no process loaded torch (t143 F7). Needs a tmpfs of its
    # own, which only root may mount.
    if not torch_hook_here():
        return SKIP
    disk = os.path.join(WORK, "full_disk")
    os.makedirs(disk, exist_ok=True)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", disk],
                                           capture_output=True).returncode != 0:
        print("SKIP: mounting a small tmpfs needs root")
        return SKIP
    try:
        with open(os.path.join(disk, "fill"), "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        code = "import torch; print(torch.ones(3).add(1).sum().item())"
        p = record(os.path.join(disk, "run"), [TORCH_PYTHON, "-c", code], capture_output=True, text=True)
        check(p.returncode == 0 and p.stdout == "6.0\n", f"the program ran as without tdbg ({p.returncode}, {p.stdout!r})")
        check("its disk is full" in p.stderr and "no process of the program loaded torch" not in p.stderr,
              f"record says the disk is full ({p.stderr!r})")
    finally:
        subprocess.run(["umount", disk])


def case_sigkill():
    # SIGKILL cannot be forwarded: the program must end with `tdbg record`, as it would have
    # ended without tdbg, not run on under init.
    run = fresh("sigkill")
    script = "echo $$; echo ready; while :; do sleep 0.05; done"
    proc = subprocess.Popen([TDBG, "record", "-o", run, "--", "/bin/sh", "-c", script],
                            stdout=subprocess.PIPE)
    pid = int(proc.stdout.readline())
    check(proc.stdout.readline() == b"ready\n", "program did not start")
    proc.kill()
    proc.wait(timeout=30)
    gone = False
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            gone = True
            break
        time.sleep(0.05)
    if not gone:
        os.kill(pid, signal.SIGKILL)
    check(gone, "the program ended when tdbg record was killed")


def case_streams():
    run = fresh("streams")
    payload = os.urandom(1 << 20)
    # stdin to stdout untouched, and a known binary blob on stderr.
    argv = ["/bin/sh", "-c", "cat; printf 'err\\000\\377' >&2"]
    plain = subprocess.run(argv, input=payload, capture_output=True)
    # (-q, --quiet: tdbg's own lines, such as "nothing was recorded", are not the program's.)
    traced = subprocess.run([TDBG, "record", "-q", "-o", run, "--"] + argv, input=payload,
                            capture_output=True)
    check(traced.returncode == plain.returncode == 0, f"status {traced.returncode}")
    check(traced.stdout == payload, "stdout differs from the input")
    check(traced.stderr == plain.stderr, f"stderr {traced.stderr!r} != {plain.stderr!r}")


def case_non_utf8():
    # Linux names are bytes: a Latin-1 argument, working directory or script name is legal.
    # The program runs as without tdbg, and every command reads and writes such runs.
    run = fresh("non_utf8")
    result = record(run, [b"/bin/echo", b"arg\xff"], capture_output=True)
    check(result.returncode == 0 and result.stdout == b"arg\xff\n",
          f"echo with a Latin-1 argument: status {result.returncode}, stdout {result.stdout!r}, "
          f"stderr {result.stderr[-300:]!r}")
    check(json.load(open(os.path.join(run, "tdbg-run.json"), encoding="utf-8")) is not None,
          "tdbg-run.json is valid JSON")
    # One error line, whatever the path holds (a newline here).
    result = subprocess.run([TDBG, "diff", os.path.join(WORK, "no\nsuch"), run],
                            capture_output=True, text=True)
    check(result.returncode == 2 and result.stderr.count("\n") == 1 and "no\\x0asuch" in result.stderr,
          f"an error naming a path with a newline is one line: {result.stderr!r}")
    if not torch_hook_here():
        return
    folder = os.path.join(WORK.encode(), b"non_utf8_m\xe9d")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    script = os.path.join(folder, b"caf\xe9.py")
    with open(script, "w") as f:
        f.write("import sys, torch\ntorch.manual_seed(0)\n"
                "print(torch.randn(3).mul(2).sum().item(), len(sys.argv))\n")
    runs = []
    for name in ("non_utf8_a", "non_utf8_b"):
        runs.append(fresh(name))
        plain = subprocess.run([TORCH_PYTHON.encode(), script, b"x\xe9"], cwd=folder,
                               capture_output=True)
        traced = subprocess.run([TDBG.encode(), b"record", b"-o", runs[-1].encode(), b"--",
                                 TORCH_PYTHON.encode(), script, b"x\xe9"], cwd=folder,
                                capture_output=True)
        check(traced.returncode == plain.returncode == 0 and traced.stdout == plain.stdout
              and len(databases(runs[-1])) == 1,
              f"a torch script from a Latin-1 folder: status {traced.returncode}, stdout "
              f"{traced.stdout!r} (without tdbg {plain.stdout!r}), stderr {traced.stderr[-300:]!r}")
    shown = subprocess.run([TDBG, "show", "--limit", "3", runs[0]], capture_output=True).stdout
    check(b"/non_utf8_m\xe9d/caf\xe9.py:3 in <module>" in shown,
          f"the ops' source is the script's path, bytes as they are: {shown[:600]!r}")
    result = subprocess.run([TDBG, "diff", "--json", *runs], capture_output=True)
    check(result.returncode == 0 and json.loads(result.stdout)["status"] == "identical",
          f"diff --json of the two: status {result.returncode}, {result.stderr[-300:]!r}")
    elsewhere = fresh("non_utf8_c")  # the same script run from another folder
    subprocess.run([TDBG.encode(), b"record", b"-o", elsewhere.encode(), b"--",
                    TORCH_PYTHON.encode(), script, b"x\xe9"], cwd=WORK, capture_output=True)
    result = subprocess.run([TDBG, "diff", "--json", runs[0], elsewhere], capture_output=True)
    check(result.returncode in (0, 1) and json.loads(result.stdout) is not None,
          f"diff --json against a run from elsewhere (settings differ in cwd): status "
          f"{result.returncode}, {result.stderr[-300:]!r}")
    bundle = os.path.join(WORK, "non_utf8.tar.gz")
    result = subprocess.run([TDBG, "bundle", *runs, "-o", bundle], capture_output=True)
    check(result.returncode == 0 and os.path.getsize(bundle) > 0,
          f"bundle of the two: status {result.returncode}, {result.stderr[-300:]!r}")


def case_missing_program():
    run = fresh("missing")
    result = record(run, ["/nonexistent/program"], capture_output=True, text=True)
    check(result.returncode == 127, f"exit status {result.returncode}, want 127")
    check(result.stderr.count("\n") == 1 and "/nonexistent/program" in result.stderr,
          f"want a one-line error naming the program, got {result.stderr!r}")
    # Nothing ran, so nothing is left that the next try would need --force for.
    check(not os.path.exists(run), f"{run} was left behind")
    check(record(run, ["/bin/true"]).returncode == 0, "the next recording into it needed --force")


def case_run_directory():
    run = fresh("rundir")
    os.makedirs(run)
    with open(os.path.join(run, "notes.txt"), "w") as f:
        f.write("user file\n")
    result = record(run, ["/bin/true"], capture_output=True, text=True)
    check(result.returncode == 2, f"recording into a foreign folder: status {result.returncode}")
    check("not a tdbg run directory" in result.stderr, f"error was {result.stderr!r}")
    result = subprocess.run([TDBG, "record", "--force", "-o", run, "--", "/bin/true"])
    check(result.returncode == 0, "--force did not reuse the folder")
    check(os.path.exists(os.path.join(run, "notes.txt")), "--force removed a user file")
    # A run directory is replaced only with --force.
    run2 = fresh("rundir2")
    check(record(run2, ["/bin/true"]).returncode == 0, "first recording failed")
    result = record(run2, ["/bin/true"], capture_output=True, text=True)
    check(result.returncode == 2 and "earlier recording" in result.stderr,
          f"second recording without --force: {result.returncode} {result.stderr!r}")
    # A folder that exists but cannot be written: refused before the program runs (root writes
    # past permission bits, so there a read-only bind mount, where mounts are allowed).
    ro = fresh("rundir_readonly")
    os.makedirs(ro)
    if os.geteuid() != 0:
        os.chmod(ro, 0o555)
        undo = lambda: os.chmod(ro, 0o755)
    elif (subprocess.run(["mount", "--bind", ro, ro], capture_output=True).returncode == 0 and
          subprocess.run(["mount", "-o", "remount,bind,ro", ro], capture_output=True).returncode == 0):
        undo = lambda: subprocess.run(["umount", ro], capture_output=True)
    else:
        subprocess.run(["umount", ro], capture_output=True)
        print("skip  a read-only run folder: as root, and no bind mount can be made here")
        return
    try:
        result = record(ro, ["/bin/echo", "ran"], capture_output=True, text=True)
        check(result.returncode == 2 and "cannot write into it" in result.stderr and
              result.stderr.count("\n") == 1 and result.stdout == "",
              f"a read-only folder: refused in one line, the program not run "
              f"({result.returncode} {result.stdout!r} {result.stderr!r})")
    finally:
        undo()


def start_and_wait(argv, ready, env=None, timeout=60):
    """Starts `argv` and waits until `ready()` holds (or it ended, or `timeout` s passed)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + timeout
    while not ready() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    return proc


def force_into(run):
    return subprocess.run([TDBG, "record", "--force", "-o", run, "--", "/bin/true"],
                          capture_output=True, text=True)


def case_force_live():
    """--force never removes the files of a recording still writing into the directory."""
    if not torch_hook_here():
        return SKIP
    run = fresh("force_live")
    first = start_and_wait(
        [TDBG, "record", "-o", run, "--", TORCH_PYTHON, "-c",
         "import torch, time\nx = torch.ones(3) + 1\ntime.sleep(6)\nprint((x * 2).sum().item())"],
        lambda: databases(run))
    check(databases(run) and first.poll() is None, "the first recording made no database in time")
    live = databases(run)
    result = force_into(run)
    check(result.returncode == 2 and "still running into it" in result.stderr,
          f"--force over a live recording: status {result.returncode}, {result.stderr!r}")
    out, err = first.communicate(timeout=120)
    check(first.returncode == 0 and out.strip() == "12.0",
          f"the live recording: status {first.returncode}, {out!r} {err[-300:]!r}")
    check(databases(run) == live, f"its database was replaced: {databases(run)} vs {live}")
    shown = subprocess.run([TDBG, "show", run], capture_output=True, text=True)
    check(shown.returncode == 0 and "aten::mul" in shown.stdout,
          f"show of the live run after it ended: {shown.returncode} {shown.stderr!r}")
    # Nor one whose program has not loaded torch yet (no database to hold open).
    run = fresh("force_live_late")
    first = start_and_wait(
        [TDBG, "record", "-o", run, "--", TORCH_PYTHON, "-c",
         "import time\ntime.sleep(4)\nimport torch\nprint(torch.ones(3).sum().item())"],
        lambda: os.path.exists(os.path.join(run, "tdbg-run.json")), timeout=30)
    result = force_into(run)
    # Read meanwhile: not "nothing was recorded", which it is not known to be yet.
    early = subprocess.run([TDBG, "nan", run], capture_output=True, text=True)
    out, err = first.communicate(timeout=120)
    check(result.returncode == 2 and "still running into it" in result.stderr,
          f"--force before the program loaded torch: status {result.returncode}, {result.stderr!r}")
    check(early.returncode == 2 and "still being recorded" in early.stderr and
          "nothing was recorded" not in early.stderr,
          f"nan before the program loaded torch: status {early.returncode}, {early.stderr!r}")
    check(first.returncode == 0 and out.strip() == "3.0" and len(databases(run)) == 1,
          f"the late recording: status {first.returncode}, {databases(run)}")
    # Nor a process recording by hand (LD_PRELOAD, no tdbg record to ask): its open database.
    run = fresh("force_live_preload")
    env = dict(os.environ, LD_PRELOAD=PRELOAD, TDBG_OUT=run, TDBG_QUIET="1")
    first = start_and_wait([TORCH_PYTHON, "-c", "import torch, time\nx = torch.ones(3) + 1\n"
                            "time.sleep(5)\nprint(x.sum().item())"], lambda: databases(run), env=env)
    result = force_into(run)
    first.communicate(timeout=120)
    check(result.returncode == 2 and "holds its database open" in result.stderr,
          f"--force over a process recording by hand: {result.returncode}, {result.stderr!r}")


def case_environment():
    run = fresh("environment")
    env = dict(os.environ, LD_PRELOAD="", TDBG_RING="7")
    result = subprocess.run(
        [TDBG, "record", "--hash", "none", "--no-stacks", "-o", run, "--", "/usr/bin/env"],
        capture_output=True, text=True, env=env)
    check(result.returncode == 0, f"env failed: {result.returncode}")
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    check(seen.get("TDBG_HASH") == "none", "--hash did not reach TDBG_HASH")
    check(seen.get("TDBG_STACKS") == "0", "--no-stacks did not reach TDBG_STACKS")
    check(seen.get("TDBG_RING") == "7", "TDBG_RING from the environment was not kept")
    check(seen.get("TDBG_OUT") == os.path.realpath(run), f"TDBG_OUT is {seen.get('TDBG_OUT')}")
    check(seen.get("LD_PRELOAD", "").split(":")[0] == os.path.realpath(PRELOAD),
          f"LD_PRELOAD is {seen.get('LD_PRELOAD')}")
    env["LD_PRELOAD"] = "/lib/x86_64-linux-gnu/libm.so.6"
    result = subprocess.run([TDBG, "record", "-o", fresh("environment2"), "--", "/usr/bin/env"],
                            capture_output=True, text=True, env=env)
    preload = [l for l in result.stdout.splitlines() if l.startswith("LD_PRELOAD=")]
    check(preload == ["LD_PRELOAD=%s:%s" % (os.path.realpath(PRELOAD), env["LD_PRELOAD"])],
          f"existing LD_PRELOAD not kept after ours: {preload}")
    # A misspelt variable is said, not silently ignored.
    env = dict(os.environ, TDBG_HAHS="none")
    result = subprocess.run([TDBG, "record", "-o", fresh("environment3"), "--", "/bin/true"],
                            capture_output=True, text=True, env=env)
    check(result.returncode == 0 and "note: TDBG_HAHS is set but is no tdbg setting (did you mean "
          "TDBG_HASH?); it is ignored" in result.stderr, f"misspelt TDBG_HAHS: {result.stderr!r}")


def case_bad_options():
    # The help says each on/off option's default as [on] or [off], without CLI11's "{false}"
    # beside its --no- form (which reads as "off by default"), and diff's --context its own.
    shown = subprocess.run([TDBG, "record", "--help"], capture_output=True, text=True).stdout
    check("{false}" not in shown and "{true}" not in shown
          and re.search(r"--stacks,--no-stacks +Record.*\n? *.*\[on\]", shown) is not None,
          f"record --help: the defaults as [on]/[off] only: {shown}")
    longest = max(len(line) for line in shown.splitlines())
    check(longest <= 90, f"record --help wraps its descriptions (a line of {longest} characters)")
    shown = subprocess.run([TDBG, "diff", "--help"], capture_output=True, text=True).stdout
    check("--context INT:0..1000=3" in shown, f"diff --help gives --context's default: {shown}")
    for flags in (["--hash", "some"], ["--steps", "10:5"], ["--steps", "x"], ["--ops", "("],
                  ["--ring", "-1"], ["--ring", "abc"], ["--ring", "99999999999999999999"],
                  ["--flush-ms", "1e3"], ["--steps", "1:99999999999999999999"], ["--bogus-flag"],
                  ["--stacks", "--no-stacks"], ["--modules", "--modules", "--no-modules"],
                  ["--quiet=2"], ["--stacks=maybe"]):
        run = fresh("bad")
        result = subprocess.run([TDBG, "record"] + flags + ["-o", run, "--", "/bin/true"],
                                capture_output=True, text=True)
        check(result.returncode == 2, f"{flags}: status {result.returncode}, want 2")
        check(result.stderr.count("\n") == 1 and flags[0].split("=")[0] in result.stderr,
              f"{flags}: want a one-line error naming the flag, got {result.stderr!r}")
        check(not os.path.exists(os.path.join(run, "tdbg-run.json")), f"{flags}: ran anyway")
    # A word before `--` that is no option's value is named, not the program's words; an
    # on/off option given a value of its own gets the spellings that work.
    for flags, stray, hint in ((["--stacks", "0"], "0", "--stacks=0 or --no-stacks"),
                               (["--quiet", "1"], "1", "--quiet=1 or --no-quiet"),
                               (["--ring", "5", "junk"], "junk", "--no-stacks")):
        run = fresh("bad")
        result = subprocess.run([TDBG, "record"] + flags + ["-o", run, "--", "/bin/echo", "hi"],
                                capture_output=True, text=True)
        check(result.returncode == 2 and result.stderr.count("\n") == 1
              and f"not expected: {stray};" in result.stderr and hint in result.stderr
              and "hi" not in result.stderr and result.stdout == "",
              f"{flags}: status {result.returncode}, error {result.stderr!r}")
    # A run folder inside another run's, or no folder named: refused before the program runs.
    outer = fresh("outer_run")
    record(outer, ["/bin/true"], capture_output=True)
    for out, said in ((os.path.join(outer, "inner"), "is inside the run folder"),
                      ("", "-o names no folder")):
        result = subprocess.run([TDBG, "record", "-o", out, "--", "/bin/echo", "hi"],
                                capture_output=True, text=True)
        check(result.returncode == 2 and said in result.stderr and result.stdout == ""
              and not os.path.exists(os.path.join(outer, "inner")),
              f"-o {out!r}: status {result.returncode}, error {result.stderr!r}")
    # An option given no value takes the next option as its value: said so, not the on/off hint.
    run = fresh("bad")
    result = subprocess.run([TDBG, "record", "--hash", "-o", run, "--", "/bin/echo", "hi"],
                            capture_output=True, text=True)
    check(result.returncode == 2 and result.stderr.count("\n") == 1
          and "--hash took -o as its value: give it a value of its own (--hash=VALUE)" in result.stderr
          and "on/off" not in result.stderr,
          f"--hash with no value: status {result.returncode}, error {result.stderr!r}")
    # Words after `--` belong to the program, `--` and option names included.
    result = subprocess.run([TDBG, "record", "--no-stacks", "-o", fresh("dashes"), "--", "/bin/echo",
                             "a", "--", "--stacks", "1"], capture_output=True, text=True)
    check(result.returncode == 0 and result.stdout == "a -- --stacks 1\n",
          f"the program's words after --: {result.returncode} {result.stdout!r} {result.stderr!r}")
    # A mistyped command is named, with the commands there are.
    result = subprocess.run([TDBG, "recrod", "-o", fresh("bad"), "--", "/bin/true"],
                            capture_output=True, text=True)
    check(result.returncode == 2 and result.stderr.startswith("tdbg: unknown command 'recrod' (commands: record, ")
          and result.stderr.count("\n") == 1, f"a mistyped command: {result.returncode} {result.stderr!r}")
    # A bad value from the environment is named as the variable the user set.
    for name, value in (("TDBG_STEPS", "10:5"), ("TDBG_HASH", "some"), ("TDBG_OPS", "("),
                        ("TDBG_RING", "-1"), ("TDBG_FLUSH_MS", "x"), ("TDBG_STACKS", "maybe")):
        run = fresh("bad")
        result = subprocess.run([TDBG, "record", "-o", run, "--", "/bin/true"],
                                capture_output=True, text=True, env=dict(os.environ, **{name: value}))
        check(result.returncode == 2 and f"{name}={value}" in result.stderr
              and result.stderr.count("\n") == 1,
              f"{name}={value}: status {result.returncode}, error {result.stderr!r}")
    # The option on the command line replaces the variable's bad value.
    result = subprocess.run([TDBG, "record", "--ring", "5", "-o", fresh("bad"), "--", "/bin/true"],
                            capture_output=True, text=True, env=dict(os.environ, TDBG_RING="-1"))
    check(result.returncode == 0, f"--ring 5 over TDBG_RING=-1: {result.returncode} {result.stderr!r}")
    if not have_torch() or not HAVE_TORCH_HOOK:
        return
    # The environment route (LD_PRELOAD by hand): each bad value is said once per process, in
    # one line, and the default is used; the program runs as before.
    run = fresh("bad_env")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TDBG_")}
    # After a sanitizer runtime the test environment preloads (ASan build), if any.
    preload = " ".join(x for x in (os.environ.get("LD_PRELOAD"), PRELOAD) if x)
    env.update(LD_PRELOAD=preload, TDBG_OUT=run, TDBG_RING="abc", TDBG_FLUSH_MS="-1",
               TDBG_HASH_THREADS="0")
    result = subprocess.run([TORCH_PYTHON, "-c", "import torch; print(torch.ones(2).sum().item())"],
                            capture_output=True, text=True, env=env)
    check(result.returncode == 0 and result.stdout == "2.0\n", f"the program ran: {result}")
    lines = result.stderr.splitlines()
    check(len(lines) == 3 and all(v in result.stderr for v in
                                  ("TDBG_RING=abc", "TDBG_FLUSH_MS=-1", "TDBG_HASH_THREADS=0")),
          f"one line per bad variable: {lines}")
    check(len(databases(run)) == 1, "recorded with the defaults")
    # Said by the process that loads torch alone: a shell or a tool the variables reach keeps
    # its stderr (a script of 100 commands would print each line 100 times).
    result = subprocess.run(["/bin/sh", "-c", "/bin/echo fine"], capture_output=True, text=True, env=env)
    check(result.returncode == 0 and result.stdout == "fine\n" and result.stderr == "",
          f"a process without torch says nothing of them: {result.stderr!r}")
    # A relative TDBG_OUT is the folder of the directory the program started in, for the
    # program and its children, whatever directory they run in later.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TDBG_")}
    env.update(LD_PRELOAD=preload, TDBG_OUT="relative_run")
    shutil.rmtree(os.path.join(WORK, "relative_run"), ignore_errors=True)
    elsewhere = fresh("relative_elsewhere")
    os.makedirs(elsewhere)
    code = ("import os, subprocess, sys; os.chdir(sys.argv[1]); import torch; torch.ones(2).sum(); "
            "print(os.environ['TDBG_OUT']); "
            "subprocess.run([sys.executable, '-c', 'import torch; torch.ones(3).sum()'], check=True)")
    result = subprocess.run([TORCH_PYTHON, "-c", code, elsewhere], capture_output=True,
                            text=True, env=env, cwd=WORK)
    run = os.path.join(WORK, "relative_run")
    check(result.returncode == 0 and result.stdout == run + "\n" and len(databases(run)) == 2
          and not os.path.exists(os.path.join(elsewhere, "relative_run")),
          f"TDBG_OUT=relative_run then os.chdir: both processes in {run} "
          f"(status {result.returncode}, {result.stdout!r}, {databases(run)}, {result.stderr[-300:]!r})")


def case_dl_semantics():
    probe = os.environ.get("DL_PROBE")
    if not probe:
        return SKIP
    plain = subprocess.run([probe], capture_output=True, text=True)
    check(plain.returncode == 0, "dl_semantics fails even without tdbg: " + plain.stdout)
    traced = record(fresh("dl"), [probe], capture_output=True, text=True)
    check(traced.returncode == 0, "dl_semantics under tdbg: " + traced.stdout + traced.stderr)
    check(traced.stdout == plain.stdout, f"{traced.stdout!r} != {plain.stdout!r}")


def case_import_torch():
    if not have_torch():
        print("SKIP: no torch for " + TORCH_PYTHON)
        return SKIP
    run = fresh("torch")
    code = "import torch; print(torch.ones(3).mul(2).sum().item())"
    plain = subprocess.run([TORCH_PYTHON, "-c", code], capture_output=True, text=True)
    traced = record(run, [TORCH_PYTHON, "-c", code], capture_output=True, text=True)
    check(traced.returncode == 0, f"import torch under tdbg: status {traced.returncode}: "
          + traced.stderr[-500:])
    check(traced.stdout == plain.stdout == "6.0\n", f"stdout {traced.stdout!r}")
    if HAVE_TORCH_HOOK:
        check(len(databases(run)) == 1, f"want one database, got {databases(run)}")


def case_empty_step_window():
    # A loop that updates its weights by hand runs no optimizer step: a --steps window past
    # step 0 records nothing, and `tdbg record` says why once; a window it reaches is silent.
    if not torch_hook_here():
        return SKIP
    code = ("import torch\nw = torch.ones(3, requires_grad=True)\n"
            "for i in range(6):\n    (w * w).sum().backward()\n"
            "    with torch.no_grad():\n        w -= 0.1 * w.grad\n    w.grad = None\n")
    # Likewise an --ops pattern that matches no op's name; one that does is silent too.
    for option, value, warned, why in (("--steps", "4:6", True, "optimizer steps"),
                                       ("--steps", "0:1", False, ""),
                                       ("--ops", "zzz_nothing", True, "matches no op"),
                                       ("--ops", "aten::mul", False, "")):
        run = fresh(option[2:] + "_" + value.replace(":", "_"))
        p = subprocess.run([TDBG, "record", option, value, "-o", run, "--", TORCH_PYTHON,
                            "-c", code], capture_output=True, text=True)
        said = [line for line in p.stderr.splitlines() if "recorded no op" in line]
        check(p.returncode == 0 and len(said) == (1 if warned else 0)
              and (not warned or f"{option} {value} recorded no op" in said[0] and why in said[0]),
              f"{option} {value}: warned {warned} (got {p.returncode}, {p.stderr[-400:]!r})")
        if warned and option == "--steps":
            # show and nan say why later, with how far the program got (no optimizer step).
            shown = subprocess.run([TDBG, "show", run], capture_output=True, text=True)
            nan = subprocess.run([TDBG, "nan", run], capture_output=True, text=True)
            why_none = "its recording selected none (--steps 4:6; steps count torch.optim " \
                       "optimizer steps, of which the program completed 0)"
            check(why_none in shown.stdout and why_none in nan.stdout and nan.returncode == 2,
                  f"show and nan say why the window holds no op: {shown.stdout!r} {nan.stdout!r}")


def case_keyboard_interrupt():
    # Python ends an uncaught KeyboardInterrupt by killing itself with SIGINT after finalizing,
    # past C's atexit: the database must still be closed, with the values written at close.
    if not torch_hook_here():
        return SKIP
    run = fresh("keyboard_interrupt")
    code = "import torch; torch.manual_seed(0); torch.ones(3).add(1); raise KeyboardInterrupt"
    traced = record(run, [TORCH_PYTHON, "-c", code], capture_output=True, text=True)
    check(traced.returncode == -signal.SIGINT,
          f"exit status {traced.returncode}, want killed by SIGINT (-{int(signal.SIGINT)}), as Python ends")
    dbs = databases(run)
    check(len(dbs) == 1, f"want one database, got {dbs}")
    con = sqlite3.connect("file:%s?mode=ro" % dbs[0], uri=True)
    meta = dict(con.execute("select key, value from meta"))
    check("end_time_ns" in meta, "the database was closed (meta end_time_ns)")
    check(meta.get("seed") == "0", f"the seed the program set, read at close (got {meta.get('seed')})")
    check(meta.get("exit_status") == "signal 2", f"exit_status {meta.get('exit_status')!r}")
    check(con.execute("pragma journal_mode").fetchone()[0] != "wal",
          "the writer left WAL mode at close")


# Trains a small model with SGD, one line per step: tdbg reads the optimizer's settings with
# Python code at each step, where a Ctrl-C's KeyboardInterrupt, raised at the next bytecode of
# the main thread, may land.
CTRL_C_SCRIPT = (
    "import os, signal, sys, torch\n"
    "def stop(sig, frame):\n"
    "    raise RuntimeError('stopped by the handler')\n"
    "if sys.argv[1:] == ['handler']:\n"
    "    signal.signal(signal.SIGINT, stop)\n"
    "torch.set_num_threads(1)\n"
    "model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
    "x, y = torch.randn(32, 16), torch.randn(32, 1)\n"
    "print(os.getpid(), flush=True)\n"
    "for step in range(200000):\n"
    "    loss = ((model(x) - y) ** 2).mean()\n"
    "    opt.zero_grad()\n"
    "    loss.backward()\n"
    "    opt.step()\n"
    "    print(step, loss.item(), flush=True)\n"
    "print('done', flush=True)\n")


def case_ctrl_c():
    # A SIGINT to the recorded program stops it with KeyboardInterrupt, or with what its own
    # handler raises, every time, as without tdbg: none is swallowed by tdbg's own Python code
    # (t143: 5 of 9 were, before).
    if not torch_hook_here():
        return SKIP
    # (Odd trials: the program's own SIGINT handler raises an exception of its own.)
    for trial in range(8):
        run = fresh("ctrl_c_%d" % trial)
        handler = ["handler"] if trial % 2 else []
        proc = subprocess.Popen([TDBG, "record", "-q", "-o", run, "--", TORCH_PYTHON, "-c", CTRL_C_SCRIPT] + handler,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pid = int(proc.stdout.readline())
        for _ in range(100):
            proc.stdout.readline()
        time.sleep(0.05 + 0.0137 * trial)  # at a moment unrelated to the program's prints
        os.kill(pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        if handler:
            check(proc.returncode == 1 and "stopped by the handler" in err and "done" not in out,
                  f"trial {trial}: SIGINT ends the program with its handler's exception (exit "
                  f"{proc.returncode}, {err[-200:]!r})")
        else:
            check(proc.returncode == -signal.SIGINT and "KeyboardInterrupt" in err and "done" not in out,
                  f"trial {trial}: SIGINT ends the program with KeyboardInterrupt (exit {proc.returncode}, "
                  f"{err[-200:]!r})")


def add_ops(run):
    """How many aten::add ops the run's databases hold (tdbg show, one line per op)."""
    out = subprocess.run([TDBG, "show", run, "--plain", "--limit", "0"], capture_output=True,
                         text=True)
    return sum(1 for line in out.stdout.splitlines() if line.startswith("aten::add "))


def meta_of(db):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    return dict(con.execute("select key, value from meta"))


# Runs 1000 recorded adds, says its pid, runs `then` (which may end it), says "ready" and waits
# to be ended from outside. The writer commits only every 60 s (--flush-ms): whatever the database holds at
# the end was committed because the process was ending.
SIGNAL_SCRIPT = (
    "import os, signal, sys, time, torch\n"
    "x = torch.zeros(4)\n"
    "for _ in range(1000):\n"
    "    x = x.add(1)\n"
    "print(os.getpid(), flush=True)\n"
    "{then}\n"
    "print('ready', flush=True)\n"
    "time.sleep(120)\n")


def recorded_until_signal(name, sig, then="pass"):
    """Records SIGNAL_SCRIPT, sends `sig` to the Python process once it is ready (unless `then`
    ends it), and returns (exit status of tdbg record, stdout, the run's one database)."""
    run = fresh(name)
    proc = subprocess.Popen([TDBG, "record", "--flush-ms", "60000", "-o", run, "--", TORCH_PYTHON,
                             "-c", SIGNAL_SCRIPT.format(then=then)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    first = proc.stdout.readline()
    check(first.strip().isdigit(), f"the program did not start: {first!r}")
    if sig is not None:
        line = ""
        while line != "ready\n":
            line = proc.stdout.readline()
            check(line != "", f"{name}: the program did not get ready")
            first += line
        os.kill(int(first.split()[0]), sig)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        fail(f"{name}: the program did not end after signal {sig}")
    out = proc.stdout.read()
    dbs = databases(run)
    check(len(dbs) == 1, f"{name}: want one database, got {dbs}")
    return proc.returncode, first + out, run, dbs[0]


def case_ending_signals():
    # A process ended by a signal from outside (a scheduler's SIGTERM, a SIGHUP) or by a fault
    # of its own keeps every op it recorded: the database is closed before the signal's default
    # action ends it, and it ends with that same signal.
    if not torch_hook_here():
        return SKIP
    cases = [("term", signal.SIGTERM, "pass"), ("hup", signal.SIGHUP, "pass"),
             ("usr1", signal.SIGUSR1, "pass"),
             ("segv", None, "import ctypes; ctypes.string_at(0)"),
             ("abort", None, "os.abort()"),
             # A SIGTERM the program sends itself ends it there, as without tdbg: no line
             # after it runs while the recording closes.
             ("self_term", None, "os.kill(os.getpid(), 15); print('ran on', flush=True)"),
             ("self_raise", None, "signal.raise_signal(15); print('ran on', flush=True)")]
    for name, sig, then in cases:
        rc, out, run, db = recorded_until_signal("ending_" + name, sig, then)
        want = sig or {"segv": signal.SIGSEGV, "abort": signal.SIGABRT,
                       "self_term": signal.SIGTERM, "self_raise": signal.SIGTERM}[name]
        check(rc == -want, f"{name}: exit status {rc}, want killed by signal {int(want)}")
        check("ran on" not in out, f"{name}: the program ran on after its own signal: {out!r}")
        meta = meta_of(db)
        check(meta.get("exit_status") == f"signal {int(want)}",
              f"{name}: exit_status {meta.get('exit_status')!r}, want 'signal {int(want)}'")
        check("end_time_ns" in meta, f"{name}: the database was not closed")
        check(not glob.glob(os.path.join(run, "*-reserve")),
              f"{name}: the writer's reserve for a full disk was left behind")
        n = add_ops(run)
        check(n == 1000, f"{name}: {n} of the 1000 recorded adds are in the database")


    # A libtorch C++ program too (its static TLS is large: the watcher needs a normal stack).
    program = os.environ.get("CPP_PROGRAM")
    if program and os.path.exists(program):
        run = fresh("ending_cpp")
        proc = subprocess.Popen([TDBG, "record", "--flush-ms", "60000", "-o", run, "--", program,
                                 "--steps", "100000000"], stdout=subprocess.DEVNULL)
        for _ in range(600):
            if databases(run):
                break
            time.sleep(0.05)
        time.sleep(2)  # training steps, none committed yet
        proc.send_signal(signal.SIGTERM)  # forwarded to the program
        rc = proc.wait(timeout=60)
        check(rc == -signal.SIGTERM, f"C++ program: exit status {rc}, want killed by SIGTERM")
        dbs = databases(run)
        check(len(dbs) == 1, f"C++ program: want one database, got {dbs}")
        meta = meta_of(dbs[0])
        check(meta.get("exit_status") == "signal 15",
              f"C++ program: exit_status {meta.get('exit_status')!r}, want 'signal 15'")
        con = sqlite3.connect("file:%s?mode=ro" % dbs[0], uri=True)
        ops = con.execute("select sum(count) from op_blocks").fetchone()[0] or 0
        check(ops > 0, "C++ program: the ops it ran before the signal were kept")


def case_killed_program():
    # SIGKILL (the OOM killer, a scheduler's hard kill) gives the writer no chance to close:
    # the database keeps what it committed and stays readable, and `tdbg record` removes the
    # full-disk reserve that the dead process can no longer give back.
    if not torch_hook_here():
        return SKIP
    rc, _, run, db = recorded_until_signal("killed", signal.SIGKILL)
    check(rc == -signal.SIGKILL, f"exit status {rc}, want killed by SIGKILL")
    check(not glob.glob(os.path.join(run, "*-reserve")),
          "the killed process's full-disk reserve was left in the run directory")
    check("end_time_ns" not in meta_of(db), "a SIGKILLed process closed its database")
    shown = subprocess.run([TDBG, "show", run, "--limit", "1"], capture_output=True, text=True)
    check(shown.returncode == 0 and "did not close its database" in shown.stdout,
          f"tdbg show on the killed run: {shown.stdout.strip()} {shown.stderr.strip()}")


def case_killed_ring_show():
    # A ring's last ops of a SIGKILLed program: `tdbg show` says that they are a ring's (not
    # the whole run) and where the program was when it was killed: its last top-level op, step
    # and line.
    if not torch_hook_here():
        return SKIP
    work = fresh("killed_ring")
    os.makedirs(work)
    script = os.path.join(work, "killed.py")
    with open(script, "w") as f:
        f.write("import os, signal, time, torch\n"
                "m = torch.nn.Linear(8, 1)\n"
                "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
                "for i in range(20):\n"
                "    loss = m(torch.ones(4, 8)).pow(2).mean()\n"
                "    opt.zero_grad(); loss.backward(); opt.step()\n"
                "x = loss.item()\n"
                "time.sleep(0.5)\n"
                "os.kill(os.getpid(), signal.SIGKILL)\n")
    run = os.path.join(work, "run")
    got = subprocess.run([TDBG, "record", "--quiet", "--ring", "100", "--flush-ms", "5", "-o", run,
                          "--", TORCH_PYTHON, script], capture_output=True, text=True)
    check(got.returncode == -signal.SIGKILL, f"exit status {got.returncode}, want SIGKILL")
    shown = subprocess.run([TDBG, "show", run, "--limit", "1"], capture_output=True, text=True)
    check(shown.returncode == 0, f"tdbg show: {shown.stderr.strip()}")
    lines = shown.stdout.splitlines()
    check(len(lines) > 3 and "--ring 100 kept the last ops, the earlier ones were dropped" in lines[2]
          and "the last op recorded: seq" in lines[2]
          and "aten::item in step 20 at killed.py:7" in lines[2],
          f"tdbg show on the killed ring: {shown.stdout[:800]}")


def case_ring_show_nested():
    # A ring whose first op held is nested in an op it dropped (an add_ inside AccumulateGrad,
    # which held the line): `tdbg show` says why that row has no line, rather than leave it
    # blank. The program is deterministic: a whole recording says which ring starts there.
    if not torch_hook_here():
        return SKIP
    work = fresh("ring_nested")
    os.makedirs(work)
    script = os.path.join(work, "train.py")
    with open(script, "w") as f:
        f.write("import torch\n"
                "torch.manual_seed(0)\n"
                "m = torch.nn.Linear(8, 1)\n"
                "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
                "for i in range(4):\n"
                "    loss = m(torch.ones(4, 8)).pow(2).mean()\n"
                "    opt.zero_grad(); loss.backward(); opt.step()\n")
    whole = os.path.join(work, "whole")
    got = subprocess.run([TDBG, "record", "--quiet", "-o", whole, "--", TORCH_PYTHON, script],
                         capture_output=True, text=True)
    check(got.returncode == 0, f"whole recording: {got.stderr.strip()}")
    # (Through the torch Python: the views read op blocks through tdbg's SQL functions, an
    # extension that the Python running this test may not be able to load.)
    query = subprocess.run([TORCH_PYTHON, "-c", textwrap.dedent("""
        import glob, os, sqlite3, sys
        con = sqlite3.connect(glob.glob(os.path.join(sys.argv[1], "*.sqlite"))[0])
        con.enable_load_extension(True)
        con.load_extension(sys.argv[2])
        total = con.execute("select count(*) from op_view").fetchone()[0]
        # The last op with no line of its own whose enclosing op is a top-level one.
        row = con.execute(
            "select o.seq, o.parent from op_view o join op_view p on p.seq = o.parent "
            "where o.stack is null and o.user_frame is null and o.fwd is null and p.depth = 0 "
            "order by o.seq desc limit 1").fetchone()
        print(total, *(row or ()))
        """), whole, os.path.join(os.path.dirname(os.path.abspath(TDBG)), "..", "lib", "libtdbg_sqlite")],
        capture_output=True, text=True)
    fields = [int(v) for v in query.stdout.split()]
    total = fields[0] if fields else 0
    nested = fields[1:] if len(fields) == 3 else None
    check(nested is not None, f"the whole recording has a nested op without a line: {query.stderr[-300:]}")
    if nested is None:
        return
    ring = os.path.join(work, "ring")
    got = subprocess.run([TDBG, "record", "--quiet", "--ring", str(total - nested[0]), "-o", ring,
                          "--", TORCH_PYTHON, script], capture_output=True, text=True)
    check(got.returncode == 0, f"ring recording: {got.stderr.strip()}")
    shown = subprocess.run([TDBG, "show", ring, "--limit", "1"], capture_output=True, text=True)
    rows = [l for l in shown.stdout.splitlines() if re.match(r"\s+\d+ t\d", l)]
    check(rows and rows[0].split()[0] == str(nested[0]) and
          f"(its enclosing op, seq {nested[1]}, is not in the recording)" in rows[0],
          f"the ring's first row says where its line went: {shown.stdout[:600]!r}")


def case_unreadable_memory():
    # A tensor over memory that cannot be read: a NumPy memmap whose file was truncated after
    # it was mapped (SIGBUS past the file's end), and an address that is not mapped (SIGSEGV).
    # The program reads only what can be read; tdbg must not read the rest and crash it. The
    # tensor is recorded as not hashed, and the part the program reads is hashed where read.
    if not torch_hook_here():
        return SKIP
    work = fresh("unreadable")
    os.makedirs(work)
    data = os.path.join(work, "data.bin")
    script = os.path.join(work, "unreadable.py")
    with open(script, "w") as f:
        f.write(
            "import ctypes, os, sys, numpy as np, torch\n"
            f"fn = {data!r}\n"
            "np.arange(1 << 20, dtype=np.float32).tofile(fn)\n"
            "mm = np.memmap(fn, dtype=np.float32, mode='r+')\n"
            "os.truncate(fn, 4096 * 4)\n"
            "t = torch.from_numpy(mm)\n"
            "print('sum', t[:1024].sum().item(), flush=True)\n"
            "bad = np.ctypeslib.as_array(ctypes.cast(ctypes.c_void_p(4096), "
            "ctypes.POINTER(ctypes.c_float)), (1 << 16,))\n"
            "u = torch.from_numpy(bad)\n"
            "print('empty', u[:0].sum().item(), flush=True)\n")
    plain = subprocess.run([TORCH_PYTHON, script], capture_output=True, text=True)
    check(plain.returncode == 0, f"the program itself fails: {plain.stderr.strip()[-300:]}")
    run = fresh("unreadable_run")
    got = record(run, [TORCH_PYTHON, script], capture_output=True, text=True)
    check(got.returncode == 0 and got.stdout == plain.stdout,
          f"recorded: exit {got.returncode}, printed {got.stdout!r}, want 0 and {plain.stdout!r}")
    shown = subprocess.run([TDBG, "show", run], capture_output=True, text=True)
    check(shown.returncode == 0, f"tdbg show: {shown.stderr.strip()}")
    unreadable = shown.stdout.count("memory that cannot be read")
    check(unreadable >= 2, f"the unreadable tensors are not named as such:\n{shown.stdout[:2000]}")
    check("sum 523776" in shown.stdout, "the part the program read was not hashed where read")


def case_signal_handlers_kept():
    # tdbg's handlers change nothing the program can see: its own handler runs, a forked child
    # that records nothing ends by the signal at once, and Python reports the default action.
    if not torch_hook_here():
        return SKIP
    own = ("import signal; print(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, flush=True); "
           "signal.signal(signal.SIGTERM, lambda *a: (print('handled', flush=True), sys.exit(7)))")
    rc, out, _, db = recorded_until_signal("handlers_own", signal.SIGTERM, own)
    check(rc == 7 and out.split("\n")[1:] == ["True", "ready", "handled", ""],
          f"the program's own SIGTERM handler: exit {rc}, printed {out!r}")
    check(meta_of(db).get("exit_status") == "7", "the program's exit status 7 was noted")
    # A fork child that runs no op is not recorded: SIGTERM ends it at once, as without tdbg,
    # and the parent records on.
    child = ("pid = os.fork()\n"
             "if pid == 0:\n"
             "    time.sleep(120)\n"
             "t0 = time.time(); os.kill(pid, 15); _, status = os.waitpid(pid, 0)\n"
             "print(os.WIFSIGNALED(status) and os.WTERMSIG(status), time.time() - t0 < 5)\n"
             "x.add(1); sys.exit(0)")
    rc, out, run, db = recorded_until_signal("handlers_fork", None, child)
    check(rc == 0 and out.split("\n")[1:] == ["15 True", ""],
          f"a forked child that records nothing: exit {rc}, printed {out!r}")
    check(add_ops(run) == 1001, "the parent recorded on after its child ended")
    check(meta_of(db).get("exit_status") == "0", "the parent's exit status")


def case_terminated_worker():
    # multiprocessing's terminate() (Pool.__exit__, a timed-out DataLoader worker) sends
    # SIGTERM: the worker's database keeps what it recorded, and its exit code is unchanged.
    if not torch_hook_here():
        return SKIP
    run = fresh("terminated_worker")
    code = (
        "import multiprocessing as mp, time, torch\n"
        "def work(ready):\n"
        "    x = torch.zeros(4)\n"
        "    for _ in range(500):\n"
        "        x = x.add(1)\n"
        "    ready.set()\n"
        "    time.sleep(120)\n"
        "if __name__ == '__main__':\n"
        "    ctx = mp.get_context('fork')\n"
        "    ready = ctx.Event()\n"
        "    p = ctx.Process(target=work, args=(ready,))\n"
        "    p.start(); ready.wait(60); p.terminate(); p.join()\n"
        "    print(p.exitcode)\n")
    plain = subprocess.run([TORCH_PYTHON, "-c", code], capture_output=True, text=True, timeout=120)
    traced = record(run, [TORCH_PYTHON, "-c", code],
                    capture_output=True, text=True, timeout=120,
                    env=dict(os.environ, TDBG_FLUSH_MS="60000"))
    check(traced.returncode == 0 and traced.stdout == plain.stdout == "-15\n",
          f"worker exit code {traced.stdout!r} under tdbg, {plain.stdout!r} without "
          f"({traced.stderr[-300:]!r})")
    workers = [db for db in databases(run) if "pid" in meta_of(db) and
               meta_of(db).get("exit_status") == "signal 15"]
    check(len(workers) == 1, f"the terminated worker's database, closed with 'signal 15': "
          f"{[meta_of(db).get('exit_status') for db in databases(run)]}")
    n = add_ops(workers[0])
    check(n == 500, f"{n} of the worker's 500 adds are in its database")


def case_worker_sigterm():
    # A DataLoader worker's SIGTERM handler (torch's) calls _exit(), which closes the
    # recording, from inside whatever the worker was doing: opening its database, or inside
    # malloc. The close must never wait on a lock the interrupted worker holds: the parent
    # here SIGTERMs 60 fresh workers at random moments of their first ops and waits for each.
    if not torch_hook_here():
        return SKIP
    run = fresh("worker_sigterm")
    code = (
        "import glob, os, random, signal, sys, time, torch\n"
        "def where(pid):\n"
        "    # Each thread of a hung worker: state, kernel wait, system call, blocked and\n"
        "    # pending signals (what the test's failure message shows).\n"
        "    out = []\n"
        "    for task in sorted(glob.glob('/proc/%d/task/*' % pid)):\n"
        "        def read(name):\n"
        "            try:\n"
        "                return open(task + '/' + name).read().strip()\n"
        "            except OSError as e:\n"
        "                return '?'\n"
        "        status = dict(l.split(':', 1) for l in read('status').splitlines() if ':' in l)\n"
        "        out.append('%s %s wchan=%s syscall=%s blk=%s pnd=%s' % (\n"
        "            task.rsplit('/', 1)[1], status.get('State', '?').strip(), read('wchan'),\n"
        "            read('syscall').split(' ')[0], status.get('SigBlk', '?').strip(),\n"
        "            status.get('ShdPnd', '?').strip()))\n"
        "    return '; '.join(out)\n"
        "random.seed(1)\n"
        "torch.zeros(1).add(1)\n"
        "for k in range(60):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        torch._C._set_worker_signal_handlers()\n"
        "        x = torch.zeros(64)\n"
        "        while True:\n"
        "            x = x.add(1).mul(0.5)\n"
        "    time.sleep(random.uniform(0, 0.03))\n"
        "    os.kill(pid, signal.SIGTERM)\n"
        "    deadline = time.time() + 20\n"
        "    while not os.waitpid(pid, os.WNOHANG)[0]:\n"
        "        if time.time() > deadline:\n"
        "            print('worker', k, 'hung:', where(pid))\n"
        "            os.kill(pid, signal.SIGKILL); os.waitpid(pid, 0)\n"
        "            sys.exit(1)\n"
        "        time.sleep(0.002)\n"
        "print('all ended')\n")
    traced = record(run, [TORCH_PYTHON, "-c", code], capture_output=True, text=True, timeout=900)
    check(traced.returncode == 0 and traced.stdout == "all ended\n",
          f"exit {traced.returncode}, printed {traced.stdout!r} ({traced.stderr[-300:]!r})")
    def status(db):
        try:
            return meta_of(db).get("exit_status")
        except sqlite3.Error:  # a worker ended while creating its database: nothing committed
            return None
    closed = [db for db in databases(run) if status(db) == "0"]
    check(len(closed) >= 1, "no worker's database was closed with its _exit status 0")
    # The run still reads: the databases of workers ended while opening are left out.
    shown = subprocess.run([TDBG, "show", run, "--limit", "1"], capture_output=True, text=True)
    check(shown.returncode == 0, f"tdbg show on the run: exit {shown.returncode} {shown.stderr[-200:]!r}")


def case_ipc_wrapper_named():
    # tdbg wraps torch.multiprocessing's rebuild functions (a received batch is data from
    # outside); where the wrapper shows in a traceback, its file names tdbg, not "<string>".
    if not torch_hook_here():
        return SKIP
    run = fresh("ipc_wrapper_named")
    code = ("import torch, torch.multiprocessing.reductions as r\n"
            "torch.ones(2).add(1)\n"
            "print(r.rebuild_storage_fd.__code__.co_filename)\n"
            "print(r.rebuild_storage_fd.__wrapped__.__code__.co_filename)\n")
    traced = record(run, [TORCH_PYTHON, "-c", code], capture_output=True, text=True)
    lines = traced.stdout.splitlines()
    check(traced.returncode == 0 and len(lines) == 2 and lines[0].startswith("<tdbg: ")
          and lines[1].endswith("reductions.py"),
          f"the wrapper's file: {traced.stdout!r} {traced.stderr[-200:]!r}")


def case_exec():
    # A torch program that execs another (os.execv keeps the pid): the first image's database
    # is closed before the exec, the new image records into one of its own, and neither the
    # streams nor the exit status change.
    if not torch_hook_here():
        return SKIP
    run = fresh("exec")
    code = ("import os, torch; print('before', torch.ones(2).sum().item(), flush=True); "
            "os.execv(%r, [%r, '-c', \"import torch, sys; print('after', "
            "torch.arange(5.).sum().item()); sys.exit(4)\"])" % (TORCH_PYTHON, TORCH_PYTHON))
    plain = subprocess.run([TORCH_PYTHON, "-c", code], capture_output=True)
    traced = record(run, [TORCH_PYTHON, "-c", code], capture_output=True)
    check(traced.returncode == plain.returncode == 4, f"exit status {traced.returncode}, want 4")
    check(traced.stdout == plain.stdout, f"stdout {traced.stdout!r} != {plain.stdout!r}")
    check(traced.stderr == plain.stderr, f"stderr {traced.stderr!r} != {plain.stderr!r}")
    dbs = databases(run)
    check(len(dbs) == 2, f"one database per image, got {dbs}")
    ops = {}
    for db in dbs:
        con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
        meta = dict(con.execute("select key, value from meta"))
        check("end_time_ns" in meta, f"{db} was closed")
        ops[os.path.basename(db)] = con.execute("select count(*) from op_blocks").fetchone()[0]
    check(all(n > 0 for n in ops.values()), f"both images recorded ops: {ops}")


def case_torch_children():
    if not have_torch():
        print("SKIP: no torch for " + TORCH_PYTHON)
        return SKIP
    run = fresh("children")
    # A torch process spawning a shell, a compiler-like child and a second torch process.
    code = (
        "import subprocess, sys, torch\n"
        "torch.ones(2).add(1)\n"
        "out = subprocess.run(['/bin/sh', '-c', 'printf \"%s\" \"child ok\"; ls / >/dev/null'],"
        " capture_output=True).stdout\n"
        "sys.stdout.write(out.decode() + '\\n')\n"
        "subprocess.run([sys.executable, '-c', 'import torch; torch.zeros(1).add(2)'], check=True)\n")
    plain = subprocess.run([TORCH_PYTHON, "-c", code], capture_output=True, text=True)
    traced = record(run, [TORCH_PYTHON, "-c", code], capture_output=True, text=True)
    check(traced.returncode == 0, "under tdbg: " + traced.stderr[-500:])
    check(traced.stdout == plain.stdout == "child ok\n", f"stdout {traced.stdout!r}")
    if HAVE_TORCH_HOOK:
        check(len(databases(run)) == 2,
              f"want a database per torch process (2), got {databases(run)}")


def case_left_running():
    # The program leaves a torch child running for a while after it exits (a dead rank's
    # DataLoader workers do): tdbg record waits for its database to close before it returns.
    if not torch_hook_here():
        return SKIP
    run = fresh("left_running")
    code = (
        "import os, sys, time, torch\n"
        "torch.ones(2).add(1)\n"
        "if os.fork() == 0:\n"
        "    time.sleep(2)\n"
        "    torch.zeros(3).add(2)\n"
        "    sys.exit(0)\n"
        "print('parent done')\n"
        "os._exit(0)\n")
    traced = record(run, [TORCH_PYTHON, "-c", code], capture_output=True, text=True)
    check(traced.returncode == 0 and traced.stdout == "parent done\n", "under tdbg: " + traced.stderr[-500:])
    check("waiting (at most 15 s) for processes the program left running" in traced.stderr,
          f"record says what it waits for: {traced.stderr!r}")
    closed = []
    for path in databases(run):
        con = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
        closed.append(con.execute("select count(*) from meta where key = 'end_time_ns'").fetchone()[0])
        con.close()
    check(len(closed) == 2 and all(closed), f"both databases are closed when record returns: {closed}")


def case_database_not_created():
    # A process that loads torch where its database cannot be written (a file-size limit of
    # 8 KiB here; a disk too small elsewhere): the program runs as without tdbg, and record
    # says the database could not be created, not that no process loaded torch.
    if not torch_hook_here():
        return SKIP
    import resource
    run = fresh("database_not_created")
    code = ("import signal; signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "import torch; print(torch.ones(2).sum().item())\n")
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
    result = subprocess.run([TDBG, "record", "-o", run, "--", TORCH_PYTHON, "-c", code],
                            capture_output=True, text=True, preexec_fn=limit)
    check(result.returncode == 0 and result.stdout == "2.0\n",
          f"the program runs as without tdbg: {result.returncode} {result.stdout!r}")
    check("the program loaded torch, but tdbg could not create its database there" in result.stderr
          and "no process of the program loaded torch" not in result.stderr,
          f"record says why nothing was recorded: {result.stderr!r}")
    # And so do the readers, later (from tdbg-run.json).
    for command in (["show"], ["nan"], ["diff", run]):
        later = subprocess.run([TDBG] + command + [run], capture_output=True, text=True)
        check(later.returncode == 2 and "could not create its database there" in later.stderr
              and "no process of the recorded program loaded torch" not in later.stderr,
              f"{command[0]} says why nothing was recorded: {later.returncode} {later.stderr!r}")


def case_file_size_limit():
    # A file-size limit (`ulimit -f`) that the database reaches part way: the program goes on
    # as without tdbg, and the readers say the recording stopped there (the note beside the
    # database, which no later commit could write into it), not that the process was killed.
    if not torch_hook_here():
        return SKIP
    import resource
    run = fresh("file_size_limit")
    code = ("import torch\n"
            "m = torch.nn.Linear(64, 64); opt = torch.optim.SGD(m.parameters(), lr=0.01)\n"
            "for step in range(1500):\n"
            "    loss = m(torch.randn(32, 64)).pow(2).mean(); opt.zero_grad(); loss.backward(); opt.step()\n"
            "print('done')\n")
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, 2 << 20))
    result = subprocess.run([TDBG, "record", "-o", run, "--", TORCH_PYTHON, "-c", code],
                            capture_output=True, text=True, preexec_fn=limit)
    check(result.returncode == 0 and result.stdout == "done\n",
          f"the program runs as without tdbg: {result.returncode} {result.stdout!r} {result.stderr!r}")
    nan = subprocess.run([TDBG, "nan", run], capture_output=True, text=True)
    check(nan.returncode == 2 and "stopped being recorded at seq" in nan.stdout and
          "(a file-size limit of 2097152 bytes is set: ulimit -f)" in nan.stdout,
          f"nan: unchecked after the stop, not finite, and why ({nan.returncode} {nan.stdout!r})")
    show = subprocess.run([TDBG, "show", run, "--limit", "1"], capture_output=True, text=True)
    check("killed" not in show.stdout and "SIGKILL" not in show.stdout,
          f"show does not call it killed: {show.stdout[:300]!r}")


def case_closed_fds():
    # A program that closes every descriptor it did not open (os.closerange, as daemonizing
    # code does, or a loop of os.close), then opens files of its own and goes on with torch:
    # the database's descriptors stay open, every op is recorded and the database closes at
    # exit; the program's files get what it wrote.
    if not torch_hook_here():
        return SKIP
    # A program may also dup2 a file of its own onto descriptors it did not open: the
    # database's sit out of reach, and none of its pages lands in the program's file.
    for how, closing in (("closerange", "os.closerange(3, 65536)"),
                         ("loop", "for fd in range(3, 1024):\n"
                                  "    try: os.close(fd)\n"
                                  "    except OSError: pass"),
                         ("dup2", "junk = os.open('%s.junk', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
                                  "for fd in range(3, 256):\n"
                                  "    if fd != junk: os.dup2(junk, fd)\n"
                                  "os.write(junk, b'junk\\n')"
                          % os.path.join(WORK, "closed_fds_dup2.txt"))):
        run = fresh("closed_fds_" + how)
        mine = os.path.join(WORK, "closed_fds_" + how + ".txt")
        code = ("import os, torch\n"
                "x = torch.ones(4, 4)\n"
                "for i in range(50): x = torch.tanh(x @ x)\n"
                + closing + "\n"
                "files = [open('%s.%%d' %% k, 'w') for k in range(4)]\n"
                "for i in range(50): x = torch.tanh(x @ x)  # after\n"
                "for k, f in enumerate(files): f.write('mine %%d\\n' %% k); f.close()\n"
                "print(x.sum().item())\n" % mine)
        traced = record(run, [TORCH_PYTHON, "-c", code], capture_output=True, text=True)
        check(traced.returncode == 0 and traced.stdout.strip() != "" and
              "did not finish" not in traced.stderr,
              f"{how}: the program ends as it does without tdbg: {traced.returncode} {traced.stderr[-400:]!r}")
        wrote = []
        for k in range(4):
            with open("%s.%d" % (mine, k)) as f:
                wrote.append(f.read())
        check(wrote == ["mine %d\n" % k for k in range(4)], f"{how}: the program's files: {wrote}")
        if how == "dup2":
            with open(mine + ".junk", "rb") as f:
                junk = f.read()
            check(junk == b"junk\n", f"dup2: the program's file holds only what it wrote: {junk[:60]!r}")
        dbs = databases(run)
        ops = end = 0
        if dbs:
            con = sqlite3.connect("file:%s?mode=ro" % dbs[0], uri=True)
            end = con.execute("select count(*) from meta where key = 'end_time_ns'").fetchone()[0]
            con.close()
            shown = subprocess.run([TDBG, "show", run, "--limit", "1"], capture_output=True, text=True)
            first = shown.stdout.split("\n")[0]
            ops = int(first.split(": ")[1].split(" ops")[0]) if " ops" in first else 0
        # 100 matmuls and tanhs, 50 of them after the close: 200 ops at least.
        check(len(dbs) == 1 and end == 1 and ops >= 200,
              f"{how}: the database holds the ops after the close and was closed ({dbs}, {ops} ops, end {end})")


def case_replaced_fds():
    # A program that closes the database's own descriptors with a direct system call (which
    # no hook sees), or dup2s a file of its own onto them, then opens files and goes on: the
    # writer stops at once and never writes into the program's files (which may now have those
    # numbers), the program ends without a wait, and the run says where and why it stopped,
    # not that the process was killed.
    if not torch_hook_here():
        return SKIP
    for how, replacing in (("syscall", "libc.syscall(3, fd)"),
                           ("dup2", "os.dup2(os.open(os.devnull, os.O_WRONLY), fd)")):
        run = fresh("replaced_fds_" + how)
        mine = os.path.join(WORK, "replaced_fds_" + how + ".txt")
        code = ("import ctypes, os, time, torch\n"
                "x = torch.ones(4, 4)\n"
                "for i in range(50): x = torch.tanh(x @ x)\n"
                "time.sleep(0.3)  # committed\n"
                "libc = ctypes.CDLL(None)\n"
                "for name in os.listdir('/proc/self/fd'):\n"
                "    try: target = os.readlink('/proc/self/fd/' + name)\n"
                "    except OSError: continue\n"
                "    fd = int(name)\n"
                "    if '.sqlite' in target: %s\n"
                "files = [os.open('%s.%%d' %% k, os.O_RDWR | os.O_CREAT | os.O_TRUNC) for k in range(4)]\n"
                "for k, f in enumerate(files): os.write(f, b'mine %%d\\n' %% k)\n"
                "for i in range(50): x = torch.tanh(x @ x)  # after\n"
                "time.sleep(0.3)  # a commit would come now\n"
                "for f in files: os.close(f)\n"
                "print(x.sum().item())\n" % (replacing, mine))
        traced = record(run, [TORCH_PYTHON, "-c", code], capture_output=True, text=True)
        check(traced.returncode == 0 and traced.stdout.strip() != "" and
              "did not finish" not in traced.stderr,
              f"{how}: the program ends as it does without tdbg, with no wait: {traced.returncode} {traced.stderr[-400:]!r}")
        check("closed tdbg's descriptor" in traced.stderr,
              f"{how}: record says the recording stopped, and why: {traced.stderr[-400:]!r}")
        wrote = []
        for k in range(4):
            with open("%s.%d" % (mine, k), "rb") as f:
                wrote.append(f.read())
        check(wrote == [b"mine %d\n" % k for k in range(4)], f"{how}: the program's files hold only what it wrote: {[w[:40] for w in wrote]}")
        shown = subprocess.run([TDBG, "show", run, "--limit", "1"], capture_output=True, text=True)
        first = shown.stdout.split("\n")[0]
        ops = int(first.split(": ")[1].split(" ops")[0]) if " ops" in first else 0
        check(shown.returncode == 0 and ops >= 100 and "stopped being recorded at seq" in shown.stdout
              and "closed tdbg's descriptor" in shown.stdout and "killed" not in shown.stdout,
              f"{how}: show holds the ops before and says where and why the recording stopped: {shown.stdout[:500]!r} {shown.stderr!r}")


def case_fork_workers():
    if not have_torch():
        print("SKIP: no torch for " + TORCH_PYTHON)
        return SKIP
    run = fresh("fork")
    code = (
        "import torch\n"
        "from torch.utils.data import DataLoader, TensorDataset\n"
        "ds = TensorDataset(torch.arange(64, dtype=torch.float32).reshape(32, 2))\n"
        "total = sum(b[0].sum().item() for b in DataLoader(ds, batch_size=4, num_workers=2))\n"
        "print(total)\n")
    plain = subprocess.run([TORCH_PYTHON, "-c", code], capture_output=True, text=True,
                           timeout=300)
    traced = record(run, [TORCH_PYTHON, "-c", code], capture_output=True, text=True,
                    timeout=300)
    check(traced.returncode == 0, "DataLoader workers under tdbg: " + traced.stderr[-500:])
    check(traced.stdout == plain.stdout, f"{traced.stdout!r} != {plain.stdout!r}")
    if HAVE_TORCH_HOOK:
        # The parent and each worker that ran ops write their own intact database.
        found = databases(run)
        check(len(found) >= 2, f"want the parent's and the workers' databases, got {found}")
        for db in found:
            with sqlite3.connect(db) as conn:
                verdict = conn.execute("PRAGMA integrity_check").fetchone()[0]
            check(verdict == "ok", f"{db}: integrity_check says {verdict}")


def case_cpp_program():
    program = os.environ.get("CPP_PROGRAM")
    if not program or not os.path.exists(program):
        print("SKIP: the libtorch C++ example was not built")
        return SKIP
    run = fresh("cpp")
    # Linked against libtorch: the hook is installed just before main, not at a dlopen.
    plain = subprocess.run([program], capture_output=True, text=True, timeout=300)
    traced = record(run, [program], capture_output=True, text=True, timeout=300)
    check(traced.returncode == plain.returncode == 0, f"status {traced.returncode}: "
          + traced.stderr[-500:])
    check(traced.stdout == plain.stdout, "the C++ program printed something else under tdbg")
    if HAVE_TORCH_HOOK:
        found = databases(run)
        check(len(found) == 1, f"want one database, got {found}")
        with sqlite3.connect(found[0]) as conn:
            ops = conn.execute("SELECT sum(count) FROM op_blocks").fetchone()[0] or 0
            steps = conn.execute("SELECT count(*), max(end_seq >= start_seq) FROM regions "
                                 "WHERE kind = 1").fetchone()
        check(ops > 0, "the C++ program's database holds no ops")
        # torch::optim's C++ step() opens no record-function range; the preload counts it.
        n_steps = traced.stdout.count("loss")
        check(steps[0] == n_steps, f"{n_steps} optimizer steps recorded as step regions, got {steps}")


def main():
    name = sys.argv[1]
    os.makedirs(WORK, exist_ok=True)
    result = globals()["case_" + name]()
    sys.exit(result or 0)


if __name__ == "__main__":
    main()
