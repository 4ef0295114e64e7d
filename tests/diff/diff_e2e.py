"""End-to-end tests of `tdbg diff` and `tdbg nan` on real torch runs recorded by `tdbg record`.

Each case records two runs of scripts/train.py that differ in one known way and checks the
reported op, source line and cause. Usage: diff_e2e.py CASE (environment: TDBG, TORCH_PYTHON,
WORK). Exit 0 pass, 1 fail, 77 skip (no torch hook built).
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
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "scripts", "train.py")
DDP_SCRIPT = os.path.join(HERE, "scripts", "ddp_train.py")
TDBG = os.environ.get("TDBG", "tdbg")
PYTHON = os.environ.get("TORCH_PYTHON", "/usr/bin/python3")
WORK = os.environ.get("WORK", "/tmp/tdbg_diff_e2e")


def marks(script=SCRIPT):
    """Line numbers of the `# MARK:<name>` comments in a training script."""
    out = {}
    with open(script) as f:
        for n, line in enumerate(f, 1):
            m = re.search(r"# MARK:(\w+)", line)
            if m:
                out[m.group(1)] = n
    return out


MARK = marks()
failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


def record_ending(name, args, script=SCRIPT, options=()):
    """Records `script` with `args` into WORK/name whatever its exit; returns (run, process)."""
    out = os.path.join(WORK, name)
    shutil.rmtree(out, ignore_errors=True)
    cmd = [TDBG, "record", *options, "-o", out, "--", PYTHON, script] + args
    return out, subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def record(name, args, script=SCRIPT, options=()):
    out, p = record_ending(name, args, script, options)
    if p.returncode != 0:
        print(p.stdout, p.stderr)
        sys.exit("recording failed: " + " ".join(p.args))
    return out, p.stdout


def write_script(name, text):
    """Writes a case's program into WORK (made by main) and returns its path."""
    path = os.path.join(WORK, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def diff(a, b, *options):
    p = subprocess.run([TDBG, "diff", "--json", *options, a, b], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if p.returncode == 2:
        sys.exit("tdbg diff failed: " + p.stderr)
    result = json.loads(p.stdout)
    text = subprocess.run([TDBG, "diff", a, b], stdout=subprocess.PIPE, text=True).stdout
    print(text)
    return p.returncode, result


def nan_json(run, *options):
    """`tdbg nan --json`: its exit status and its result ({} where it failed)."""
    p = subprocess.run([TDBG, "nan", "--json", *options, run], stdout=subprocess.PIPE, text=True)
    return p.returncode, (json.loads(p.stdout) if p.returncode in (0, 1) else {})


def diff_text(a, b, *options):
    return subprocess.run([TDBG, "diff", a, b, *options], stdout=subprocess.PIPE, text=True).stdout


def identical_runs(name, text, args_a, args_b):
    """Records the program `text` with each argument list (which only change what it cannot
    read, such as garbage in freed memory): both runs must print the same and diff identical.
    Returns the two run directories."""
    script = write_script(name + ".py", text)
    a, out_a = record(name + "_a", args_a, script)
    b, out_b = record(name + "_b", args_b, script)
    check(out_a == out_b, f"{name}: the runs print the same ({out_a!r} vs {out_b!r})")
    rc, r = diff(a, b)
    check(rc == 0 and r["status"] == "identical",
          f"{name}: identical (got {rc}: {r['status']}, "
          f"{(r.get('first_divergence') or {}).get('detail')})")
    return a, b


def pair(case, args_a, args_b, script=SCRIPT):
    a, out_a = record(case + "_a", args_a, script)
    b, out_b = record(case + "_b", args_b, script)
    return a, b, out_a, out_b


def line_of(side):
    src = (side or {}).get("source") or {}
    return src.get("line"), os.path.basename(src.get("file") or "")


def expect_value(d, cause, mark, marks_ok=None):
    check(d is not None, "a divergence is reported")
    if d is None:
        return
    check(d["cause"] == cause, f"cause is {cause} (got {d['cause']}: {d.get('detail')})")
    line, file = line_of(d["a"])
    lines = [MARK[m] for m in (marks_ok or [mark])]
    check(file == "train.py" and line in lines,
          f"source is train.py:{lines} (got {file}:{line}, op {d['a'] and d['a']['op']})")


def case_identical():
    a, b, out_a, out_b = pair("identical", [], [])
    check(out_a == out_b, "the two runs print the same losses")
    rc, r = diff(a, b)
    check(rc == 0, f"exit status 0 (got {rc})")
    check(r["status"] == "identical", "status identical")


INPLACE_VIEW = r"""
import sys, numpy as np, torch
torch.manual_seed(0)
src = torch.randn(4, 3)
for step in range(3):
    # Freed heap memory holding NaN, then a different value in each run: an `empty` buffer may
    # be carved out of it.
    junk = np.full(64, np.nan if step == 0 else float(sys.argv[1]), np.float32); del junk
    buf = torch.empty(3, 4).t_()  # an in-place view of unwritten memory, overwritten next
    buf.copy_(src)
    b2 = torch.empty(12); b2.unsqueeze_(0); b2.fill_(1.0)
    # torch does the same inside: an `empty` result transposed in place, then filled.
    ev = torch.linalg.eigvals(src @ src.T + step)
    print(step, buf.sum().item(), b2.sum().item(), ev.real.sum().item())
"""


META_INIT = r"""
import sys, numpy as np, torch, torch.nn as nn
# Freed heap memory holding another value in each run: the buffers `to_empty()` allocates may
# be carved out of it.
junk = np.full(4096, float(sys.argv[1]), np.float32); del junk
model = nn.Sequential(nn.Linear(8, 16, device="meta"), nn.ReLU(), nn.Linear(16, 1, device="meta"))
model = model.to_empty(device="cpu")
torch.manual_seed(0)
for layer in model:
    if hasattr(layer, "reset_parameters"):
        layer.reset_parameters()
opt = torch.optim.SGD(model.parameters(), 0.1)
x, y = torch.randn(32, 8), torch.randn(32, 1)
for step in range(3):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    print(step, loss.item())
"""


def case_meta_init():
    # A model made on the meta device, moved with to_empty() and initialized in place:
    # Module._apply looks at each new, still unwritten buffer (_has_compatible_shallow_copy_type)
    # before anything is written into it. That look reads no contents: whatever garbage the
    # buffers held differs between runs, and the runs are the same.
    identical_runs("meta_init", META_INIT, ["1e30"], ["-7.5"])


def case_inplace_view():
    # In-place views (t_, unsqueeze_, transpose_) change a tensor's geometry, not its contents:
    # over unwritten memory they are not hashed, so the garbage there is no difference between
    # two runs of a deterministic program, nor a NaN.
    a, _ = identical_runs("inplace_view", INPLACE_VIEW, ["1"], ["2"])
    p = subprocess.run([TDBG, "nan", "--json", a], stdout=subprocess.PIPE, text=True)
    check(p.returncode == 0 and json.loads(p.stdout)["status"] == "finite",
          f"tdbg nan finds no NaN in garbage never read (got {p.returncode}: {p.stdout[:300]})")


def case_seed():
    a, b, _, _ = pair("seed", ["--seed", "0"], ["--seed", "1"])
    rc, r = diff(a, b)
    check(rc == 1, "exit status 1")
    d = r["first_divergence"]
    expect_value(d, "rng", "init")
    check(d and d["a"]["random"], "the op is a random op")
    # `show` gives a backward op the line of the forward op it differentiates, as diff does.
    shown = subprocess.run([TDBG, "show", "--limit", "0", a], stdout=subprocess.PIPE, text=True).stdout
    lines = [l for l in shown.splitlines() if "aten::threshold_backward" in l]
    want = f"train.py:{MARK['fc1']} in Net.forward (forward op's line)"
    check(lines and all(want in l for l in lines),
          f"relu's backward shows {want!r} (got {lines[:2]})")
    # The trace export marks the op diff names, with its cause.
    trace = os.path.join(WORK, "seed_trace.json")
    subprocess.run([TDBG, "export", "--chrome-trace", a, b, "-o", trace], check=True)
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    marks = [e for e in events if e.get("name") == "first divergence"]
    check(d and len(marks) == 2 and all(m["args"]["cause"] == d["cause"] for m in marks)
          and {m["args"]["seq"] for m in marks} == {d["a"]["seq"], d["b"]["seq"]},
          f"the trace marks diff's op in both runs (got {[m['args'] for m in marks]})")
    # Some steps only (t150 F6): every op and region written is of those steps.
    window = os.path.join(WORK, "seed_trace_window.json")
    subprocess.run([TDBG, "export", "--chrome-trace", "--steps", "1:3", a, "-o", window], check=True)
    with open(window) as f:
        some = json.load(f)["traceEvents"]
    steps = {e["args"]["step"] for e in some if e.get("ph") == "X"}
    whole = [e for e in events if e.get("ph") == "X" and e.get("pid") == 1]
    check(steps == {1, 2} and 0 < len([e for e in some if e.get("ph") == "X"]) < len(whole),
          f"--steps 1:3 writes steps 1 and 2 only (got {sorted(steps)})")
    p = subprocess.run([TDBG, "export", "--chrome-trace", "--steps", "3:1", a, "-o", window],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--steps 3:1" in p.stderr,
          f"a bad --steps is one line and exit 2 (got {p.returncode}: {p.stderr!r})")


def case_threads():
    a, b, out_a, out_b = pair("threads", ["--threads", "1"], ["--threads", "2"])
    check(out_a.splitlines()[0] != out_b.splitlines()[0],
          "precondition: the reduction's bits depend on the thread count here")
    rc, r = diff(a, b)
    d = r["first_divergence"]
    expect_value(d, "nondeterministic", "reduce")
    check(d and d["a"]["op"] == "aten::sum", f"op is aten::sum (got {d and d['a']['op']})")
    check(d and d["tensor"] and d["tensor"]["role"] == "output", "an output differs")
    check({"key": "num_threads", "a": "1", "b": "2"} in r.get("settings", []),
          f"the differing thread count is listed (got {r.get('settings')})")
    check(d and "settings that change how kernels compute: num_threads (A 1, B 2)" in d["detail"],
          f"and named in the verdict (got {d and d['detail']})")
    # The other way round: the run with more threads has extra nested ops inside the sum;
    # they must not turn the answer into a structural one.
    rc, r = diff(b, a)
    d = r["first_divergence"]
    expect_value(d, "nondeterministic", "reduce")
    check(d and d["a"]["op"] == "aten::sum", f"B vs A: op is aten::sum (got {d and d['a']['op']})")


def case_lr():
    a, b, _, _ = pair("lr", ["--lr", "0.05"], ["--lr", "0.1"])
    rc, r = diff(a, b)
    d = r["first_divergence"]
    expect_value(d, "arguments", "step")
    arg = (d or {}).get("argument") or {}
    check("0.05" in str(arg.get("value_a")) and "0.1" in str(arg.get("value_b")),
          f"the argument holds the learning rates (got {arg})")
    check(d and d["a"]["step"] == 0, "at the first optimizer step")
    # Which hyperparameter made that scalar: the optimizer's settings the runs recorded.
    opt = arg.get("optimizer") or {}
    diffs = opt.get("differs") or []
    check([(x.get("name"), x.get("a"), x.get("b")) for x in diffs] == [("lr", 0.05, 0.1)]
          and "lr is 0.05 in A and 0.1 in B" in opt.get("text", ""),
          f"the optimizer's lr is named with both values (got {opt})")
    text = diff_text(a, b)
    check("lr is 0.05 in A and 0.1 in B" in text, f"diff's text names it (got {text[:900]!r})")


# A model built without a seed (each run draws another init), then its weights replaced by
# ones from a seeded generator, as a checkpoint load does. argv[1]: the learning rate.
HEALED = r"""
import sys, torch
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
g = torch.Generator().manual_seed(0)
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.randn(p.shape, generator=g))
x, y = torch.randn(32, 8, generator=g), torch.randn(32, 1, generator=g)
opt = torch.optim.SGD(model.parameters(), lr=float(sys.argv[1]))
# "loader": batches from a DataLoader without workers, which still draws an (unused) base
# seed for them from the unseeded generator each epoch.
# "shuffle": the loader shuffles with the unseeded generator.
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8,
                                     shuffle="shuffle" in sys.argv)
for step in range(4):
    if "loader" in sys.argv:
        x, y = next(iter(loader))
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    if "clip" in sys.argv:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)  # MARK:healed_clip
    opt.step()  # MARK:healed_step
    print(step, loss.item())
"""


def case_healed():
    # The unseeded init differs, and is overwritten: it must not hide that the training is the
    # same (exit 1 still: the runs did differ), nor the change that matters after it.
    script = write_script("healed.py", HEALED)
    step_line = marks(script)["healed_step"]
    a, out_a = record("healed_a", ["0.1"], script)
    b, out_b = record("healed_b", ["0.1"], script)
    c, out_c = record("healed_c", ["0.2"], script)
    check(out_a == out_b and out_a != out_c, f"precondition: A and B train alike, C not ({out_a!r})")
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    healed = d.get("healed") or {}
    check(rc == 1 and d.get("cause") == "rng" and healed.get("to_end") is True
          and d.get("next") is None,
          f"the init differs, then every later op is the same to the end (got {rc}: "
          f"{d.get('cause')}, {healed}, next {d.get('next')})")
    text = subprocess.run([TDBG, "diff", a, b], stdout=subprocess.PIPE, text=True).stdout
    check(re.search(r"; healed by aten::copy_ at healed.py:\d+ \(seq \d+\): the same again from seq ", text.splitlines()[0]),
          f"the headline says so: {text.splitlines()[:1]}")
    # Torch's own seed in both runs, said once (t149).
    check("(both are torch's own random seed, drawn at start: no torch.manual_seed before this "
          "op in either run)" in d.get("detail", "") and "A's is torch's own" not in d.get("detail", ""),
          f"both seeds torch's own, said once: {d.get('detail')}")
    # With a DataLoader, whose base seed for workers it has none of differs too: a seed drawn
    # and read into Python is no result, and heals nothing less (t149 F2).
    la, lb, out_la, out_lb = pair("healed_loader", ["0.1", "loader"], ["0.1", "loader"], script)
    rc, r = diff(la, lb, "--results")
    d = r["first_divergence"] or {}
    check(out_la == out_lb and rc == 0 and r.get("results") == "same"
          and (d.get("healed") or {}).get("to_end") is True,
          f"the loader's seed draw differs, the training does not (got {rc}, {r.get('results')}, "
          f"healed {d.get('healed')})")
    # Shuffled by the unseeded generator as well: after the healed init, the sampler's draw
    # is the next divergence, the one that changes the training (t151 F3).
    sa, sb, _, _ = pair("healed_shuffle", ["0.1", "loader", "shuffle"], ["0.1", "loader", "shuffle"],
                        script)
    rc, r = diff(sa, sb)
    d = r["first_divergence"] or {}
    nxt = d.get("next") or {}
    check(rc == 1 and d.get("cause") == "rng" and (d.get("healed") or {}).get("ops_same", 0) > 0
          and nxt.get("cause") == "rng" and (nxt.get("a") or {}).get("op") == "aten::randperm",
          f"the shuffle after the healed init is named (got {d.get('healed')}, next "
          f"{nxt.get('cause')} at {(nxt.get('a') or {}).get('op')})")
    rc, r = diff(a, c)
    d = r["first_divergence"] or {}
    nxt = d.get("next") or {}
    arg = nxt.get("argument") or {}
    check(rc == 1 and d.get("cause") == "rng" and (d.get("healed") or {}).get("ops_same", 0) > 0
          and nxt.get("cause") == "arguments" and nxt["a"]["op"] == "aten::add_"
          and float(arg.get("value_a", 0)) == -0.1 and float(arg.get("value_b", 0)) == -0.2
          and nxt["a"]["step"] == 0,
          f"after the healed init, the learning rate is the next divergence: {d.get('healed')}, {nxt}")
    line, file = line_of(nxt.get("a"))
    check(file == "healed.py" and line == step_line, f"at the optimizer's step line (got {file}:{line})")
    # Ops added after healing (gradient clipping) are the next divergence, with their line.
    clip, _ = record("healed_clip", ["0.1", "clip"], script)
    rc, r = diff(a, clip)
    nxt = (r["first_divergence"] or {}).get("next") or {}
    line, file = line_of(nxt.get("b"))
    check(rc == 1 and nxt.get("kind") == "structure" and "inserted in B" in nxt.get("detail", "")
          and file == "healed.py" and line == marks(script)["healed_clip"],
          f"added clipping is the next divergence, at its line (got {nxt.get('detail')}, {file}:{line})")
    text = subprocess.run([TDBG, "diff", a, c], stdout=subprocess.PIPE, text=True).stdout
    check("healed, then diverged again at aten::add_" in text.splitlines()[0]
          and "argument: alpha (#2)  A -0.1  B -0.2" in text,
          f"the text names both: {text[:200]!r}")
    # A weight decay that differs, first applied to a parameter of zeros (a positional
    # embedding, a bias), changes no value there: one cause, named as such, not "healed".
    decay = write_script("decay_zeros.py", r"""
import sys, torch
torch.manual_seed(0)
pos = torch.nn.Parameter(torch.zeros(4, 3))
w = torch.nn.Parameter(torch.randn(3, 1))
opt = torch.optim.AdamW([pos, w], lr=0.01, weight_decay=float(sys.argv[1]))
x, y = torch.randn(4, 3), torch.randn(4, 1)
for step in range(3):
    opt.zero_grad()
    torch.nn.functional.mse_loss((x + pos) @ w, y).backward()
    opt.step()
""")
    a, _ = record("decay_a", ["0.01"], decay)
    b, _ = record("decay_b", ["0.1"], decay)
    text = diff_text(a, b)
    check("  the same argument changes values at: aten::mul_" in text and "healed:" not in text
          and "next divergence" not in text, f"the body tells one cause too: {text[:1500]}")
    headline = text.splitlines()[0]
    check(re.search(r"^diverged at aten::mul_ \(seq \d+, step 0\): arguments; it changed no value there, "
                    r"and the same argument changes values from aten::mul_ \(seq \d+, step 0\)$", headline),
          f"a weight decay first applied to zeros is one cause: {headline}")
    # Without the unseeded init, the seed torch drew in each run still differs, but no random
    # op does: the settings line must not send the user after seeds.
    unseeded = write_script("unseeded.py", r"""
import sys, torch
g = torch.Generator().manual_seed(0)
w = torch.randn(8, 1, generator=g).requires_grad_()
x, y = torch.randn(32, 8, generator=g), torch.randn(32, 1, generator=g)
opt = torch.optim.SGD([w], lr=float(sys.argv[1]))
for step in range(3):
    opt.zero_grad()
    torch.nn.functional.mse_loss(x @ w, y).backward()
    opt.step()
for _ in range(10):  # the same in both runs, after the weights that differ are last used
    torch.ones(3).sum()
""")
    a, _ = record("unseeded_a", ["0.1"], unseeded)
    b, _ = record("unseeded_b", ["0.2"], unseeded)
    rc, r = diff(a, b)
    seed = [st for st in r.get("settings", []) if st.get("key") == "seed"]
    check(rc == 1 and r["first_divergence"]["cause"] == "arguments" and len(seed) == 1
          and seed[0].get("note") == "no random op differs up to the divergence",
          f"the differing seed is said not to matter (got {rc}, {seed})")
    # A run compared with one of another script: said first.
    rc, r = diff(a, os.path.join(WORK, "healed_a"))
    check(rc == 1 and any("different programs (A unseeded.py, B healed.py)" in w
                          for w in r.get("warnings", [])),
          f"runs of two scripts are said to be (got {r.get('warnings')})")
    # The weights still differ at the end, only no longer used: that is no healing.
    check(r["first_divergence"].get("healed") is None,
          f"equal ops after training heal nothing (got {r['first_divergence'].get('healed')})")


def case_number():
    # A Python number that an op takes as a tensor (`loss * scale`; torch wraps it in a 0-dim
    # tensor): a changed constant is a changed argument, with both values, not outside data.
    a, b, _, _ = pair("number", ["--loss-scale", "1"], ["--loss-scale", "0.5"])
    rc, r = diff(a, b)
    d = r["first_divergence"]
    expect_value(d, "arguments", "scale")
    arg = (d or {}).get("argument") or {}
    check(str(arg.get("value_a")) == "1" and str(arg.get("value_b")) == "0.5",
          f"the argument holds the numbers (got {arg})")
    check(d and d["a"]["step"] == 0, "at the first step")
    # The op the user called, not the copy_ nested in it that converts the number.
    check(d and d["a"]["op"] == "aten::mul", f"op is aten::mul (got {d and d['a']['op']})")


def case_kernel_settings():
    # Settings that change how CPU kernels compute, set by the program after import: named as
    # the cause of a "nondeterministic" output, and cuDNN's flags (no kernel of the CPU) not.
    script = write_script("kernel_settings.py", (
        "import sys, torch\n"
        "mode = sys.argv[1]\n"
        "torch.set_flush_denormal(mode == 'flush')\n"
        "if mode == 'nomkldnn':\n"
        "    torch.backends.mkldnn.enabled = False\n"
        "    torch.backends.cudnn.deterministic = True\n"
        "    torch.backends.cudnn.benchmark = True\n"
        "torch.manual_seed(0)\n"
        "x = torch.randn(4, 3, 16, 16)\n"
        "w = torch.randn(8, 3, 3, 3)\n"
        "tiny = x * 1e-20 * 1e-20  # float32 denormals, flushed to 0 by FTZ/DAZ\n"
        "y = torch.conv2d(x, w)\n"
        "print(float(tiny.abs().sum()), float(y.sum()))\n"))
    base, _ = record("kernel_settings_base", ["base"], script)
    flush, _ = record("kernel_settings_flush", ["flush"], script)
    rc, r = diff(base, flush)
    d = r.get("first_divergence") or {}
    check(rc == 1 and d.get("cause") == "nondeterministic" and "flush_denormal (A 0, B 1)" in d.get("detail", ""),
          f"set_flush_denormal is named (got {d.get('cause')}: {d.get('detail')})")
    # Trained with a conv's bias before batch norm, whose gradient is zero but for rounding
    # noise: the noise differs wholly, at a magnitude far below the conv's inputs, and the
    # growth measures it against those, not as values 0.9 apart (t149 F3).
    trained = write_script("kernel_settings_train.py", (
        "import sys, torch\n"
        "torch.backends.mkldnn.enabled = sys.argv[1] != 'nomkldnn'\n"
        "torch.manual_seed(0)\n"
        "model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),\n"
        "                            torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),\n"
        "                            torch.nn.Linear(8, 4))\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)\n"
        "x, y = torch.randn(16, 3, 12, 12), torch.randint(0, 4, (16,))\n"
        "for step in range(3):\n"
        "    opt.zero_grad()\n"
        "    torch.nn.functional.cross_entropy(model(x), y).backward()\n"
        "    opt.step()\n"))
    ta, _ = record("kernel_settings_train_a", ["base"], trained)
    tb, _ = record("kernel_settings_train_b", ["nomkldnn"], trained)
    rc, r = diff(ta, tb)
    growth = (r.get("first_divergence") or {}).get("growth") or {}
    check(rc == 1 and growth.get("max_distance") is not None and growth["max_distance"] < 1e-3,
          f"rounding noise is no large distance (got {growth.get('max_distance')})")
    mkl, _ = record("kernel_settings_nomkldnn", ["nomkldnn"], script)
    rc, r = diff(base, mkl)
    d = r.get("first_divergence") or {}
    detail = d.get("detail", "")
    check(rc == 1 and (d.get("a") or {}).get("op") in ("aten::convolution", "aten::_convolution",
                                                       "aten::mkldnn_convolution")
          and "mkldnn_enabled (A 1, B 0)" in detail and "cudnn" not in detail
          and "not hashed" not in detail,  # the bias of None brings nothing in
          f"mkldnn is named, cuDNN's flags are not (got {(d.get('a') or {}).get('op')}: {detail})")


def case_int_values():
    # Integer tensors (token ids, counts) that differ in value only: said so, not called a
    # change of shape or dtype, which no op has.
    script = write_script("int_values.py", (
        "import sys, torch\n"
        "v = int(sys.argv[1])\n"
        "x = torch.arange(6, dtype=torch.int64) * v\n"
        "y = x + 3\n"
        "z = (y * 2) > 7\n"
        "print(z.tolist())\n"))
    a, _ = record("int_values_a", ["1"], script)
    b, _ = record("int_values_b", ["2"], script)
    rc, r = diff(a, b)
    d = r.get("first_divergence") or {}
    check(rc == 1 and d.get("cause") == "arguments" and (d.get("a") or {}).get("op") == "aten::mul",
          f"the changed multiplier is the first divergence (got {d.get('cause')} at {(d.get('a') or {}).get('op')})")
    text = diff_text(a, b)
    check("shape or dtype" not in text, "no 'shape or dtype' where only values differ")
    check("integer or bool values" in text, "the growth says integer or bool values differ")


def case_loader():
    # A differently shuffled DataLoader: the sampler draws the permutation from its generator,
    # so the first difference is a random op whose generator state differs: `rng`.
    a, b, _, _ = pair("loader", ["--loader-seed", "1"], ["--loader-seed", "2"])
    rc, r = diff(a, b)
    d = r["first_divergence"]
    expect_value(d, "rng", "loader", ["loader", "batch"])
    check(d and d["a"]["random"], "the op is a random op")


def case_workers():
    # Two identical runs fed by two DataLoader worker processes: the workers start together
    # and their batches arrive in either order. Workers must pair by worker id, and the ops
    # that rebuild a received batch (run whenever it arrives) must not make a divergence.
    a, b, out_a, out_b = pair("workers", ["--loader-seed", "1", "--workers", "2"],
                              ["--loader-seed", "1", "--workers", "2"])
    check(out_a == out_b, "the two runs print the same losses")
    rc, r = diff(a, b)
    check(rc == 0 and r["status"] == "identical",
          f"identical, exit 0 (got {rc}: {r.get('first_divergence') and r['first_divergence'].get('cause')})")
    check(r["processes"]["a"] == 3 and r["processes"]["b"] == 3, "the main process and two workers")
    # Against a run without workers: the text says the process counts differ.
    c0, _ = record("workers_none", ["--loader-seed", "1"])
    p = subprocess.run([TDBG, "diff", a, c0], stdout=subprocess.PIPE, text=True)
    check("note:" in p.stdout and "A has 3 recorded process(es), B has 1" in p.stdout,
          f"the different process counts are noted (got {p.stdout[-300:]!r})")
    # A changed value in the data still shows, where the batch holding it is first used.
    c, _ = record("workers_poke", ["--loader-seed", "1", "--workers", "2", "--poke", "7.5"])
    rc, r = diff(a, c)
    check(rc == 1, f"a changed data value diverges (got {rc})")


POOL_STEPS = r'''
import sys, torch
from concurrent.futures import ThreadPoolExecutor
plant = int(sys.argv[1])
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 8)
def task(step, k):
    t = torch.full((8, 8), float(k + step)) / 10.0  # the same work at other steps (k + step)
    if step == plant and k == 1:
        t = t + 1e-3  # MARK:plant
    return (t @ t).sum()
pool = ThreadPoolExecutor(4)
for step in range(12):
    aux = sum(f.result().item() for f in [pool.submit(task, step, k) for k in range(4)])
    opt.zero_grad()
    (model(x).pow(2).mean() + 0 * aux).backward()
    opt.step()
print("done")
'''


def case_pool_steps():
    # A thread pool's tasks repeat the same work at other steps (task k at step s does what
    # task k+1 does at s-1): the task that differs is found at its step, not as the last
    # repeat of its work, on whichever thread ran it (t143 F2: another op, line and step).
    script = write_script("pool_steps.py", POOL_STEPS)
    a, b, _, _ = pair("pool_steps", ["-1"], ["6"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    line, file = line_of(d.get("b"))
    check(rc == 1 and d.get("kind") == "structure" and (d.get("b") or {}).get("op") == "aten::add"
          and line == marks(script)["plant"] and (d.get("b") or {}).get("step") == 6,
          f"the add inserted at step 6, line {marks(script)['plant']} (got {d.get('kind')}, "
          f"{(d.get('b') or {}).get('op')} at {file}:{line}, step {(d.get('b') or {}).get('step')})")


POOL_UNEVEN = r'''
import sys, torch
from concurrent.futures import ThreadPoolExecutor
torch.set_num_threads(1)
torch.manual_seed(0)
plant = int(sys.argv[1])
scale = len(sys.argv) > 2  # "scale THREADS TASKS": every task scales, one by another factor
threads, tasks = (int(sys.argv[3]), int(sys.argv[4])) if scale else (3, 4)
base = torch.linspace(-1, 1, 64)
W = torch.nn.Parameter(torch.randn(64, 8) * 0.1)
opt = torch.optim.SGD([W], lr=0.05)
pool = ThreadPoolExecutor(max_workers=threads)  # 3 threads, 4 tasks: one runs two, by chance
def task(k, s):
    h = torch.tanh(torch.sin(base * (s + k + 1) * 0.1) * 2.0)  # task k at s = task k+1 at s-1
    if scale:
        h = h * (0.5 if s == plant and k == 2 else 1.0)  # MARK:scale
    elif s == plant and k == 2:
        h = h * 1.01  # MARK:plant
    return h.reshape(1, 64)
for s in range(6):
    X = torch.cat(list(pool.map(lambda k: task(k, s), range(tasks))), 0)
    loss = (X @ W).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print("loss", loss.item())
'''


def case_pool_uneven():
    # Three threads take four tasks a step: which thread runs two, and which runs the last
    # task, is chance, so neither a thread's rest of a step nor its end pairs with the other
    # run's thread. The op inserted in one task is named, whichever threads ran it (t144 F1: in
    # about half the recordings "5 op(s) of A removed" or "22 op(s) inserted").
    script = write_script("pool_uneven.py", POOL_UNEVEN)
    for n in range(4):
        a, b, _, _ = pair(f"pool_uneven{n}", ["-1"], ["3"], script)
        rc, r = diff(a, b)
        d = r["first_divergence"] or {}
        line, file = line_of(d.get("b"))
        changes = d.get("structural_changes") or [{}]
        shape = [(c.get("type"), len(c.get("inserted", [])), len(c.get("removed", [])))
                 for c in changes]
        check(rc == 1 and d.get("kind") == "structure" and shape == [("inserted", 1, 0)]
              and (d.get("b") or {}).get("op") == "aten::mul"
              and line == marks(script)["plant"] and (d.get("b") or {}).get("step") == 3
              and "growth" not in d,
              f"recording {n}: the one mul inserted at step 3, line {marks(script)['plant']}, no "
              f"growth along the threads (got {d.get('kind')}, changes {shape}, "
              f"{(d.get('b') or {}).get('op')} at {file}:{line}, step "
              f"{(d.get('b') or {}).get('step')}, growth {'growth' in d})")
    # One task's features scaled by another factor (2 threads, 5 tasks): its output goes on
    # in the main thread (the batch, the loss, the updates), so the results differ; nothing
    # said along the pair of pool threads speaks for that (t146 F1: in some recordings "it
    # reaches no other op's output (work, not results)", --results exit 0).
    for n in range(3):
        a, b, _, _ = pair(f"pool_scale{n}", ["-1", "scale", "2", "5"], ["3", "scale", "2", "5"], script)
        rc, r = diff(a, b, "--results")
        d = r["first_divergence"] or {}
        line, file = line_of(d.get("a"))
        check(rc == 1 and r.get("results") == "differ" and d.get("cause") == "arguments"
              and line == marks(script)["scale"] and "contained" not in d,
              f"recording {n}: the scaled task at line {marks(script)['scale']}, results differ (got "
              f"{rc}, {r.get('results')}, {d.get('cause')} at {file}:{line}, contained {'contained' in d})")


WORKER_SEEDS = """\
import sys, torch
from torch.utils.data import DataLoader, Dataset
class Noisy(Dataset):
    def __init__(self):
        self.x = torch.randn(32, 8, generator=torch.Generator().manual_seed(7))
    def __len__(self):
        return 32
    def __getitem__(self, i):
        return self.x[i] + 0.05 * torch.randn(8)  # MARK:noise
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
for x in DataLoader(Noisy(), batch_size=8, num_workers=int(sys.argv[1])):
    model(x).sum().backward()
print("done")
"""


def case_worker_seeds():
    # 2 workers against 3: the noise of the first item differs because another worker, seeded
    # base_seed + its id by DataLoader, draws it; the seeds are not "torch's own" (t142 F4).
    script = write_script("worker_seeds.py", WORKER_SEEDS)
    a, b, _, _ = pair("worker_seeds", ["2"], ["3"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("cause") == "rng"
          and "DataLoader seeds each worker with base_seed + its id" in d.get("detail", "")
          and "torch's own random seed" not in d.get("detail", ""),
          f"the workers' seeds named as DataLoader's (got {d.get('cause')}: {d.get('detail')})")


WORKER_SAMPLER = """\
import random, sys, numpy as np, torch
from torch.utils.data import DataLoader, Dataset, Sampler
random.seed(int(sys.argv[1]))
np.random.seed(0)
torch.manual_seed(0)
class Table(Dataset):
    def __init__(self):
        self.x = torch.randn(64, 8)  # made before the workers fork
    def __len__(self):
        return 64
    def __getitem__(self, i):
        x = self.x[i]  # MARK:item
        noise = torch.from_numpy(np.random.normal(0, 0.01, size=8).astype(np.float32))
        return x + noise
class Shuffled(Sampler):
    # Shuffles with Python's random module, not torch.
    def __init__(self):
        pass
    def __iter__(self):
        order = list(range(64))
        random.shuffle(order)
        return iter(order)
    def __len__(self):
        return 64
model = torch.nn.Linear(8, 1)
for x in DataLoader(Table(), batch_size=8, sampler=Shuffled(), num_workers=2):
    model(x).sum().backward()
print("done")
"""


def case_worker_sampler():
    # A sampler seeded differently, with DataLoader workers: each worker takes another item,
    # `self.x[i]` of a tensor made before the fork, and adds the same NumPy noise (each worker
    # holds a copy of the parent's NumPy generator). The first difference is the indexing, at
    # its argument, not the sum that reads it as data from outside torch.
    script = write_script("worker_sampler.py", WORKER_SAMPLER)
    a, _ = record("worker_sampler_a", ["1"], script)
    b, _ = record("worker_sampler_b", ["2"], script)
    rc, r = diff(a, b)
    d = r.get("first_divergence") or {}
    check(rc == 1 and d.get("cause") == "arguments",
          f"cause arguments (got {d.get('cause')}: {d.get('detail')})")
    line, file = line_of(d.get("a"))
    item = marks(script)["item"]
    check(file == "worker_sampler.py" and line == item,
          f"at worker_sampler.py:{item} (got {file}:{line})")
    check((d.get("argument") or {}).get("name") == "index",
          f"the index differs (got {d.get('argument')})")


WORKER_EPOCHS = """\
import sys, torch
from torch.utils.data import DataLoader, Dataset
workers, epochs, augment = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "augment"
persistent, bad_seed = "persistent" in sys.argv[4:], "bad_seed" in sys.argv[4:]
# A collate_fn of the user's: its batch is made outside shared memory, which the worker's
# queue feeder thread then moves there.
collate = (lambda items: (torch.stack([x for x, _ in items]), torch.stack([y for _, y in items]))) \
    if "collate" in sys.argv[4:] else None
class Data(Dataset):
    def __len__(self):
        return 32
    def __getitem__(self, i):
        x = torch.arange(4, dtype=torch.float32) * (i + 1) / 32
        if augment:
            x = x + 0.1 * torch.randn(4)  # MARK:augment
        return x, x.sum(0, keepdim=True)
class Stream(torch.utils.data.IterableDataset):
    # Each worker yields its own share of the items.
    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        n, k = (info.num_workers, info.id) if info else (1, 0)
        for i in range(k, 32, n):
            x = torch.arange(4, dtype=torch.float32) * (i + 1) / 32
            yield x, x.sum(0, keepdim=True)
def init(worker):
    if bad_seed and worker == 1:
        torch.manual_seed(999)
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Stream() if "iterable" in sys.argv[4:] else Data(), batch_size=8,
                    num_workers=workers, worker_init_fn=init,
                    persistent_workers=persistent, collate_fn=collate)
for epoch in range(epochs):
    for x, y in loader:
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
print(f"{loss.item():.6f}")
"""


def case_worker_epochs():
    # A DataLoader starts its workers anew each epoch (unless persistent_workers): the workers
    # pair by worker id and epoch, and those of a run with more workers per epoch, or more
    # epochs, are compared as one set with the other run's.
    script = write_script("worker_epochs.py", WORKER_EPOCHS)
    augment_line = marks(script)["augment"]
    a, out_a = record("worker_epochs_a", ["2", "2", "plain"], script)
    # Another number of workers: the batches are split otherwise, the main process gets the
    # same ones: identical, and a note says how the workers compare.
    b, out_b = record("worker_epochs_3", ["3", "2", "plain"], script)
    check(out_a == out_b, "2 or 3 workers: the same loss")
    rc, r = diff(a, b)
    check(rc == 0 and r["status"] == "identical",
          f"2 against 3 workers, no random op in the data: identical (got {rc}: "
          f"{(r.get('first_divergence') or {}).get('detail')})")
    notes = " ".join(r.get("notes", []))
    check("compared as one set, they ran the same" in notes and "num_workers is 2 in A and 3 in B" in notes
          and "not compared" not in notes, f"the note says the worker sets ran the same ops: {notes}")
    # No worker at all: the main process loads the batches itself; a note says so, and names
    # the other run's processes left out as its DataLoader workers.
    c, _ = record("worker_epochs_0", ["0", "2", "plain"], script)
    rc, r = diff(c, a)
    notes = " ".join(r.get("notes", []))
    warnings = " ".join(r.get("warnings", []))
    # (A warning: it explains the divergence, and is printed under the headline.)
    check(rc == 1 and "A loads its DataLoader's batches in its main process (num_workers 0), B in "
          "worker processes (num_workers 2, 4 recorded)" in warnings and "(DataLoader worker 0/2, pid" in notes,
          f"0 against 2 workers: a warning says where each run loads its batches: {warnings} / {notes}")
    # A collate_fn of the user's: each worker has a thread the other run's workers do not (the
    # queue's feeder, moving the batch into shared memory), said to change no value.
    c, out_c = record("worker_epochs_collate", ["2", "2", "plain", "collate"], script)
    check(out_c == out_a, "a collate_fn of the user's: the same loss")
    rc, r = diff(a, c)
    notes = " ".join(r.get("notes", []))
    check("exists only in B: it moves tensors into shared memory to send them to another process" in notes,
          f"the workers' feeder threads are explained: {notes}")
    # An IterableDataset split by get_worker_info(): another worker count puts other items in
    # each batch; the note says so (no augmentation to blame).
    c, _ = record("worker_epochs_it2", ["2", "1", "plain", "iterable"], script)
    e, _ = record("worker_epochs_it3", ["3", "1", "plain", "iterable"], script)
    rc, r = diff(c, e)
    notes = " ".join(r.get("notes", []))
    check(rc == 1 and "each worker of an IterableDataset yields its own share of the items" in notes
          and "augmentation" not in notes, f"an IterableDataset's shards: {notes}")
    # One more epoch: the main process goes on where the other ended; the workers of the
    # first two epochs pair with their own epoch's (not with the next epoch's).
    c, _ = record("worker_epochs_more", ["2", "3", "plain"], script)
    rc, r = diff(a, c)
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("kind") == "structure" and d.get("process") == 0 and
          (d.get("b") or {}).get("step") == 8,
          f"one more epoch: B's ops inserted in the main process at step 8 (got "
          f"{d.get('process')}: {d.get('detail')}, step {(d.get('b') or {}).get('step')})")
    # A random augmentation: with another number of workers each batch draws from another
    # worker's generator: a divergence in a worker, and the note says why.
    a, _ = record("worker_epochs_aug", ["2", "2", "augment"], script)
    b, _ = record("worker_epochs_aug3", ["3", "2", "augment"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    # Whichever batches the workers took first, A's item is compared with B's same item (not
    # with another item that got the same draw), and its random op is named.
    check(rc == 1 and d.get("cause") == "rng" and (d.get("process_a") or {}).get("worker")
          and line_of(d.get("a"))[0] == augment_line,
          f"2 against 3 workers with augmentation: a worker, at the augmentation "
          f"(got {d.get('cause')} in {d.get('process_a')} at {line_of(d.get('a'))})")
    notes = " ".join(r.get("notes", []))
    check("num_workers is 2 in A and 3 in B: batches go to the workers in turn" in notes,
          f"the note explains the worker count: {notes}")
    # The process numbers printed are those `tdbg show --process` takes, though the diff paired
    # the processes in another order.
    for side, run in (("process_a", a), ("process_b", b)):
        info = d.get(side) or {}
        m = re.match(r"process (\d+) of", info.get("text", ""))
        shown = subprocess.run([TDBG, "show", run, "--process", m.group(1) if m else "0", "--limit", "0"],
                               stdout=subprocess.PIPE, text=True).stdout
        check(m is not None and f"-{info.get('pid')}.sqlite" in shown.split("\n")[0]
              and f"(DataLoader worker {info.get('worker')}" in shown.split("\n")[0],
              f"{side}: '{info.get('text')}' is what show --process {m and m.group(1)} shows "
              f"(process_json's words, which add a worker's rank): {shown[:160]!r}")
    # Persistent workers with worker 1 seeded otherwise, against workers started each epoch:
    # worker 1's first random op, in the first epoch.
    b, _ = record("worker_epochs_bad", ["2", "2", "augment", "persistent", "bad_seed"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    worker = (d.get("process_a") or {}).get("worker")
    check(rc == 1 and d.get("cause") == "rng" and worker == "1/2" and
          line_of(d.get("a"))[0] == augment_line and (d.get("a") or {}).get("seq", 99) < 20,
          f"persistent worker 1 seeded otherwise: rng at worker 1's first augmentation "
          f"(got {d.get('cause')} in worker {worker} at {line_of(d.get('a'))}, seq "
          f"{(d.get('a') or {}).get('seq')})")
    # The bundle's README says where as diff does: in which worker, not "at step 0".
    bundle = os.path.join(WORK, "worker_epochs_bad.tar.gz")
    subprocess.run([TDBG, "bundle", "-o", bundle, a, b], check=True, stdout=subprocess.DEVNULL)
    with tarfile.open(bundle) as t:
        readme = next(t.extractfile(m).read().decode() for m in t.getmembers() if m.name.endswith("README.md"))
    check(f"in DataLoader worker {worker}" in readme, f"the README names the worker: {readme[:400]!r}")


# Padded token batches from a collate_fn, in 2 DataLoader workers or (argv[1] "0") in the main
# process; the loader's own generator fixes the order.
LOADER_VALUES = r"""
import sys, torch
from torch.utils.data import DataLoader, Dataset
class Tokens(Dataset):
    def __init__(self, n=48):
        g = torch.Generator().manual_seed(42)
        self.lens = torch.randint(2, 10, (n,), generator=g).tolist()
        self.items = [torch.randint(1, 30, (k,), generator=g) for k in self.lens]
        self.labels = torch.randint(0, 3, (n,), generator=g)
    def __len__(self): return len(self.items)
    def __getitem__(self, i): return self.items[i], self.labels[i]
def pad(batch):
    xs, ys = zip(*batch)
    out = torch.zeros(len(xs), max(len(x) for x in xs), dtype=torch.long)
    for j, x in enumerate(xs):
        out[j, :len(x)] = x
    return out, torch.stack(ys)
torch.manual_seed(0)
emb, head = torch.nn.Embedding(30, 16, padding_idx=0), torch.nn.Linear(16, 3)
opt = torch.optim.SGD(list(emb.parameters()) + list(head.parameters()), lr=0.1)
loader = DataLoader(Tokens(), batch_size=8, shuffle=True, num_workers=int(sys.argv[1]),
                    collate_fn=pad, generator=torch.Generator().manual_seed(0))
for epoch in range(2):
    for x, y in loader:
        m = (x != 0).float().unsqueeze(-1)
        h = (emb(x) * m).sum(1) / m.sum(1).clamp(min=1)
        loss = torch.nn.functional.cross_entropy(head(h), y)
        opt.zero_grad(); loss.backward(); opt.step()
        print(round(loss.item(), 6))
"""


def case_loader_values():
    # The same batches loaded in 2 workers and in the main process: the warning explains the
    # divergence; the dataset's ops that moved between processes leave no pair of "values
    # left" to name (they would pair a loader's bookkeeping op with a batch's stack).
    script = write_script("loader_values.py", LOADER_VALUES)
    a, out_a = record("loader_values_2", ["2"], script)
    b, out_b = record("loader_values_0", ["0"], script)
    check(out_a == out_b, "precondition: the same losses")
    rc, r = diff(a, b)
    warnings = " ".join(r.get("warnings", []))
    check("loads its DataLoader's batches in its main process (num_workers 0)" in warnings,
          f"the warning says where each run loads its batches: {warnings}")
    d = r.get("first_divergence") or {}
    check("values_left_differ" not in d and "the changed ops leave other values" not in diff_text(a, b),
          f"no pair of values left by the moved dataset ops is named: {d.get('values_left_differ')}")


def case_poke():
    a, b, _, _ = pair("poke", [], ["--poke", "7.5"])
    rc, r = diff(a, b)
    d = r["first_divergence"]
    # The NumPy batch enters torch at from_numpy (aten::lift_fresh on torch 1.13) or, where
    # that records no op, at the first layer that reads it.
    expect_value(d, "external_input", "data", ["data", "fc1"])
    t = (d or {}).get("tensor") or {}
    check(t.get("role") == "input" and t.get("producer_a") is None,
          f"an input no recorded op produced (got {t})")
    check(d and d["a"]["step"] == 0, "in step 0 (row 3 is in the first batch)")
    # Recorded with --hash outputs, the NumPy data is not hashed where it enters: still the
    # likeliest cause, not a kernel that computes otherwise.
    a, _ = record("poke_outputs_a", [], options=["--hash", "outputs"])
    b, _ = record("poke_outputs_b", ["--poke", "7.5"], options=["--hash", "outputs"])
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("cause") == "external_input" and "--hash outputs" in d.get("detail", ""),
          f"--hash outputs: external_input (got {d.get('cause')}: {d.get('detail')})")
    # A tensor made from a Python number (`torch.tensor(1.001)`: `empty`, then filled outside
    # torch's ops) is read unhashed: it, not the other input, is what most likely differs.
    a, _ = record("tscale_outputs_a", ["--tensor-scale", "1"], options=["--hash", "outputs"])
    b, _ = record("tscale_outputs_b", ["--tensor-scale", "1.001"], options=["--hash", "outputs"])
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    expect_value(d, "external_input", "tscale")
    detail = d.get("detail", "")
    check("input 1 was not hashed (--hash outputs)" in detail and ".numpy()" not in detail,
          f"--hash outputs, torch.tensor(): input 1 named, not a .numpy() write (got {detail})")


def case_extra_op():
    a, b, _, _ = pair("extra_op", [], ["--extra-op"])
    rc, r = diff(a, b)
    d = r["first_divergence"]
    check(d is not None and d["kind"] == "structure", "a structural divergence")
    if d is None:
        return
    check(d["cause"] == "structure", "cause structure")
    check(d["a"] is None, "A has no such op (an insertion)")
    line, file = line_of(d["b"])
    check(d["b"] and d["b"]["op"] == "aten::mul", f"B's op is aten::mul (got {d['b'] and d['b']['op']})")
    check(file == "train.py" and line == MARK["extra"], f"at train.py:{MARK['extra']} (got {file}:{line})")
    check(d["structural_changes"] and d["structural_changes"][0]["type"] == "inserted",
          "the first change is an insertion")
    check(d.get("value_after_structure") is not None, "values are compared again after it")


EXTRA_DRAW = r'''
import sys, torch
torch.manual_seed(0)
w = torch.nn.Linear(4, 1)
if len(sys.argv) > 1:
    torch.empty(3).normal_()  # one random draw in B only (a layer's own init, spectral_norm's u)
x = torch.randn(8, 4)
print(w(x).sum().item())
'''


def case_extra_draw():
    # A random draw inserted in B shifts the default generator: the first value difference
    # after it is randn's nested normal_, drawn from another generator state, not data from
    # outside torch.
    script = write_script("extra_draw.py", EXTRA_DRAW)
    a, b, _, _ = pair("extra_draw", [], ["extra"], script)
    rc, r = diff(a, b)
    v = (r["first_divergence"] or {}).get("value_after_structure") or {}
    check(rc == 1 and v.get("cause") == "rng" and (v.get("a") or {}).get("op") == "aten::normal_",
          f"the shifted generator is the cause (got {v.get('cause')}: {(v.get('a') or {}).get('op')})")


# A script that reads its learning rate from the folder it is run in.
RELATIVE_SCRIPT = r'''
import torch
torch.manual_seed(0)
lr = float(open("lr.txt").read())
w = torch.ones(3, requires_grad=True)
opt = torch.optim.SGD([w], lr=lr)
(w * 2).sum().backward()
opt.step()
'''


def case_relative_script():
    # The same script run as ../script.py from two folders: one file in both runs' stacks
    # (Python names it folder/../script.py), not "the same line of another file".
    write_script("relative_script.py", RELATIVE_SCRIPT)
    runs = []
    for folder, lr in (("relative_a", "0.1"), ("relative_b", "0.2")):
        cwd = os.path.join(WORK, folder)
        os.makedirs(cwd, exist_ok=True)
        with open(os.path.join(cwd, "lr.txt"), "w") as f:
            f.write(lr)
        run = os.path.join(WORK, folder + "_run")
        shutil.rmtree(run, ignore_errors=True)
        subprocess.run([TDBG, "record", "-q", "-o", run, "--", PYTHON, "../relative_script.py"],
                       cwd=cwd, check=True, stdout=subprocess.DEVNULL)
        runs.append(run)
    rc, r = diff(*runs)
    d = r["first_divergence"] or {}
    files = {((d.get(side) or {}).get("source") or {}).get("file") for side in ("a", "b")}
    check(rc == 1 and files == {os.path.join(WORK, "relative_script.py")},
          f"one file, without its folder/.. (got {files})")
    check("another file" not in diff_text(*runs), "and not said to be another file")


DEFAULT_DTYPE = r'''
import sys, torch
if len(sys.argv) > 1:
    torch.set_default_dtype(torch.float64)  # as a helper module imported in one run may
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
x = torch.ones(2, 4)
print(model(x).sum().item())
'''


def case_default_dtype():
    # Tensors made without a dtype are float64 in B: the default dtype is named, and the
    # settings line shows it.
    script = write_script("default_dtype.py", DEFAULT_DTYPE)
    a, b, _, _ = pair("default_dtype", [], ["float64"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and "the default dtype is float32 in A and float64 in B" in d.get("detail", ""),
          f"the default dtype is the cause (got {d.get('detail')})")
    settings = {s["key"]: (s["a"], s["b"]) for s in r.get("settings") or []}
    check(settings.get("default_dtype") == ("float32", "float64"),
          f"and a setting that differs (got {settings})")
    # Trained: each step's ops are float64 replacements of float32 ones but a few paired ones
    # (the labels' ops); the growth rows say so, not "no output among them" (t149 F6).
    trained = write_script("default_dtype_train.py", r'''
import sys, torch
if len(sys.argv) > 1:
    torch.set_default_dtype(torch.float64)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    x, y = torch.randn(6, 4), torch.randint(0, 3, (6,))
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
''')
    a, b, _, _ = pair("default_dtype_train", [], ["float64"], trained)
    growth = [l for l in diff_text(a, b).splitlines() if "ops differ" in l]
    check(growth and not any("no output among them" in l for l in growth)
          and any("in structural changes" in l for l in growth),
          f"the growth rows name the structural changes: {growth}")


# Four batches of NumPy data, taken in order, or (with an argument) in another order, as a file
# list from os.listdir or a set gives.
DATA_ORDER = r'''
import sys, numpy, torch
torch.manual_seed(0)
batches = [numpy.full((4, 3), float(k), dtype=numpy.float32) + numpy.arange(3, dtype=numpy.float32)
           for k in range(4)]
order = [2, 0, 3, 1] if len(sys.argv) > 1 else [0, 1, 2, 3]
model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for k in order:
    x = torch.from_numpy(batches[k])
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()
'''


NUMPY_UNSEEDED = r'''
import numpy, torch
torch.manual_seed(0)  # torch seeded, NumPy not
model = torch.nn.Linear(3, 1)
x = torch.from_numpy(numpy.random.normal(size=(4, 3)).astype(numpy.float32))
model(x).sum().backward()
'''


def case_numpy_unseeded():
    # NumPy noise drawn unseeded while torch is seeded alike: the external input is said to
    # be what an unseeded Python or NumPy generator may have drawn.
    script = write_script("numpy_unseeded.py", NUMPY_UNSEEDED)
    a, b, _, _ = pair("numpy_unseeded", [], [], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("cause") == "external_input" and
          "torch's seed is the same in both runs (0): where Python's random or NumPy draws" in d.get("detail", ""),
          f"the unrecorded generators are named (got {d.get('cause')}: {d.get('detail')})")


DATA_FILE = r'''
import sys, numpy, torch
torch.manual_seed(0)
data = torch.from_numpy(numpy.load(sys.argv[1]))
model = torch.nn.Linear(3, 1)
model(data).sum().backward()
'''


def case_data_file():
    # The data file the program reads, edited between the runs: named as a setting that
    # differs and as where the external input most likely comes from.
    script = write_script("data_file.py", DATA_FILE)
    path = os.path.join(WORK, "data_file.npy")
    # (Through the torch Python, which has NumPy: the one running this may not.)
    subprocess.run([PYTHON, "-c", f"import numpy; numpy.save({path!r}, numpy.ones((4, 3), dtype=numpy.float32))"],
                   check=True)
    a, _ = record("data_file_a", [path], script)
    subprocess.run([PYTHON, "-c", f"import numpy; d = numpy.load({path!r}); d[2, 1] = 5; numpy.save({path!r}, d)"],
                   check=True)
    b, _ = record("data_file_b", [path], script)
    rc, r = diff(a, b)
    settings = {s["key"]: s for s in r.get("settings") or []}
    check(("file " + path) in settings and "another version of the file" in settings["file " + path].get("note", "")
          and settings["file " + path].get("contents_differ") is True,
          f"the file is a setting that differs (got {list(settings)})")
    check(not any(k.startswith("file ") and k.endswith(".py") for k in settings),
          "the program's own modules are not data files")
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("cause") == "external_input" and
          f"{path}, which both runs read, is another version in each (its contents differ)" in d.get("detail", ""),
          f"and the likely source of the external input (got {d.get('detail')})")
    # Another file in each run (a path from an argument): both named (t149 F4).
    other = os.path.join(WORK, "data_file_other.npy")
    subprocess.run([PYTHON, "-c", f"import numpy; numpy.save({other!r}, numpy.zeros((4, 3), dtype=numpy.float32))"],
                   check=True)
    o, _ = record("data_file_o", [other], script)
    rc, r = diff(b, o)
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("cause") == "external_input"
          and f"A read {path} and B read {other}, each a file the other run did not read" in d.get("detail", ""),
          f"each run's own file is named (got {d.get('detail')})")
    # Files named alike but for a number (each run's checkpoint named by its process id):
    # said to be each run's own, not "most likely" the source (t150 F4).
    pid_a = os.path.join(WORK, "ckpt_1234.npy")
    pid_b = os.path.join(WORK, "ckpt_98.npy")
    subprocess.run([PYTHON, "-c", f"import numpy; numpy.save({pid_a!r}, numpy.ones((4, 3), dtype=numpy.float32))"],
                   check=True)
    subprocess.run([PYTHON, "-c", f"import numpy; numpy.save({pid_b!r}, numpy.zeros((4, 3), dtype=numpy.float32))"],
                   check=True)
    ka, kb, _, _ = pair("data_file_pid", [pid_a], [pid_b], script)
    rc, r = diff(ka, kb)
    d = r["first_divergence"] or {}
    check(rc == 1 and "files named alike but for a number" in d.get("detail", "")
          and "most likely" not in d.get("detail", ""),
          f"each run's own file by its number (got {d.get('detail')})")
    # Saved again with the same bytes (a newer modification time): the same file.
    os.utime(path)
    c, _ = record("data_file_c", [path], script)
    rc, r = diff(b, c)
    check(rc == 0 and not any(s["key"].startswith("file ") for s in r.get("settings") or []),
          f"a file touched, not changed, is no difference (got {rc}, {r.get('settings')})")
    # Recorded without values: "identical" in ops, and the next step names the file.
    ha, _ = record("data_file_ha", [path], script, options=("--hash", "none"))
    subprocess.run([PYTHON, "-c", f"import numpy; numpy.save({path!r}, numpy.ones((4, 3), dtype=numpy.float32))"],
                   check=True)
    hb, _ = record("data_file_hb", [path], script, options=("--hash", "none"))
    text = diff_text(ha, hb)
    check(f"the values were not compared (and {path}, which both runs read, has other contents in each"
          in text, f"the first pass names the file: {text!r}")


SEED_AFTER_MODEL = r'''
import sys, torch
if len(sys.argv) == 1:
    torch.manual_seed(0)
model = torch.nn.Linear(4, 2)  # in B, initialized before the program seeds
torch.manual_seed(0)
print(model(torch.randn(3, 4)).sum().item())
'''


def case_seed_after_model():
    # B seeds after building its model: the init drew with torch's own random seed, which the
    # rng cause names, with the seed B sets later.
    script = write_script("seed_after_model.py", SEED_AFTER_MODEL)
    a, b, _, _ = pair("seed_after_model", [], ["late"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("cause") == "rng" and
          "B's is torch's own random seed: no torch.manual_seed before this op, which B calls later "
          "(seed 0 from op" in d.get("detail", ""),
          f"the seed set after the model is named (got {d.get('cause')}: {d.get('detail')})")


CACHE_HIT = r'''
import os, sys, torch
torch.manual_seed(0)
cache = sys.argv[1]
if os.path.exists(cache):
    x, y = torch.load(cache)  # a cache hit: the data as the first run made it
else:
    x = torch.arange(24, dtype=torch.float64).reshape(6, 4).sin().float()
    y = x.sum(1, keepdim=True)
    torch.save((x, y), cache)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(3):
    opt.zero_grad()
    (model(x) - y).pow(2).mean().backward()
    opt.step()
print(model.weight.sum().item())
'''


def case_cache_hit():
    # The data made in one run and loaded from the cache it saved in the other: another code
    # path, the same results (torch.load's empty placeholders hold no values that differ).
    script = write_script("cache_hit.py", CACHE_HIT)
    cache = os.path.join(WORK, "cache_hit.pt")
    if os.path.exists(cache):
        os.remove(cache)
    a, b, out_a, out_b = pair("cache_hit", [cache], [cache], script)
    check(out_a == out_b, f"precondition: the same results ({out_a!r}, {out_b!r})")
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("kind") == "structure" and r.get("results") == "same" and
          d.get("values_left_differ") is None,
          f"work, not results (got {r.get('results')}, {d.get('values_left_differ')})")


PERSISTENT_WORKERS = r'''
import sys, torch
torch.manual_seed(0)
data = torch.utils.data.TensorDataset(torch.arange(8.).reshape(8, 1))
loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True, num_workers=1,
                                     persistent_workers=len(sys.argv) > 1)
total = 0.0
for epoch in range(2):
    for (x,) in loader:
        total += x.sum().item()
print(total)
'''


def case_persistent_workers():
    # persistent_workers in B only: A's second epoch draws a new base seed, B's does not; the
    # removed draw is named.
    script = write_script("persistent_workers.py", PERSISTENT_WORKERS)
    a, b, _, _ = pair("persistent_workers", [], ["persistent"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and "the DataLoader's draw of a base seed for a new iterator over it" in d.get("detail", ""),
          f"the base-seed draw is named (got {d.get('detail')})")


def case_phases_swapped():
    # Two models' training steps in the other order (a GAN's D step, then G's, against G's
    # first): the runs part where each reaches the other's code (A indexes the data for its D
    # step, B runs G's), which each runs further on; the module roots, both nn.Sequential,
    # are told apart.
    script = write_script("phases_swapped.py", PHASES_SWAPPED)
    mark = marks(script)
    a, b, _, _ = pair("phases_swapped", ["DG"], ["GD"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    order = d.get("other_order") or {}
    check(rc == 1 and (order.get("a") or {}).get("source", "").startswith(f"phases_swapped.py:{mark['g']} in g_step")
          and (order.get("b") or {}).get("source", "") == f"phases_swapped.py:{mark['call']} in <module>",
          f"each run reaches the other's line further on (got {order}, {d.get('detail')})")
    check("the same code in another order" in diff_text(a, b), "and says so")
    p = subprocess.run([TDBG, "show", a], stdout=subprocess.PIPE, text=True)
    modules = {m for m in re.findall(r"\s(Sequential\S*)\s", p.stdout)}
    check(modules == {"Sequential(G).0", "Sequential(G).1", "Sequential(G).2", "Sequential(D).0",
                      "Sequential(D).1", "Sequential(D).2"},
          f"two roots of one class are named by their variables (got {sorted(modules)})")
    # D's step without .detach() (B): G's gradient takes D's loss too, and G's first update,
    # counted as step 1, differs; step 1 begins in the loop's first iteration, said where the
    # updates are (t145 F3).
    script = write_script("gan_leak.py", GAN_LEAK)
    a, b, _, _ = pair("gan_leak", ["detach"], ["leak"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    beyond = (d.get("updates") or {}).get("beyond") or {}
    check(rc == 1 and d.get("kind") == "structure" and beyond.get("step") == 1
          and beyond.get("first_iteration") is True
          and "from step 1 (which begins in the loop's first iteration)" in diff_text(a, b).splitlines()[0],
          f"G's first update, step 1, is said to be in the first iteration (got {d.get('kind')}, {beyond})")
    # G's step first: the change in D's step of the loop's first iteration counts as step 1,
    # said under the structural change's A:/B: lines (t146 F3).
    a, b, _, _ = pair("gan_leak_gd", ["detach", "GD"], ["leak", "GD"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    text = diff_text(a, b)
    check(rc == 1 and d.get("kind") == "structure" and (d.get("a") or {}).get("step") == 1
          and d.get("first_iteration") is True
          and "step:     step 1 here is still the training loop's first iteration" in text,
          f"D's change at step 1 is said to be in the first iteration (got {d.get('kind')}, "
          f"{(d.get('a') or {}).get('step')}, {d.get('first_iteration')})")


GAN_LEAK = r'''
import sys, torch
torch.manual_seed(0)
G = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 6))
D = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt_g = torch.optim.SGD(G.parameters(), lr=0.1)
opt_d = torch.optim.SGD(D.parameters(), lr=0.1)
order = sys.argv[2] if len(sys.argv) > 2 else "DG"
for step in range(3):
    opt_d.zero_grad(); opt_g.zero_grad()
    z = torch.randn(8, 4)
    fake = G(z)
    def d_step():
        fk = G(z)
        d_in = fk if sys.argv[1] == "leak" else fk.detach()  # MARK:leak
        (100 * D(d_in).pow(2).mean()).backward(retain_graph=True)
        opt_d.step()
    def g_step():
        (-D(fake).mean()).backward()
        opt_g.step()
    if order == "DG":
        d_step(); g_step()
    else:
        g_step(); opt_d.zero_grad(); opt_g.zero_grad(); d_step()
'''


PHASES_SWAPPED = r'''
import sys, torch
torch.manual_seed(0)
G = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 6))
D = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt_g = torch.optim.SGD(G.parameters(), lr=0.1)
opt_d = torch.optim.SGD(D.parameters(), lr=0.1)
real = torch.randn(3, 8, 6)

def d_step(real, z):
    loss = D(real).mean() - D(G(z).detach()).mean()  # MARK:d
    opt_d.zero_grad(); loss.backward(); opt_d.step()

def g_step(z):
    loss = -D(G(z)).mean()  # MARK:g
    opt_g.zero_grad(); loss.backward(); opt_g.step()

for step in range(3):
    z = torch.randn(8, 4)
    for phase in ("DG" if sys.argv[1] == "DG" else "GD"):
        d_step(real[step], z) if phase == "D" else g_step(z)  # MARK:call
'''


def case_set_to_none():
    # optimizer.zero_grad(set_to_none=True) in B: A's zero_ ops in zero_grad() are named as
    # that, and the values are the same to the end.
    script = write_script("set_to_none.py", SET_TO_NONE)
    a, b, _, _ = pair("set_to_none", ["0"], ["1"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and "which B does not do: it sets them to None instead, set_to_none=True" in d.get("detail", "")
          and isinstance(d.get("values_same"), dict),
          f"zero_grad's zeroing named, the values the same (got {d.get('detail')})")


SET_TO_NONE = r'''
import sys, torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
for step in range(3):
    opt.zero_grad(set_to_none=sys.argv[1] == "1")
    model(x).pow(2).mean().backward()
    opt.step()
'''


def case_small_changes():
    # The loss summed then divided by the batch size (B) against its mean: bit for bit the
    # same updates, so the results are the same (--results exits 0). Noise added to one batch:
    # its effect on the updates is as small as rounding's taken whole, but noise is a real
    # change, said as one.
    script = write_script("small_changes.py", SMALL_CHANGES)
    a, b, out_a, out_b = pair("small_sum", ["mean"], ["sum"], script)
    check(out_a == out_b, "sum/8 and mean print the same losses")
    rc, r = diff(a, b, "--results")
    d = r["first_divergence"] or {}
    check(rc == 0 and r.get("results") == "same" and d.get("kind") == "value"
          and (d.get("updates") or {}).get("largest") == 0,
          f"the same updates: results same (got {rc}, {r.get('results')}, {d.get('kind')}, {d.get('updates')})")
    check("the optimizer's updates are the same in every step" in diff_text(a, b).splitlines()[0],
          "the headline says the updates are the same")
    # The script copied under another name: the same program, said in a note, not warned as
    # another program (t142 F8); a copy whose text differs is warned.
    copy = os.path.join(os.path.dirname(script), "small_changes_copy.py")
    shutil.copyfile(script, copy)
    c, _ = record("small_copy", ["mean"], copy)
    rc, r = diff(a, c)
    check(not any("different programs" in w for w in r.get("warnings", []))
          and any("hold the same text" in n for n in r.get("notes", [])),
          f"a copy of the script is the same program (got {r.get('warnings')}, {r.get('notes')})")
    with open(copy, "a") as f:
        f.write("# edited\n")
    c, _ = record("small_copy_edited", ["mean"], copy)
    rc, r = diff(a, c)
    check(any("different programs" in w for w in r.get("warnings", [])),
          f"an edited copy is another program (got {r.get('warnings')})")
    b, _ = record("small_noise", ["noise"], script)
    rc, r = diff(a, b, "--results")
    d = r["first_divergence"] or {}
    drawn = (d.get("updates") or {}).get("random_change") or {}
    check(rc == 1 and r.get("results") == "differ" and drawn.get("run") == "B"
          and drawn.get("source", "").endswith(f"small_changes.py:{marks(script)['noise']}")
          and "draws random numbers in the change" in diff_text(a, b).splitlines()[0],
          f"noise named as a real change (got {rc}, {d.get('updates')})")
    # An average of the weights with another decay: the optimizer's updates are the same, but
    # the average the program evaluates and prints differs: the results differ (t145 F2).
    b, _ = record("small_ema", ["ema"], script)
    rc, r = diff(a, b, "--results")
    d = r["first_divergence"] or {}
    check(rc == 1 and r.get("results") == "differ" and (d.get("updates") or {}).get("largest") == 0
          and line_of(d.get("a"))[0] == marks(script)["ema"],
          f"an average of the weights read out differs: results differ (got {rc}, "
          f"{r.get('results')}, {d.get('updates')}, line {line_of(d.get('a'))})")
    # The headline names where the program read the first value that differs (t149 F5).
    headline = diff_text(a, b).splitlines()[0]
    check(f"(first aten::item at small_changes.py:{marks(script)['print']})" in headline,
          f"the read named in the headline: {headline}")
    # A late change of the learning rate with a scan limit that reads one step's updates: no
    # word that the updates are the same in every step (t150 F1: the steps compared were
    # those from the run's start, all before the change).
    late = write_script("late_lr.py", r'''
import sys, torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randn(8, 1)
for step in range(8):
    if step == 5:
        opt.param_groups[0]["lr"] = float(sys.argv[1])
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
''')
    la, lb, _, _ = pair("late_lr", ["0.1"], ["0.2"], late)
    for limit in ("5", "200000"):
        rc, r = diff(la, lb, "--scan-limit", limit)
        d = r.get("first_divergence") or {}
        headline = diff_text(la, lb, "--scan-limit", limit).splitlines()[0]
        check(rc == 1 and d.get("cause") == "arguments" and (d.get("a") or {}).get("step") == 5
              and "updates are the same" not in headline and "updates" not in d,
              f"a late lr change, --scan-limit {limit}: {headline}")
    # Read with .tolist() instead: the same (t151 F1).
    a, _ = record("small_list", ["list"], script)
    b, _ = record("small_ema_list", ["ema_list"], script)
    rc, r = diff(a, b, "--results")
    headline = diff_text(a, b).splitlines()[0]
    check(rc == 1 and r.get("results") == "differ"
          and f"(first .tolist() (aten::resolve_conj) at small_changes.py:{marks(script)['print_list']})" in headline,
          f"a .tolist() read differs: results differ (got {rc}, {headline})")


SMALL_CHANGES = r'''
import sys, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(8, 16), torch.randn(8, 4)
ema = [p.detach().clone() for p in model.parameters()]  # an average of the weights, evaluated
for step in range(4):
    batch = x
    if sys.argv[1] == "noise" and step == 1:
        batch = x + 1e-4 * torch.randn_like(x)  # MARK:noise
    if sys.argv[1] == "sum":
        loss = torch.nn.functional.mse_loss(model(batch), y, reduction="sum") / 32
    else:
        loss = torch.nn.functional.mse_loss(model(batch), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        for e, p in zip(ema, model.parameters()):
            e.lerp_(p, 0.01 if sys.argv[1].startswith("ema") else 0.1)  # MARK:ema
    if sys.argv[1].endswith("list"):  # read with .tolist(), which reads the data without an op
        print(step, loss.item(), ema[0].sum().tolist())  # MARK:print_list
    else:
        print(step, loss.item(), ema[0].sum().item())  # MARK:print
'''


def case_weight_tying():
    # The output layer's weight tied to the embedding's in A only: the op reads a parameter
    # that another module's initialization made, said as tied weights.
    script = write_script("weight_tying.py", WEIGHT_TYING)
    a, b, _, _ = pair("weight_tying", ["1"], ["0"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and "as tied weights do" in d.get("detail", ""),
          f"tied weights named (got {d.get('cause')}: {d.get('detail')})")


WEIGHT_TYING = r'''
import sys, torch
torch.manual_seed(0)
emb, out = torch.nn.Embedding(20, 8), torch.nn.Linear(8, 20, bias=False)
if sys.argv[1] == "1":
    out.weight = emb.weight
tokens = torch.tensor([[1, 4, 7, 2]])
loss = torch.nn.functional.cross_entropy(out(emb(tokens)).view(-1, 20), tokens.view(-1))
loss.backward()
'''


def case_secret_in_label():
    # A key given to the program by `env NAME=value` (so only tdbg record's manifest holds the
    # pair) that the program writes into a recorded string (a record_function label): left out
    # of the report, the view's page and the bundle.
    script = write_script("secret_in_label.py", SECRET_IN_LABEL)
    secret = "envsecretXYZ123456789"
    runs = []
    for name in ("secret_label_a", "secret_label_b"):
        out = os.path.join(WORK, name)
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([TDBG, "record", "-q", "-o", out, "--", "env", "MY_API_KEY=" + secret, PYTHON, script],
                       check=True, stdout=subprocess.PIPE)
        runs.append(out)
    env = {k: v for k, v in os.environ.items() if k != "MY_API_KEY"}
    rep = os.path.join(WORK, "secret_label_report")
    shutil.rmtree(rep, ignore_errors=True)
    subprocess.run([TDBG, "report", *runs, "-o", rep], check=True, stdout=subprocess.PIPE, env=env)
    with open(os.path.join(rep, "index.html")) as f:
        page = f.read()
    bundle = os.path.join(WORK, "secret_label.tar.gz")
    subprocess.run([TDBG, "bundle", *runs, "-o", bundle], check=True, stdout=subprocess.PIPE, env=env)
    import gzip
    with gzip.open(bundle) as f:
        data = f.read()
    check(secret not in page and "[REDACTED]" in page and secret.encode() not in data,
          f"the key is left out of the report ({page.count(secret)}) and the bundle ({data.count(secret.encode())})")


SECRET_IN_LABEL = r'''
import os, torch
with torch.autograd.profiler.record_function("fetch " + os.environ["MY_API_KEY"]):
    print(torch.ones(2).sum().item())
'''


def case_data_order():
    # Data from outside torch that differs at step 0 is A's of step 2 and B's of step 1: said
    # to be the same data in another order.
    script = write_script("data_order.py", DATA_ORDER)
    a, b, _, _ = pair("data_order", [], ["shuffled"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    where = d.get("data_elsewhere") or {}
    check(rc == 1 and d.get("cause") == "external_input" and
          (where.get("b_in_a") or {}).get("step") == 2 and (where.get("a_in_b") or {}).get("step") == 1,
          f"B's first batch is A's of step 2, A's is B's of step 1 (got {d.get('cause')}: {where})")
    check("the same data in another order" in d.get("detail", ""), f"and says so: {d.get('detail')}")


def case_view_copy():
    # The same values reach tanh as a transposed view in A and as a contiguous copy in B: the
    # copy is a structural change (B's extra ops). tanh reads the same values in another
    # layout and makes the same output: no value difference. The first op whose output does
    # differ after the change is a matmul that took the other layout another way, with other
    # rounding: named with cause layout, not "nondeterministic".
    a, b, out_a, out_b = pair("view_copy", ["--transpose", "view"], ["--transpose", "copy"])
    check(out_a == out_b, "precondition: the two runs print the same losses")
    rc, r = diff(a, b)
    d = r["first_divergence"]
    check(d is not None and d["kind"] == "structure", "a structural divergence (B's copy)")
    if d is None:
        return
    line, file = line_of(d["b"])
    check(file == "train.py" and line == MARK["transpose"], f"at train.py:{MARK['transpose']} (got {file}:{line})")
    v = d.get("value_after_structure") or {}
    t = v.get("tensor") or {}
    check(v.get("cause") == "layout", f"then the layout of an input (got {v.get('cause')}: {v.get('detail')})")
    check(v.get("a", {}).get("op") == "aten::mm",
          f"at the matmul whose output differs, not tanh's same output (got {v.get('a', {}).get('op')})")
    check(t.get("role") == "input" and ("strides" in t.get("shape", "")) != ("strides" in t.get("shape_b", "")),
          f"an input strided in one run, contiguous in the other (got {t.get('shape')} / {t.get('shape_b')})")
    # What differs is the output: it is shown, with its summaries, beside the same input.
    out = v.get("output") or {}
    check(out.get("role") == "output" and out.get("hash_a") != out.get("hash_b") and "summary_a" in out,
          f"the differing output beside the input (got {out.get('hash_a')}/{out.get('hash_b')})")
    text = diff_text(a, b)
    check("  output:   output 0 " in text, "the text shows that output")


def case_thread_move():
    # Run B runs the same training loop in a Python thread: the main thread's ops stop where
    # A's go on, and the diff says that the same ops continue on B's other thread, and
    # compares them there (identical here; a changed learning rate in the second pair).
    a, b, out_a, out_b = pair("thread_move", [], ["--in-thread"])
    check(out_a == out_b, "precondition: the two runs print the same losses")
    rc, r = diff(a, b)
    d = r["first_divergence"]
    check(d is not None and d["kind"] == "structure", "a structural divergence")
    if d is None:
        return
    m = d.get("thread_move") or {}
    check(m.get("side") == "A" and m.get("to_thread", 0) >= 1 and m.get("ops_compared", 0) > 100,
          f"A's ops go on in another thread of B, compared there (got {m})")
    check(m.get("first_difference", 0) is None, f"and they match (got {m.get('first_difference')})")
    check("moved to another thread" in d.get("detail", ""), f"the detail says so: {d.get('detail')}")
    c, _ = record("thread_move_lr", ["--in-thread", "--lr", "0.1"])
    rc, r = diff(a, c)
    m = (r["first_divergence"] or {}).get("thread_move") or {}
    first = m.get("first_difference") or {}
    check(first.get("cause") == "arguments" and (first.get("a") or {}).get("op", "").startswith("aten::add"),
          f"the moved ops first differ in the update's argument (got {first.get('cause')} at "
          f"{(first.get('a') or {}).get('op')})")


def case_data_write():
    # Run B scales a weight through `.data`, whose version counter is not the weight's: the
    # next op reading the weight must see new values made by that op (cause structure), not
    # the old hash with an output that differs ("nondeterministic").
    a, b, _, _ = pair("data_write", [], ["--data-write-step", "2"])
    rc, r = diff(a, b)
    d = r["first_divergence"]
    check(d is not None and d["kind"] == "structure", "a structural divergence (B's extra op)")
    if d is None:
        return
    line, file = line_of(d["b"])
    check(file == "train.py" and line == MARK["datawrite"], f"at train.py:{MARK['datawrite']} (got {file}:{line})")
    v = d.get("value_after_structure") or {}
    check(v.get("cause") == "structure", f"the value after it differs because of it (got {v.get('cause')}: {v.get('detail')})")
    line, file = line_of(v.get("a"))
    check(file == "train.py" and line == MARK["fc1"], f"first value difference at train.py:{MARK['fc1']} (got {file}:{line})")


def case_numpy_buffer():
    # One NumPy array refilled in place each step under a tensor made once by from_numpy: the
    # tensor's TensorImpl and version never change, so a carried hash would read the changed
    # batch of step 3 as a nondeterministic kernel. Memory torch did not allocate is hashed at
    # every read.
    script = os.path.join(HERE, "scripts", "numpy_buffer.py")
    a, b, out_a, out_b = pair("numpy_buffer", [], ["--poke-step", "3"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"]
    check(rc == 1 and d is not None, "a divergence is reported")
    if d is None:
        return
    check(d["cause"] == "external_input", f"cause external_input (got {d['cause']}: {d.get('detail')})")
    line, file = line_of(d["a"])
    read = marks(script)["read"]
    check(file == "numpy_buffer.py" and line == read, f"at numpy_buffer.py:{read} (got {file}:{line})")
    check(d["a"]["step"] == 3, f"in step 3 (got {d['a']['step']})")
    a2, _ = record("numpy_buffer_a2", [], script)
    rc, r = diff(a, a2)
    check(rc == 0, f"identical runs are identical (exit {rc}: {r.get('first_divergence')})")


KILLED_CHILD = r'''
import os, signal, sys, torch
print("main", torch.ones(3).sum().item(), flush=True)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    torch.zeros(2).add(1).sum()
    os.write(w, b"x")
    if sys.argv[1] == "kill":
        signal.pause()
    sys.exit(0)
os.read(r, 1)
if sys.argv[1] == "kill":
    os.kill(pid, signal.SIGKILL)  # as the OOM killer would: no chance to close the database
os.waitpid(pid, 0)
print("after", torch.ones(2).sum().item())
'''


def case_killed_child():
    # A forked child SIGKILLed before its first flush (--flush-ms far away) leaves a database with
    # the schema alone. It must not pair with the other run's main process (a false
    # divergence), and the child that did write in the other run is no divergence either.
    script = write_script("killed_child.py", KILLED_CHILD)
    a, out_a = record("killed_child_a", ["kill"], script, ["--flush-ms", "600000"])
    b, out_b = record("killed_child_b", ["exit"], script, ["--flush-ms", "600000"])
    check(out_a == out_b, "the two runs print the same")
    rc, r = diff(a, b)
    check(rc == 0 and r["status"] == "identical",
          f"identical (exit {rc}: {r.get('first_divergence')})")
    notes = " ".join(r.get("notes", []))
    check("left out" in notes and "exists only in B" in notes, f"notes say why: {notes}")


# A task pool of two workers (`POOL` makes it) mapping `work` over six tasks. argv: the task that
# sleeps, so that the other worker takes every other task (which worker runs which task differs
# between runs), and the task whose value is changed (-1: none).
POOL_TASKS = r'''
import multiprocessing as mp, sys, time, torch
from concurrent.futures import ThreadPoolExecutor
SLOW, CHANGED = int(sys.argv[1]), int(sys.argv[2])
def work(i):
    if i == SLOW:
        time.sleep(SLEEP)
    x = torch.full((8,), float(i) + (0.5 if i == CHANGED else 0.0))
    for _ in range(5):
        x = x.mul(1.5).tanh()
    return round(float(x.sum()), 3)
if __name__ == "__main__":
    torch.ones(2).add(1)
    with POOL as p:
        print(sorted(p.map(work, range(6)))[:2])
'''


def pool_runs(name, pool, sleep):
    """Records the pool script (A and B: other tasks in each worker, C: task 3 changed), checks
    that A and B are identical with a note saying why, and returns (exit, result) of A vs C."""
    script = write_script(name + ".py", POOL_TASKS.replace("POOL", pool).replace("SLEEP", sleep))
    a, out_a = record(name + "_a", ["0", "-1"], script)
    b, out_b = record(name + "_b", ["1", "-1"], script)
    c, _ = record(name + "_c", ["1", "3"], script)
    check(out_a == out_b, "the two runs print the same")
    rc, r = diff(a, b)
    check(rc == 0 and r["status"] == "identical",
          f"identical (exit {rc}: {(r.get('first_divergence') or {}).get('detail')})")
    check(any("took their tasks in another order" in n for n in r.get("notes", [])),
          f"a note says the workers took their tasks in another order: {r.get('notes')}")
    return diff(a, c)


def case_pool_tasks():
    # A multiprocessing Pool hands tasks to whichever worker asks first: worker k of A and of
    # B hold different tasks in identical runs. Compared as one set, they are identical; a
    # changed task is found as that task, whichever worker ran it in each run.
    rc, r = pool_runs("pool_tasks", 'mp.get_context("fork").Pool(2)', "0.5")
    d = r.get("first_divergence") or {}
    arg = d.get("argument") or {}
    check(rc == 1 and d.get("cause") == "arguments" and (d.get("a") or {}).get("op") == "aten::full"
          and arg.get("value_a") == "3" and arg.get("value_b") == "3.5",
          f"the changed task's full(3 vs 3.5): {d.get('cause')} {(d.get('a') or {}).get('op')} {arg}")


CHECKPOINT = r'''
import copy, sys, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 1))
opt = torch.optim.Adam(m.parameters(), lr=0.01)
if sys.argv[1] == "save":
    torch.save(m.state_dict(), sys.argv[2])
    sys.exit(0)
m.load_state_dict(torch.load(sys.argv[2]))       # resume from a checkpoint file
for step in range(3):
    loss = m(torch.ones(5, 4) * step).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
best = copy.deepcopy(m.state_dict())             # the early-stopping snapshot
opt.load_state_dict(copy.deepcopy(opt.state_dict()))   # deep-copies Adam's state tensors
m.load_state_dict(best)
print(round(m(torch.ones(5, 4)).sum().item(), 4))
'''


def case_checkpoint():
    # A deepcopy sets a fresh, unwritten storage under a tensor and copies into it: its garbage
    # must never be compared (identical runs diffed as diverged at `set_`). A checkpoint file
    # that differs is data from outside, read where the program loads it.
    script = write_script("checkpoint.py", CHECKPOINT)
    files = []
    for seed in ("0", "1"):
        path = os.path.join(WORK, "checkpoint_%s.pt" % seed)
        subprocess.run([PYTHON, "-c", CHECKPOINT.replace("torch.manual_seed(0)",
                                                         "torch.manual_seed(%s)" % seed),
                        "save", path], check=True)
        files.append(path)
    a, out_a = record("checkpoint_a", ["load", files[0]], script)
    b, out_b = record("checkpoint_b", ["load", files[0]], script)
    c, _ = record("checkpoint_c", ["load", files[1]], script)
    check(out_a == out_b, "the two runs print the same")
    rc, r = diff(a, b)
    check(rc == 0 and r["status"] == "identical",
          f"identical (exit {rc}: {(r.get('first_divergence') or {}).get('detail')})")
    rc, r = diff(a, c)
    d = r.get("first_divergence") or {}
    where = ((d.get("a") or {}).get("source") or {})
    check(rc == 1 and d.get("cause") == "external_input" and where.get("line") == 9,
          f"another checkpoint is data from outside at the load (line 9): {d.get('cause')} "
          f"{(d.get('a') or {}).get('op')} {where}")
    check(any(st.get("key") == "cmdline" for st in r.get("settings", [])),
          f"the differing command line is named: {r.get('settings')}")


# Trains 6 steps straight ("full"), or 3, then saves model, optimizer and generator, builds
# both again in the same process, loads the model's state (the optimizer's unless "noopt", the
# generator's unless "norng") and trains 3 more.
RESUME_IN_PROCESS = r'''
import io, sys, torch
torch.manual_seed(0)
def make():
    m = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Dropout(0.2),  # MARK:make
                            torch.nn.Linear(16, 1))
    if len(sys.argv) > 2:  # "sgd": momentum, whose buffers the first step clones
        return m, torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    return m, torch.optim.Adam(m.parameters(), lr=0.01)
data = torch.randn(6, 8, 6)
def train(m, opt, steps):
    for step in steps:
        opt.zero_grad()
        m(data[step]).pow(2).mean().backward()
        opt.step()
m, opt = make()
if sys.argv[1] == "full":
    train(m, opt, range(6))
else:
    train(m, opt, range(3))
    f = io.BytesIO()
    torch.save({"model": m.state_dict(), "opt": opt.state_dict(), "rng": torch.get_rng_state()}, f)
    f.seek(0)
    state = torch.load(f)
    m, opt = make()
    m.load_state_dict(state["model"])
    if sys.argv[1] != "noopt":
        opt.load_state_dict(state["opt"])  # MARK:load_opt
    if sys.argv[1] == "reseed":  # seeded again where the saved state was to be restored
        torch.manual_seed(1)
    elif sys.argv[1] != "norng":
        torch.set_rng_state(state["rng"])
    train(m, opt, range(3, 6))
'''


def case_resumed_in_process():
    # Model and optimizer built again in the same process, the optimizer's state not loaded:
    # the headline says B's optimizer started afresh, as for a resumed process; its fresh
    # state is no parameter "left" by B's optimizer (t145 F5).
    script = write_script("resumed_in_process.py", RESUME_IN_PROCESS)
    a, _ = record("resumed_in_process_a", ["full"], script)
    b, _ = record("resumed_in_process_b", ["noopt"], script)
    rc, r = diff(a, b)
    d = r.get("first_divergence") or {}
    headline = diff_text(a, b).splitlines()[0]
    check(rc == 1 and d.get("kind") == "structure" and "not_updated" not in d
          and "; B's optimizer started afresh at step 3 (its state was not restored" in headline,
          f"B's optimizer named as started afresh in the headline, no parameters left (got "
          f"{d.get('not_updated')}: {headline})")
    c, _ = record("resumed_in_process_c", ["withopt"], script)
    rc, r = diff(a, c, "--results")
    check(rc == 0 and r.get("results") == "same",
          f"the same resume with the optimizer's state loaded: the same results (got {rc}, "
          f"{(r.get('first_divergence') or {}).get('detail')})")
    # Seeded again after the load where C restores the generator's state: the seed named with
    # where B set it (t150 F5).
    e, _ = record("resumed_in_process_reseed", ["reseed"], script)
    rc, r = diff(c, e)
    d = r.get("first_divergence") or {}
    check(rc == 1 and d.get("cause") == "rng"
          and re.search(r"B set it again to 1 from op \d+ \(step 3\), after 0, and the other run did "
                        r"not", d.get("detail", "")),
          f"B's seed set again is named (got {d.get('cause')}: {d.get('detail')})")
    # Both rebuilt, the state loaded in C only: B's optimizer still started afresh (t151 F2).
    headline = diff_text(c, b).splitlines()[0]
    check("; B's optimizer started afresh at step 3" in headline,
          f"against a rebuild that loads the state, B's optimizer started afresh: {headline}")
    # The generator's state not restored: the first value difference after the change is
    # dropout's, whose generator the rebuilt model's initialization moved; that draw is named.
    n, _ = record("resumed_in_process_norng", ["norng"], script)
    rc, r = diff(a, n)
    after = (r.get("first_divergence") or {}).get("value_after_structure") or {}
    drawn = after.get("drawn_in_change") or {}
    headline = diff_text(a, n).splitlines()[0]
    check(rc == 1 and after.get("cause") == "rng" and drawn.get("run") == "B"
          and drawn.get("source", "").endswith(f"resumed_in_process.py:{marks(script)['make']}")
          and "B's changed ops drew from the generator first" in headline,
          f"the rebuilt model's draw named (got {after.get('cause')}: {after.get('detail')}; {headline})")
    # SGD with momentum: A's momentum buffer, written in place in this step (mul_, then add_),
    # is no state A made afresh: the straight run is never blamed (t146 F2). B's buffer, cloned
    # from the gradient in this step, is: its `p.add_(buf, alpha=-lr)` pairs with A's, not
    # with A's `buf.add_(grad)` before it, whichever run is named first.
    s_a, _ = record("resumed_in_process_sgd_a", ["full", "sgd"], script)
    s_b, _ = record("resumed_in_process_sgd_b", ["noopt", "sgd"], script)
    heads = [diff_text(s_a, s_b).splitlines()[0], diff_text(s_b, s_a).splitlines()[0]]
    check("; B's optimizer started afresh at step 3" in heads[0]
          and "; A's optimizer started afresh at step 3" in heads[1],
          f"the resumed run's optimizer, and only it, said to start afresh (got {heads})")
    # Against a rebuild that loads the momentum buffers, whose values no recorded op made
    # (the in-place mul_ writes into them): B's is still the state made afresh (t151 F2).
    s_c, _ = record("resumed_in_process_sgd_c", ["withopt", "sgd"], script)
    headline = diff_text(s_c, s_b).splitlines()[0]
    check("; B's optimizer started afresh at step 3" in headline,
          f"SGD against a rebuild that loads the state: {headline}")


# Trains 6 steps ("full"), or 3 steps saving a checkpoint ("first CKPT") and then the last 3
# from it ("resume CKPT [LR]"), counting its steps from 0 again: a resumed run.
RESUME = r"""
import sys, torch
torch.manual_seed(0)
m = torch.nn.Linear(6, 3)
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
data = torch.randn(6, 8, 6)
mode = sys.argv[1]
steps = range(6) if mode == "full" else range(3) if mode == "first" else range(3, 6)
if mode == "resume":
    state = torch.load(sys.argv[2])
    m.load_state_dict(state["model"]); opt.load_state_dict(state["opt"])
    if len(sys.argv) > 3:
        for g in opt.param_groups: g["lr"] = float(sys.argv[3])
for k in steps:
    opt.zero_grad()
    loss = m(data[k]).pow(2).mean()
    loss.backward()
    opt.step()
    print("%.6f" % loss.item())
if mode == "first":
    torch.save({"model": m.state_dict(), "opt": opt.state_dict()}, sys.argv[2])
"""


def case_resumed():
    # A run resumed from a checkpoint, recorded as one run of two processes (the training,
    # then its resumption, which counts its steps from 0 again), with another learning rate
    # after the resume: `--align-steps 3:0` pairs A's step 3 with the resumption's step 0 in
    # diff, report and bundle alike, and the bundle says how to compare its runs.
    script = write_script("resume.py", RESUME)
    ckpt = os.path.join(WORK, "resume.pt")
    a, _ = record("resumed_a", ["full"], script)
    b = os.path.join(WORK, "resumed_b")
    shutil.rmtree(b, ignore_errors=True)
    both = "%s %s first %s && %s %s resume %s 0.05" % (PYTHON, script, ckpt, PYTHON, script, ckpt)
    subprocess.run([TDBG, "record", "-o", b, "--", "sh", "-c", both], check=True,
                   stdout=subprocess.DEVNULL)
    p = subprocess.run([TDBG, "diff", "--json", "--align-steps", "3:0", a, b],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    r = json.loads(p.stdout) if p.returncode in (0, 1) else {}
    d = r.get("first_divergence") or {}
    # B's own start (building the model, loading the checkpoint) reads as ops inserted; the
    # first value difference after it is the learning rate, inside optimizer.step().
    after = d.get("value_after_structure") or {}
    check(p.returncode == 1 and d.get("cause") == "structure" and after.get("cause") == "arguments",
          f"diff --align-steps: B's start, then an argument (got {p.returncode} {d.get('cause')}, "
          f"{after.get('cause')} {p.stderr[-200:]!r})")
    check((d.get("a") or {}).get("step") == 3 and (d.get("b") or {}).get("step") == 0,
          f"A's step 3 with B's step 0 (got {(d.get('a') or {}).get('step')}, "
          f"{(d.get('b') or {}).get('step')})")
    check(any(n.startswith("B: ") for n in r.get("notes", [])), f"the phase kept is said: {r.get('notes')}")
    headline = "diverged structurally at step A 3, B 0"
    # Without --align-steps: the phase that loads A's values after step 3 is found, and kept.
    p = subprocess.run([TDBG, "diff", "--json", a, b], stdout=subprocess.PIPE, text=True)
    r = json.loads(p.stdout) if p.returncode == 1 else {}
    found = r.get("first_divergence") or {}
    check(any(n.startswith("B begins by copying in values") and "--align-steps 3:0" in n
              for n in r.get("notes", [])) and
          (found.get("a") or {}).get("seq") == (d.get("a") or {}).get("seq") and
          (found.get("b") or {}).get("seq") == (d.get("b") or {}).get("seq"),
          f"without --align-steps, the same pairing, found: {r.get('notes')}")
    # The report: the same first divergence as the diff.
    page = os.path.join(WORK, "resumed_report")
    shutil.rmtree(page, ignore_errors=True)
    p = subprocess.run([TDBG, "report", "--align-steps", "3:0", a, b, "-o", page],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    html = open(os.path.join(page, "index.html")).read() if p.returncode == 0 else ""
    check(headline in html, f"the report says {headline!r} (exit {p.returncode} {p.stderr[-200:]!r})")
    # The bundle: its diff.json, README, and a diff of its own runs say the same.
    bundle = os.path.join(WORK, "resumed.tar.gz")
    subprocess.run([TDBG, "bundle", "--align-steps", "3:0", "-o", bundle, a, b], check=True,
                   stdout=subprocess.DEVNULL)
    with tarfile.open(bundle) as t:
        names = t.getnames()
        get = lambda suffix: t.extractfile(next(n for n in names if n.endswith(suffix))).read().decode()
        bundled, readme = json.loads(get("/diff.json")), get("/README.md")
        commands = get("/commands.txt")
    bd = bundled.get("first_divergence") or {}
    # commands.txt says how the whole run was started: the shell that ran both phases, and
    # the phase left out, marked so (t145 F6).
    check("# run B, recorded with tdbg record:\ncd " in commands and "\ntdbg record -o " in commands and " -- sh -c " in commands
          and "not in this bundle (another phase of the run" in commands
          and commands.count(" first ") >= 2,
          f"commands.txt holds the launcher and the phase left out: {commands!r}")
    check((bd.get("a") or {}).get("seq") == (d.get("a") or {}).get("seq") and
          (bd.get("b") or {}).get("seq") == (d.get("b") or {}).get("seq"),
          f"the bundle's diff.json pairs the same ops (got {(bd.get('a') or {}).get('seq')}, "
          f"{(bd.get('b') or {}).get('seq')})")
    check("tdbg diff runs/a runs/b --align-steps 3:0" in readme, "the README's diff command aligns the steps")
    check("Note: B: compared its phase" in readme and "not in this bundle" in readme,
          f"the README says which phase was left out: {readme[:1200]!r}")
    check(re.search(r"first value difference after it: op #\d+ `aten::add_`", readme) is not None
          and "(cause: arguments" in readme,
          f"and the first value difference after B's start: {readme[:1200]!r}")
    out = os.path.join(WORK, "resumed_bundle")
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([TDBG, "bundle", "--extract", bundle, "-o", out], check=True, stdout=subprocess.DEVNULL)
    top = os.path.join(out, os.listdir(out)[0])
    p = subprocess.run([TDBG, "diff", "--json", "--align-steps", "3:0", os.path.join(top, "runs", "a"),
                        os.path.join(top, "runs", "b")], stdout=subprocess.PIPE, text=True)
    again = (json.loads(p.stdout).get("first_divergence") or {}) if p.returncode == 1 else {}
    check((again.get("b") or {}).get("step") == 0 and
          (again.get("value_after_structure") or {}).get("cause") == "arguments",
          f"the bundled runs diff alike (got {p.returncode} {again.get('cause')})")
    # Without two runs the option means nothing: one line, exit 2.
    p = subprocess.run([TDBG, "report", "--align-steps", "3:0", a, "-o", page + "_one"],
                       stderr=subprocess.PIPE, text=True)
    check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1,
          f"report --align-steps of one run: one line, exit 2 (got {p.returncode} {p.stderr!r})")


# Trains 6 steps with Adam ("full"), or 3 saving a checkpoint ("first CKPT"), or the last 3
# from it ("resume CKPT"; "resume_fresh CKPT" forgets to load the optimizer's state;
# "resume_one CKPT" takes one layer's weight from it and trains from its own init). A gate
# whose gradient is 0 keeps its value at every step, as a dead unit's weights do.
RESUME_ADAM = r"""
import sys, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 3))
m.gate = torch.nn.Parameter(torch.ones(4))
opt = torch.optim.Adam(m.parameters(), lr=0.01)
data = torch.randn(6, 8, 6)
mode = sys.argv[1]
steps = range(6) if mode == "full" else range(3) if mode == "first" else range(3, 6)
if mode == "resume_one":
    torch.manual_seed(5)
    m[0].weight.data.copy_(torch.load(sys.argv[2])["model"]["0.weight"])
    steps = range(6)
elif mode.startswith("resume"):
    state = torch.load(sys.argv[2])
    m.load_state_dict(state["model"])  # MARK:resume_load
    if mode == "resume":
        opt.load_state_dict(state["opt"])
for k in steps:
    opt.zero_grad()
    loss = m(data[k]).pow(2).mean() + 0 * m.gate.sum()
    loss.backward()
    opt.step()
    print("%.6f" % loss.item())
if mode == "first":
    torch.save({"model": m.state_dict(), "opt": opt.state_dict()}, sys.argv[2])
"""


def case_resumed_apart():
    # The usual resumption: a separate job, recorded on its own, counting its steps from 0.
    # Without --align-steps, diff finds by the values it loads that it resumes A at step 3.
    script = write_script("resume_adam.py", RESUME_ADAM)
    ckpt = os.path.join(WORK, "resume_adam.pt")
    subprocess.run([PYTHON, script, "first", ckpt], check=True, stdout=subprocess.DEVNULL)
    a, out_a = record("resumed_apart_a", ["full"], script)
    b, out_b = record("resumed_apart_b", ["resume", ckpt], script)
    fresh, out_fresh = record("resumed_apart_fresh", ["resume_fresh", ckpt], script)
    check(out_a.splitlines()[3:] == out_b.splitlines() and out_b != out_fresh,
          f"precondition: B goes on as A does, the fresh optimizer not ({out_a!r} {out_b!r} {out_fresh!r})")
    load_line = marks(script)["resume_load"]
    rc, r = diff(a, b)
    d = r.get("first_divergence") or {}
    guessed = [n for n in r.get("notes", []) if n.startswith("B begins by copying in values")]
    check(len(guessed) == 1 and "--align-steps 3:0" in guessed[0] and
          f"resume_adam.py:{load_line}" in guessed[0],
          f"the resumption is found, at the load's line {load_line}: {r.get('notes')}")
    check((d.get("a") or {}).get("step") == 3 and (d.get("b") or {}).get("step") == 0 and
          isinstance(d.get("values_same"), dict),
          f"A's step 3 with B's step 0, and the values the same after B's start-up (got "
          f"{(d.get('a') or {}).get('step')}, {(d.get('b') or {}).get('step')}, {d.get('values_same')})")
    # --results: a resumption that trains the same passes a check (exit 0), one that does not
    # fails it (exit 1).
    codes = [subprocess.run([TDBG, "diff", "--results", a, x], stdout=subprocess.DEVNULL).returncode
             for x in (b, fresh)]
    check(codes == [0, 1], f"diff --results exits 0 for the same results, 1 for other ones (got {codes})")
    rc, r = diff(a, fresh)
    d = r.get("first_divergence") or {}
    after = d.get("value_after_structure") or {}
    check("B's optimizer started afresh" in after.get("detail", ""),
          f"a fresh optimizer is named as such: {after.get('cause')}: {after.get('detail')}")
    # Growth counts B's start-up in A's numbering, as its pairs: from step 3, no step 0.
    steps = [s.get("step") for s in (d.get("growth") or {}).get("steps", [])]
    check(steps and min(steps) == 3, f"growth's steps are A's, from 3: {steps}")
    headline = diff_text(a, fresh).splitlines()[0]
    check("that is B's start-up" in headline and
          "the first value difference after it: " + after.get("a", {}).get("op", "?") in headline
          and headline.endswith("B's optimizer started afresh (its state was not restored: "
                                "optimizer.load_state_dict missing?)"),
          f"the headline goes past B's start-up to the value difference and its cause: {headline}")
    # The bundle pairs them alike, and its README says why and how to diff its runs.
    bundle = os.path.join(WORK, "resumed_apart.tar.gz")
    subprocess.run([TDBG, "bundle", "-o", bundle, a, b], check=True, stdout=subprocess.DEVNULL)
    with tarfile.open(bundle) as t:
        readme = t.extractfile(next(n for n in t.getnames() if n.endswith("/README.md"))).read().decode()
    check("Note: B begins by copying in values" in readme and "not in this bundle" not in readme and
          "tdbg diff runs/a runs/b --align-steps 3:0" in readme,
          f"the bundle's README names the resumption and its pairing: {readme[:1500]!r}")
    # One layer taken from A's checkpoint is no resumption.
    one, _ = record("resumed_apart_one", ["resume_one", ckpt], script)
    rc, r = diff(a, one)
    check(not any(n.startswith("B begins") for n in r.get("notes", [])),
          f"one layer loaded from A's checkpoint is no resumption: {r.get('notes')}")
    # Pairing the steps by number, as asked, guesses nothing.
    p = subprocess.run([TDBG, "diff", "--json", "--align-steps", "0:0", a, b], stdout=subprocess.PIPE, text=True)
    r = json.loads(p.stdout) if p.returncode == 1 else {}
    check(not any(n.startswith("B begins") for n in r.get("notes", [])) and
          ((r.get("first_divergence") or {}).get("b") or {}).get("step") == 0 and
          any(n.startswith("compared from A's step 0 ") for n in r.get("notes", [])),
          f"--align-steps 0:0 pairs step 0 with step 0: {r.get('notes')}")


# Residual blocks, run through torch.utils.checkpoint when argv[1] is "1": backward then
# recomputes each block's forward, with the same values.
ACTIVATION_CHECKPOINT = r"""
import sys, torch
from torch.utils.checkpoint import checkpoint
torch.manual_seed(0)
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)
    def forward(self, x):
        return x + self.l2(torch.nn.functional.gelu(self.l1(x)))
blocks = torch.nn.ModuleList([Block() for _ in range(3)])
opt = torch.optim.SGD(blocks.parameters(), lr=0.05, momentum=0.9)
x, y = torch.randn(32, 16), torch.randn(32, 16)
for step in range(3):
    opt.zero_grad()
    h = x
    for k, b in enumerate(blocks):
        if sys.argv[1] == "1":
            h = checkpoint(b, h, use_reentrant=False)
        elif sys.argv[1] == "2" and k > 0:  # reentrant: its input must require grad
            h = checkpoint(b, h, use_reentrant=True)
        else:
            h = b(h)
    loss = torch.nn.functional.mse_loss(h, y)
    loss.backward()
    opt.step()
    print(step, loss.item())
"""


PARAM_GROUPS = """
import sys, torch, torch.nn as nn
torch.set_num_threads(1)
torch.manual_seed(0)
grouping, bias_decay = sys.argv[1], float(sys.argv[2])
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(16)
        self.fc = nn.Linear(16, 48)
        self.proj = nn.Linear(48, 16)
    def forward(self, x):
        return x + self.proj(torch.relu(self.fc(self.ln(x))))
model = nn.Sequential(nn.Embedding(10, 16), Block(), Block(), nn.LayerNorm(16), nn.Linear(16, 10))
decay, no_decay = [], []
for p in model.parameters():
    (decay if p.dim() >= 2 or grouping == "one" else no_decay).append(p)
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                         {"params": no_decay, "weight_decay": bias_decay}], lr=1e-2)
x = torch.randint(0, 10, (4, 6))
y = torch.randint(0, 10, (4, 6))
for step in range(3):
    loss = nn.functional.cross_entropy(model(x).reshape(-1, 10), y.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()  # MARK:step
    print(step, f"{loss.item():.8f}")
"""


def case_param_groups():
    # Parameters in two optimizer groups (no decay on biases and norms) against one group: the
    # optimizer visits them in another order, and same-shaped weights of other blocks are
    # alike to the alignment. With the same hyperparameters nothing differs; with another
    # decay for the biases the first difference is that decay's argument, not another weight
    # read by a mispaired op.
    script = write_script("param_groups.py", PARAM_GROUPS)
    step_line = marks(script)["step"]
    a, out_a = record("groups_a", ["two", "0.1"], script)
    b, out_b = record("groups_b", ["one", "0.1"], script)
    check(out_a == out_b, f"precondition: the same losses ({out_a!r} vs {out_b!r})")
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("kind") == "structure" and d.get("reordered"),
          f"the same ops in another order (got {d.get('kind')}, {d.get('detail')})")
    check(d.get("value_after_structure") is None and d.get("values_same") is not None,
          f"every paired and moved op computed the same (got {d.get('value_after_structure')}, "
          f"moved_ops_differ {d.get('moved_ops_differ')})")
    c, _ = record("groups_c", ["two", "0.0"], script)
    rc, r = diff(a, c)
    d = r["first_divergence"] or {}
    check(d.get("kind") == "value" and d.get("cause") == "arguments",
          f"one group's decay: an argument (got {d.get('kind')}, {d.get('cause')})")
    opt = (d.get("argument") or {}).get("optimizer") or {}
    check([(x.get("group"), x.get("name"), x.get("a"), x.get("b")) for x in opt.get("differs") or []]
          == [(1, "weight_decay", 0.1, 0.0)]
          and "param group 1's weight_decay is 0.1 in A and 0.0 in B" in opt.get("text", ""),
          f"the group and its decay are named (got {opt})")
    rc, r = diff(b, c)
    d = r["first_divergence"] or {}
    v = d.get("value_after_structure") or {}
    line, _ = line_of(v.get("a"))
    check(v.get("cause") == "arguments" and (v.get("a") or {}).get("op") == "aten::mul_"
          and line == step_line,
          f"regrouped with another decay: the decay's mul_ at the step's line {step_line} "
          f"(got {v.get('cause')}, {(v.get('a') or {}).get('op')} at {line}, {v.get('detail')})")


# Work moved to another optimizer step: an evaluation pass after iteration argv[1] (no
# backward, no optimizer ops; -1: none), and the optimizer stepping on even (argv[2] "even") or odd micro-batches
# (a gradient-accumulation condition written two ways).
MOVED_BLOCKS = """
import sys, torch, torch.nn as nn
torch.set_num_threads(1)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data, held = torch.randn(8, 16, 8), torch.randn(4, 16, 8)
def evaluate():
    with torch.no_grad():
        return sum(model(h).pow(2).mean().item() for h in held)  # MARK:evaluate
for i in range(8):
    loss = model(data[i]).pow(2).mean()
    loss.backward()
    if (i % 2 == 0) == (sys.argv[2] == "even"):
        opt.step()
        opt.zero_grad()
    if i == int(sys.argv[1]):
        print("eval", evaluate())
    print(i, f"{loss.item():.8f}")
"""


def case_moved_blocks():
    # An evaluation pass moved to a later step is said as such, not as a gradient-accumulation
    # condition; the optimizer stepping after other micro-batches is that condition.
    script = write_script("moved_blocks.py", MOVED_BLOCKS)
    a, _ = record("moved_eval_a", ["1", "odd"], script)
    b, _ = record("moved_eval_b", ["5", "odd"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    line, _ = line_of(d.get("a"))
    detail = d.get("detail") or ""
    check(rc == 1 and d.get("reordered_steps") and line == marks(script)["evaluate"],
          f"the evaluation pass moved into other steps, at its line (got {line}, {detail!r})")
    check("a block without backward or optimizer ops" in detail
          and "from step 1 in A, step 3 in B" in detail and "gradient-accumulation" not in detail,
          f"said as a block moved, with its steps, not as accumulation (got {detail!r})")
    c, _ = record("moved_odd", ["-1", "odd"], script)
    e, _ = record("moved_even", ["-1", "even"], script)
    rc, r = diff(c, e)
    detail = (r["first_divergence"] or {}).get("detail") or ""
    check(rc == 1 and "gradient-accumulation" in detail,
          f"the optimizer stepping after other micro-batches: accumulation (got {detail!r})")


def case_secrets():
    # A token on the command line and in a TORCH_* variable that differs between the runs:
    # diff names the settings that differ without printing the values (its output is pasted
    # into issues), in its text and its JSON.
    script = write_script("token_args.py", "import sys, torch\nprint(torch.ones(2).mul(float(sys.argv[1])).sum().item())\n")
    token_a, token_b, hub = "tokAAAA1111bbbb", "tokZZZZ9999yyyy", "hubFAKE_55555555"
    a, _ = record("secrets_a", ["1", "--hf-token=" + token_a], script)
    os.environ["TORCH_HUB_TOKEN"] = hub
    try:
        b, _ = record("secrets_b", ["2", "--hf-token", token_b], script)
    finally:
        del os.environ["TORCH_HUB_TOKEN"]
    p = subprocess.run([TDBG, "diff", "--json", a, b], stdout=subprocess.PIPE, text=True)
    text = subprocess.run([TDBG, "diff", a, b], stdout=subprocess.PIPE, text=True).stdout
    settings = {s.get("key"): s for s in json.loads(p.stdout).get("settings") or []}
    check("cmdline" in settings and "$TORCH_HUB_TOKEN" in settings,
          f"the command line and the variable differ (got {sorted(settings)})")
    leaked = [t for t in (token_a, token_b, hub) if t in p.stdout or t in text]
    check(not leaked and "--hf-token=[REDACTED]" in text and "B [REDACTED]" in text,
          f"no credential in diff's output (leaked {leaked}; {text[:700]!r})")


# An optimizer made with settings that add or remove ops in its step (nesterov, maximize,
# weight decay from 0), or of another class. argv[1]: the class; argv[2]: its settings as JSON;
# argv[3] "addgroup": a parameter group added before the first step; "frozen": the first layer
# frozen and left out of the optimizer.
OPTIMIZER_OPS = """
import json, sys, torch, torch.nn as nn
torch.set_num_threads(1)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
x, y = torch.randn(32, 8), torch.randn(32, 4)
extra = nn.Parameter(torch.ones(4))                # trained only in a group of its own
if sys.argv[3:] == ["frozen"]:                     # the first layer frozen, left out
    model[0].requires_grad_(False)
opt = getattr(torch.optim, sys.argv[1])([p for p in model.parameters() if p.requires_grad],
                                        **json.loads(sys.argv[2]))
if sys.argv[3:] == ["addgroup"]:
    opt.add_param_group({"params": [extra], "lr": 0.01})
for step in range(3):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean() + extra.sum() * 0.01
    loss.backward()
    opt.step()  # MARK:step
    print(step, f"{loss.item():.8f}")
"""


def case_optimizer_ops():
    # The first change lies inside optimizer.step(), whose ops differ because its settings do:
    # the diff names the setting (or the classes), not only the op inserted, and does not call
    # the other settings' ops "optimizer state made afresh".
    script = write_script("optimizer_ops.py", OPTIMIZER_OPS)
    step_line = marks(script)["step"]
    momentum, _ = record("opt_momentum", ["SGD", '{"lr": 0.1, "momentum": 0.9}'], script)
    nesterov, _ = record("opt_nesterov", ["SGD", '{"lr": 0.1, "momentum": 0.9, "nesterov": true}'],
                         script)
    rc, r = diff(momentum, nesterov)
    d = r["first_divergence"] or {}
    line, _ = line_of(d.get("b"))
    s = d.get("optimizer_settings") or {}
    check(rc == 1 and d.get("kind") == "structure" and line == step_line,
          f"a structural change at opt.step() (line {step_line}; got {d.get('kind')} at {line})")
    check([(x.get("name"), x.get("a"), x.get("b")) for x in s.get("differs") or []]
          == [("nesterov", False, True)] and s.get("step") == 0,
          f"the setting that adds the ops is named, from step 0 (got {s})")
    text = diff_text(momentum, nesterov)
    check("optimizer: from step 0, inside the step of SGD: nesterov is False in A and True in B"
          in text, f"diff's text names it as Python writes it (got {text[:1200]!r})")
    adam, _ = record("opt_adam", ["Adam", '{"lr": 0.1}'], script)
    rc, r = diff(momentum, adam)
    d = r["first_divergence"] or {}
    s = d.get("optimizer_settings") or {}
    after = (d.get("value_after_structure") or {}).get("detail") or ""
    check("the optimizers are of other classes" in s.get("text", "")
          and (s.get("a") or {}).get("optimizer") == "SGD"
          and (s.get("b") or {}).get("optimizer") == "Adam",
          f"SGD against Adam: the classes are named (got {s})")
    check("started afresh" not in after,
          f"Adam's state is not taken for SGD's started afresh (got {after!r})")
    # Momentum from 0: the update reads the momentum buffer where the other run reads the
    # gradient backward accumulated, with add_ in both: no recomputation in backward.
    plain, _ = record("opt_plain", ["SGD", '{"lr": 0.1}'], script)
    rc, r = diff(plain, momentum)
    d = r["first_divergence"] or {}
    after = (d.get("value_after_structure") or {}).get("detail") or ""
    check(((d.get("optimizer_settings") or {}).get("differs") or [{}])[0].get("name") == "momentum"
          and "activation checkpointing" not in after,
          f"momentum named, no checkpointing (got {d.get('optimizer_settings')}, {after!r})")
    # A group added: ops inserted at the step's end, the other run's next op outside it.
    grouped, _ = record("opt_addgroup", ["SGD", '{"lr": 0.1}', "addgroup"], script)
    rc, r = diff(plain, grouped)
    s = (r["first_divergence"] or {}).get("optimizer_settings") or {}
    check("A has 1 param group(s) and B 2" in s.get("text", ""),
          f"the added group is named (got {s})")
    # A frozen layer: backward computes no gradient for it, before any step; the optimizer's
    # parameter count says why.
    frozen, _ = record("opt_frozen", ["SGD", '{"lr": 0.1}', "frozen"], script)
    rc, r = diff(plain, frozen)
    s = (r["first_divergence"] or {}).get("optimizer_settings") or {}
    check("parameter count is 4 in A and 2 in B (the optimizer was given other parameters"
          in s.get("text", ""), f"the frozen layer's parameters are named (got {s})")
    # Adagrad makes its state as it is made: the change lies before any step, and the classes
    # are named all the same.
    adagrad, _ = record("opt_adagrad", ["Adagrad", '{"lr": 0.1}'], script)
    rc, r = diff(adagrad, adam)
    s = (r["first_divergence"] or {}).get("optimizer_settings") or {}
    check("the optimizers are of other classes" in s.get("text", "")
          and (s.get("a") or {}).get("optimizer") == "Adagrad",
          f"Adagrad against Adam: the classes are named (got {s})")


# Changes larger than a window's script holds: an evaluation pass of thousands of ops that one
# run inserts ("eval"), and the start-up of a deep model resumed from the other run's checkpoint
# ("save" writes it after step 2, "resume" goes on from it). argv: mode, layers, checkpoint.
LONG_CHANGE = """
import sys, torch, torch.nn as nn
torch.manual_seed(0)
torch.set_num_threads(1)
mode, layers = sys.argv[1], int(sys.argv[2])
model = nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(8, 8), nn.Tanh())])
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
g = torch.Generator().manual_seed(1)
data = [torch.randn(4, 8, generator=g) for _ in range(6)]
steps = range(6)
if mode == "resume":
    state = torch.load(sys.argv[3])
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    steps = range(3, 6)
for k in steps:
    loss = model(data[k]).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("%.6f" % loss.item())
    if mode == "eval" and k == 2:
        with torch.no_grad():
            held_out = torch.cat(data[:2])  # a batch of another size: ops of other shapes
            print("eval %.6f" % sum(model(held_out).pow(2).mean().item() for _ in range(120)))  # MARK:eval
    if mode == "save" and k == 2:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, sys.argv[3])
"""


def case_long_change():
    script = write_script("long_change.py", LONG_CHANGE)
    eval_line = marks(script)["eval"]
    a, out_a = record("long_plain", ["plain", "8"], script)
    b, out_b = record("long_eval", ["eval", "8"], script)
    check([l for l in out_b.splitlines() if not l.startswith("eval")] == out_a.splitlines(),
          f"precondition: the evaluation changes no loss ({out_a!r} vs {out_b!r})")
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    hunks = d.get("structural_changes") or []
    inserted = hunks[0]["b_range"][1] - hunks[0]["b_range"][0] if hunks else 0
    line, _ = line_of(d.get("b"))
    check(d.get("kind") == "structure" and d.get("a") is None and line in (eval_line - 1, eval_line)
          and inserted > 2048,
          f"B's evaluation is one insertion of its thousands of ops at line {eval_line} (got "
          f"{d.get('kind')}, {d.get('detail')}, B at line {line}, {hunks[:2]})")
    check(d.get("values_same") is not None and (d.get("growth") or {}).get("outputs_differ") == 0,
          f"as is every op paired around it, however large the block (got {d.get('growth')})")
    ck = os.path.join(WORK, "long_change.pt")
    a, out_a = record("long_save", ["save", "120", ck], script)
    b, out_b = record("long_resume", ["resume", "120", ck], script)
    check(out_a.splitlines()[3:] == out_b.splitlines(),
          f"precondition: the resumed run goes on as A does ({out_a!r} vs {out_b!r})")
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    start = r.get("aligned_start") or {}
    check((start.get("a") or {}).get("step") == 3 and (start.get("b") or {}).get("step") == 0,
          f"the resumption is found: A's step 3 with B's step 0 (got {start})")
    check(d.get("kind") == "structure" and d.get("values_same") is not None
          and d.get("value_after_structure") is None,
          f"past B's start-up of thousands of ops every paired op has the same values (got "
          f"{d.get('detail')}, {d.get('value_after_structure')}, {d.get('growth')})")
    results = subprocess.run([TDBG, "diff", "--results", a, b], stdout=subprocess.DEVNULL).returncode
    check(results == 0, f"diff --results exits 0: the same results (got {results})")


EXTRA_STEP = """
import sys, torch, torch.nn as nn
torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
g = torch.Generator().manual_seed(1)
X = torch.randn(32, 8, generator=g)
Y = torch.randn(32, 2, generator=g)
for step in range(6):
    x = X[(step * 8) % 32:(step * 8) % 32 + 8]
    y = Y[(step * 8) % 32:(step * 8) % 32 + 8]
    opt.zero_grad()
    out = model(x)  # MARK:forward
    loss = (out - y).pow(2).mean()
    loss.backward()
    opt.step()
    if sys.argv[1] == "twice":
        opt.step()  # MARK:extra
    print(step, f"{loss.item():.6f}")
"""



MICRO_BATCHES = """
import sys, torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
torch.set_num_threads(1)
class Block(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 2, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d, 32), nn.GELU(), nn.Linear(32, d))
    def forward(self, x):
        h = self.ln(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.ff(x)
model = nn.Sequential(nn.Embedding(20, 16), Block(), Block(), nn.Linear(16, 20))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
data = torch.randint(0, 20, (32, 9), generator=torch.Generator().manual_seed(1))
micro = int(sys.argv[1])
scale = micro if sys.argv[2] == "split" else 1
for step in range(3):
    batch = data[step * 8:step * 8 + 8]
    opt.zero_grad()
    for m in range(micro):
        if sys.argv[2] == "split":
            part = batch[m * 8 // micro:(m + 1) * 8 // micro]
        else:
            part = torch.randint(0, 20, (8, 9))  # MARK:more
        logits = model(part[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 20), part[:, 1:].reshape(-1)) / scale  # MARK:loss
        loss.backward()
    opt.step()
    print(step, f"{loss.item():.6f}")
"""


def case_micro_batches():
    # The batch split into two micro-batches: no op of the forward and backward has the same
    # shapes in both runs, and a step holds more ops than the first alignment window. The
    # first micro-batch pairs with A's batch op for op (replaced: other shapes), the optimizer's
    # ops pair again, and the first value difference is the loss's division by 2.
    script = write_script("micro_batches.py", MICRO_BATCHES)
    m = marks(script)
    a, _ = record("micro_a", ["1", "split"], script)
    b, _ = record("micro_b", ["2", "split"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    changes = d.get("structural_changes") or []
    first = changes[0] if changes else {}
    size = max((first.get("a_range") or [0, 0])[1] - (first.get("a_range") or [0, 0])[0],
               (first.get("b_range") or [0, 0])[1] - (first.get("b_range") or [0, 0])[0])
    check(rc == 1 and d.get("kind") == "structure" and 0 < size < 64,
          f"a few ops of other shapes replaced first, not the rest of the runs (got {d.get('kind')}, "
          f"first change {first.get('a_range')} {first.get('b_range')})")
    v = d.get("value_after_structure") or {}
    line, _ = line_of(v.get("a"))
    check((v.get("a") or {}).get("op") == "aten::div" and line == m["loss"]
          and v.get("cause") == "structure",
          f"the loss's division by the micro-batch count (got {(v.get('a') or {}).get('op')} at "
          f"{line}, {v.get('cause')}, {v.get('detail')})")
    # Yet it is the same training: the optimizer's updates agree at rounding level, and the
    # headline says so (not only the loss's halved value).
    u = d.get("updates") or {}
    check(u.get("steps") == 3 and u.get("rounding") is True and 0 < u.get("largest", 1) < 1e-5,
          f"the optimizer's updates agree at rounding level in all 3 steps: {u}")
    check("the optimizer's updates agree at rounding level" in diff_text(a, b).splitlines()[0],
          "the headline says the updates agree")
    check("the change computes the same training up to rounding: in another order of float operations"
          in diff_text(a, b), "the updates line says it is the same training up to rounding")
    # Two micro-batches of the same shape per step against one: B's second micro-batch is
    # inserted in each step. A cheaper script pairs it with A's next step and calls A's
    # optimizer step removed, drifting a step further apart every two steps.
    a, _ = record("more_a", ["1", "more"], script)
    b, _ = record("more_b", ["2", "more"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    # The text lists a side's first 8 ops of a change and says how many more it has.
    first = (d.get("structural_changes") or [{}])[0]
    change = next((l for l in diff_text(a, b).splitlines() if l.lstrip().startswith("change:")), "")
    more_b = (first.get("b_range") or [0, 0])[1] - (first.get("b_range") or [0, 0])[0] - len(first.get("inserted") or [])
    check(more_b > 0 and change.endswith(f"({more_b} more)"),
          f"the first change's line says {more_b} more ops of B (got {change!r})")
    changes = d.get("structural_changes") or []
    line, _ = line_of(d.get("b"))
    kinds = [c.get("type") for c in changes]
    check(d.get("kind") == "structure" and line == m["more"] and kinds == ["inserted"] * 3,
          f"a micro-batch inserted in B in each of the 3 steps, from line {m['more']} (got "
          f"{d.get('kind')}, line {line}, {kinds})")
    check(d.get("value_after_structure") is not None,
          f"the optimizer's first update differs after the change (got {d.get('detail')})")
    # Other data in each micro-batch: the updates differ from the first step on.
    u = d.get("updates") or {}
    beyond = u.get("beyond") or {}
    check(u.get("rounding") is False and beyond.get("step") == 0 and beyond.get("relative", 0) > 1e-5,
          f"the optimizer's updates differ beyond rounding from step 0: {u}")
    # Four against one: three micro-batches inserted per step, more ops than the first
    # alignment window holds.
    c, _ = record("more_c", ["4", "more"], script)
    rc, r = diff(a, c)
    d = r["first_divergence"] or {}
    kinds = [x.get("type") for x in d.get("structural_changes") or []]
    line, _ = line_of(d.get("b"))
    check(d.get("kind") == "structure" and line == m["more"] and kinds[:2] == ["inserted"] * 2,
          f"three micro-batches inserted in B in each step, from line {m['more']} (got "
          f"{d.get('kind')}, line {line}, {kinds}, {d.get('detail')})")


BLOCK_ORDER = """
import sys, torch, torch.nn as nn
torch.manual_seed(0)
torch.set_num_threads(1)
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 8)
    def forward(self, x):
        return x + self.fc(self.ln(x))  # MARK:block
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 8)
        self.blocks = nn.ModuleList([Block(), Block()])
    def forward(self, x):
        h = self.inp(x)
        for b in (self.blocks if sys.argv[1] == "forward" else self.blocks[::-1]):
            h = b(h)
        return h
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8)
for step in range(2):
    h = model(x)
    loss = h.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, f"{loss.item():.6f}")
"""


def case_block_order():
    # The same blocks run in the other order: every op is the same op, in another module,
    # reading other weights. No op is inserted or removed, so the first difference is a value
    # (the first block's linear reads the other block's weight), not a structural change
    # with none listed.
    script = write_script("block_order.py", BLOCK_ORDER)
    m = marks(script)
    a, _ = record("order_a", ["forward"], script)
    b, _ = record("order_b", ["reversed"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    line, _ = line_of(d.get("a"))
    check(rc == 1 and d.get("kind") == "value" and line == m["block"]
          and not d.get("structural_changes"),
          f"a value difference at line {m['block']}, no structural change (got {d.get('kind')}, "
          f"line {line}, {d.get('detail')}, {len(d.get('structural_changes') or [])} change(s))")

def case_extra_step():
    # optimizer.step() called twice: B's step numbers run ahead, and the next forward still
    # reads weights the extra step changed.
    script = write_script("extra_step.py", EXTRA_STEP)
    m = marks(script)
    a, _ = record("extra_step_a", ["once"], script)
    b, _ = record("extra_step_b", ["twice"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    line, _ = line_of(d.get("b"))
    check(d.get("kind") == "structure" and line == m["extra"],
          f"the extra step's ops inserted at line {m['extra']} (got {d.get('kind')}, line {line})")
    extra = d.get("extra_steps") or {}
    check(extra.get("run") == "B" and extra.get("steps_b", 0) > extra.get("steps_a", 0)
          and "B calls optimizer.step() once more here" in (d.get("detail") or ""),
          f"said as a step more in B (got {extra}, {d.get('detail')!r})")
    v = d.get("value_after_structure") or {}
    line, _ = line_of(v.get("a"))
    check(v.get("cause") == "structure" and (v.get("a") or {}).get("op") == "aten::linear"
          and line == m["forward"] and v["a"]["step"] + 1 == v["b"]["step"],
          f"the next forward's linear reads other weights (got {v.get('cause')}, "
          f"{(v.get('a') or {}).get('op')} at {line}, {v.get('detail')})")


# A block with dropout, run plainly ("plain") or checkpointed without keeping the generator's
# state ("norng"): its backward recomputes the dropout with other random numbers.
CHECKPOINT_DROPOUT = r"""
import sys, torch
from torch.utils.checkpoint import checkpoint
torch.manual_seed(0)
block = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.3), torch.nn.Linear(16, 8))
x = torch.randn(4, 8, requires_grad=True)  # (reentrant checkpointing needs an input that does)
if sys.argv[1] == "plain":
    h = block(x)
else:
    h = checkpoint(block, x, preserve_rng_state=False)  # MARK:ckpt
h.pow(2).mean().backward()
print(block[0].weight.grad.sum().item())
"""


# Two blocks and a head under plain SGD; with "cut", the first block is checkpointed the
# reentrant way over an input that does not require grad: its parameters get no gradient.
CHECKPOINT_CUT = r"""
import sys, torch
from torch.utils.checkpoint import checkpoint
torch.manual_seed(0)
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([torch.nn.Linear(16, 16) for _ in range(2)])
        self.head = torch.nn.Linear(16, 1)
    def forward(self, x):
        for k, b in enumerate(self.blocks):
            x = torch.tanh(checkpoint(b, x) if sys.argv[1] == "cut" and k == 0 else b(x))
        return self.head(x)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(32, 16), torch.randn(32, 1)
for step in range(3):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
"""


def case_checkpoint_rng():
    # A checkpointed block with dropout, its RNG state not preserved in B: the recompute in
    # backward draws other masks, named as checkpointing's.
    script = write_script("checkpoint_rng.py", CHECKPOINT_RNG)
    a, b, _, _ = pair("checkpoint_rng", ["1"], ["0"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("cause") == "rng" and "preserve_rng_state=True" in d.get("detail", ""),
          f"the recompute's draw is named (got {d.get('cause')}: {d.get('detail')})")
    # The non-reentrant form recomputes inside the backward node that unpacks a saved tensor.
    a, b, _, _ = pair("checkpoint_rng_nr", ["1", "nr"], ["0", "nr"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("cause") == "rng" and "preserve_rng_state=True" in d.get("detail", ""),
          f"non-reentrant: the recompute's draw is named (got {d.get('cause')}: {d.get('detail')})")


CHECKPOINT_RNG = r'''
import sys, torch
from torch.utils.checkpoint import checkpoint
torch.manual_seed(0)
block = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5))
head = torch.nn.Linear(8, 1)
x = torch.randn(4, 8, requires_grad=True)
h = checkpoint(block, x, use_reentrant=len(sys.argv) < 3, preserve_rng_state=sys.argv[1] == "1")
torch.randn(3)  # a draw between the forward and the backward
head(h).sum().backward()
'''


def case_activation_checkpoint():
    # Checkpointing adds the recomputed forwards, not other values: the recomputed block is one
    # insertion (not paired op by op with a look-alike inside it), and no paired op differs.
    script = write_script("activation_checkpoint.py", ACTIVATION_CHECKPOINT)
    a, out_a = record("actck_a", ["0"], script)
    b, out_b = record("actck_b", ["1"], script)
    check(out_a == out_b, f"precondition: the same losses ({out_a!r} vs {out_b!r})")
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    changes = d.get("structural_changes") or []
    first = changes[0] if changes else {}
    check(r.get("results") == "same", f"the JSON says what --results exits on (got {r.get('results')})")
    check(rc == 1 and d.get("kind") == "structure" and d.get("value_after_structure") is None
          and (d.get("values_same") or {}).get("pairs", 0) > 0,
          f"structure only, every paired value the same (got {d.get('cause')}, "
          f"{d.get('value_after_structure')}, {d.get('values_same')})")
    check(first.get("type") == "inserted" and first["b_range"][1] - first["b_range"][0] >= 8
          and [o["op"] for o in first.get("inserted", [])][:3] ==
          ["aten::linear", "aten::t", "aten::addmm"],
          f"the first change is a whole recomputed forward: {first}")
    text = subprocess.run([TDBG, "diff", a, b], stdout=subprocess.PIPE, text=True).stdout
    check("the change added or moved work, not results" in text, f"and says so: {text[:600]!r}")
    check("the values stay the same to the end (work, not results)" in text.splitlines()[0],
          f"on its first line: {text.splitlines()[0]!r}")
    # A reentrant checkpoint of the first block, whose input does not require grad, cuts its
    # parameters off from their gradient: the headline says that B's optimizer never updates
    # what the block reads, beyond the CheckpointFunction inserted.
    script_c = write_script("checkpoint_cut.py", CHECKPOINT_CUT)
    plain, _ = record("actck_whole", ["plain"], script_c)
    cut, _ = record("actck_cut", ["cut"], script_c)
    rc, r = diff(plain, cut)
    d = r["first_divergence"] or {}
    left = d.get("not_updated") or {}
    check(rc == 1 and left.get("run") == "B" and left.get("missing") == 2 and
          (left.get("updated_a"), left.get("updated_b")) == (6, 4) and
          [p.get("module") for p in left.get("params", [])] == ["Net.blocks.0", "Net.blocks.0"],
          f"B's optimizer leaves the first block's weight and bias (got {left})")
    text = subprocess.run([TDBG, "diff", plain, cut], stdout=subprocess.PIPE, text=True).stdout
    check("; B's optimizer leaves 2 parameter(s) the other's updates (in Net.blocks.0): no gradient "
          "reaches them in B" in text.splitlines()[0], f"on the headline: {text.splitlines()[0]!r}")
    check("  params:   in step 0 A's optimizer updates 6 tensor(s), B's 4; B's leaves float32[16x16] made "
          "by aten::uniform_" in text, f"and in the body: {text[:1500]!r}")
    # A layer B has and A does not is no parameter A left.
    script_e = write_script("checkpoint_extra.py", CHECKPOINT_CUT.replace(
        "self.head = torch.nn.Linear(16, 1)", "self.head = torch.nn.Sequential(*([torch.nn.Linear(16, 16)] if "
        "sys.argv[1] == 'extra' else []), torch.nn.Linear(16, 1))"))
    extra, _ = record("actck_extra", ["extra"], script_e)
    whole_e, _ = record("actck_whole_e", ["plain"], script_e)
    rc, r = diff(whole_e, extra)
    check(rc == 1 and (r["first_divergence"] or {}).get("not_updated") is None,
          f"a layer B only has is not one A left (got {(r['first_divergence'] or {}).get('not_updated')})")
    # Without the generator's state kept, the recomputed dropout draws other numbers: said so,
    # with the line of the checkpointed call for B's recomputed op.
    script_d = write_script("checkpoint_dropout.py", CHECKPOINT_DROPOUT)
    p_a, _ = record("actck_plain", ["plain"], script_d)
    p_b, _ = record("actck_norng", ["norng"], script_d)
    rc, r = diff(p_a, p_b)
    after = (r.get("first_divergence") or {}).get("value_after_structure") or {}
    ck_line = marks(script_d)["ckpt"]
    check("B's aten::dropout was computed again in backward (activation checkpointing)" in
          after.get("detail", "") and f"checkpoint_dropout.py:{ck_line} (forward op's line)" in
          after.get("detail", ""),
          f"the recomputed dropout is named, at the checkpoint's line {ck_line}: {after.get('detail')}")
    # Reentrant checkpointing also nests each block's forward in a CheckpointFunction that A
    # never ran: the ops inside are still compared, and are the same.
    c, out_c = record("actck_c", ["2"], script)
    check(out_a == out_c, f"precondition: the same losses ({out_a!r} vs {out_c!r})")
    rc, r = diff(a, c)
    d = r["first_divergence"] or {}
    same = (d.get("values_same") or {}).get("pairs", 0)
    growth = d.get("growth") or {}
    check(rc == 1 and d.get("kind") == "structure" and d.get("value_after_structure") is None
          and same > growth.get("structural_ops", 0),
          f"reentrant: every paired value the same, most ops paired (got {d.get('detail')}, "
          f"{same} pairs, {growth.get('structural_ops')} ops in changes)")


# A scripted module whose activation scales by a number on the operator's left: TorchScript
# runs its builtin mul(float, Tensor) for it, inlined without the line that called it.
SCRIPT_BUILTIN = r"""
import sys, torch
torch.manual_seed(0)
class Act(torch.nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha
    def forward(self, x):
        return torch.where(x > 0, x, self.alpha * (torch.exp(x) - 1))
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.act, self.l2 = torch.nn.Linear(8, 16), Act(float(sys.argv[1])), torch.nn.Linear(16, 1)
    def forward(self, x):
        return self.l2(self.act(self.l1(x)))    # MARK:call
model = torch.jit.script(Net())
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(32, 8), torch.randn(32, 1)
for step in range(2):
    opt.zero_grad(); torch.nn.functional.mse_loss(model(x), y).backward(); opt.step()
"""


def case_script_builtin():
    # The alpha differs inside TorchScript's builtin mul: the where line is the scripted
    # caller's, and it says that TorchScript kept no line for the builtin's call, and which.
    script = write_script("script_builtin.py", SCRIPT_BUILTIN)
    mark = marks(script)
    a, _ = record("script_builtin_a", ["1.0"], script)
    b, _ = record("script_builtin_b", ["1.05"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    line, _ = line_of(d.get("a"))
    check(rc == 1 and d.get("cause") == "arguments" and d.get("a", {}).get("op") == "aten::mul" and
          line == mark["call"], f"the mul, at the scripted call's line {mark['call']} (got {d.get('cause')} "
          f"{d.get('a', {}).get('op')} {line})")
    text = subprocess.run([TDBG, "diff", a, b], stdout=subprocess.PIPE, text=True).stdout
    check("(in TorchScript's builtin mul (in forward), whose line there TorchScript does not keep: "
          "an operator with a number on its left" in text, f"the where line says so: {text[:800]!r}")


# A gradient clip whose threshold no norm reaches, before optimizer.step() in A and after it in
# B (the order bug): the same values in these runs.
CLIP_UNREACHED = r"""
import sys, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt = torch.optim.AdamW(m.parameters(), lr=0.05)
x, y = torch.randn(16, 8), torch.randn(16, 1)
for step in range(3):
    opt.zero_grad()
    out = m(x)
    if sys.argv[1] == "crash":
        out = out.clone()  # more work, the same values
    torch.nn.functional.mse_loss(out, y).backward()
    if sys.argv[1] == "before":
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1e6)    # MARK:clip
    if sys.argv[1] == "crash":
        raise RuntimeError("stopped before the clip")
    opt.step()
    if sys.argv[1] == "after":
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1e6)
"""


def case_clip_unreached():
    # The moved clip multiplies by 1: "work, not results", and a line that says which op wrote
    # its values back as they were, so that the order bug is not read as harmless.
    script = write_script("clip_unreached.py", CLIP_UNREACHED)
    mark = marks(script)
    a, _ = record("clip_before", ["before"], script)
    b, _ = record("clip_after", ["after"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    kept = (d.get("values_same") or {}).get("unchanged_write") or {}
    line, _ = line_of(kept.get("op") and {"source": {"line": int(kept["op"]["source"].split(":")[-1]),
                                                       "file": kept["op"]["source"].split(":")[0]}})
    check(rc == 1 and kept.get("op", {}).get("op") == "aten::mul_" and line == mark["clip"],
          f"the clip's mul_ by 1 is named, at line {mark['clip']} (got {kept})")
    check("  unchanged: A's aten::mul_ (seq " in diff_text(a, b),
          "the text says it wrote its values back as they were")
    # B copies the output (the same values), then stops before the clip: A's ops after B's
    # end, its clip among them, are no change of B's that wrote values back as they were.
    b, _ = record_ending("clip_crash", ["crash"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and "unchanged_write" not in (d.get("values_same") or {})
          and "unchanged:" not in diff_text(a, b),
          f"no unchanged write where B ended (got {d.get('values_same')})")


def case_child_script():
    # A training script that runs another one (an evaluation) in a subprocess: the bundle
    # carries both scripts, though the report's window holds ops of the parent alone.
    child = write_script("child_eval.py", "import torch\nprint(torch.ones(3).mul(2).sum().item())\n")
    parent = write_script("parent_train.py", "import subprocess, sys, torch\n"
                          "torch.ones(2).add(1)\n"
                          f"subprocess.run([sys.executable, {os.path.basename(child)!r}], check=True)\n")
    out = os.path.join(WORK, "child_script")
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([TDBG, "record", "-o", out, "--", PYTHON, os.path.basename(parent)], cwd=WORK,
                   check=True, stdout=subprocess.DEVNULL)
    bundle = os.path.join(WORK, "child_script.tar.gz")
    subprocess.run([TDBG, "bundle", "-o", bundle, out], check=True, stdout=subprocess.DEVNULL)
    with tarfile.open(bundle) as tar:
        names = [os.path.basename(n) for n in tar.getnames() if "/sources/" in n]
    check(sorted(names) == ["child_eval.py", "parent_train.py"],
          f"the bundle holds both scripts (got {names})")


# Two steps of training, then (argv[1] "wait") a pause until killed.
STILL_RUNNING = r"""
import sys, time, torch
torch.manual_seed(0)
w = torch.randn(4, 4, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
for step in range(2):
    opt.zero_grad()
    (w @ w).sum().backward()
    opt.step()
if sys.argv[1] == "wait":
    print("ready", flush=True)
    time.sleep(60)
w.tanh().sum()
"""


def case_still_running():
    # A run diffed while it is being recorded is not called killed or crashed.
    script = write_script("still_running.py", STILL_RUNNING)
    a, _ = record("running_a", ["go"], script)
    out = os.path.join(WORK, "running_b")
    shutil.rmtree(out, ignore_errors=True)
    proc = subprocess.Popen([TDBG, "record", "--flush-ms", "50", "-o", out, "--", PYTHON, script,
                             "wait"], stdout=subprocess.PIPE, text=True)
    try:
        check(proc.stdout.readline() == "ready\n", "precondition: B is waiting")
        time.sleep(1.0)  # 20 flush periods
        rc, r = diff(a, out)
        d = r["first_divergence"] or {}
        notes = " ".join(r.get("notes", []))
        check(rc == 1 and "is still running" in d.get("detail", "") and "killed" not in notes
              and "is still running" in notes,
              f"B is said to be still running (got {d.get('cause')}: {d.get('detail')} / {notes})")
        headline = diff_text(a, out).splitlines()[0]
        check(d.get("still_recording") == "B" and
              headline.startswith("B is still being recorded, read up to its last commit at ")
              and "ended early" not in headline,
              f"the headline says B is still being recorded, not that it ended: {headline!r}")
        p = subprocess.run([TDBG, "nan", "--json", out], stdout=subprocess.PIPE, text=True)
        nan_notes = " ".join(json.loads(p.stdout).get("notes", []))
        check(p.returncode == 0 and "is still running" in nan_notes,
              f"tdbg nan says it looked at what B committed so far (got {p.returncode}: {nan_notes})")
    finally:
        proc.kill()
        proc.wait()


BUSY = r"""
import time, torch
torch.manual_seed(0)
w = torch.randn(4, 4, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.01)
print("ready", flush=True)
end = time.time() + 60
while time.time() < end:
    opt.zero_grad()
    (w @ w).tanh().sum().backward()
    opt.step()
"""


def case_bundle_live():
    # A run bundled while it records ops: its report, diff and databases are read at one
    # moment (they agree), and the bundle says it was still recording, not that it crashed.
    script = write_script("busy.py", BUSY)
    out = os.path.join(WORK, "busy")
    shutil.rmtree(out, ignore_errors=True)
    proc = subprocess.Popen([TDBG, "record", "--flush-ms", "20", "-o", out, "--", PYTHON, script],
                            stdout=subprocess.PIPE, text=True)
    try:
        check(proc.stdout.readline() == "ready\n", "precondition: the program runs")
        time.sleep(1.0)
        bundle = os.path.join(WORK, "busy.tar.gz")
        p = subprocess.run([TDBG, "bundle", "--keep-all", out, "-o", bundle],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        proc.kill()
        proc.wait()
    m = re.search(r"(\d+) of (\d+) ops kept", p.stdout)
    check(p.returncode == 0 and m and m.group(1) == m.group(2),
          f"every op counted is kept, no more (got {p.returncode}: {p.stdout.strip()})")
    check("was still recording" in p.stderr, f"bundle notes the live process (got {p.stderr!r})")
    ex = os.path.join(WORK, "busy_ex")
    shutil.rmtree(ex, ignore_errors=True)
    subprocess.run([TDBG, "bundle", "--extract", bundle, "-o", ex], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(ex, "busy", "README.md")) as f:
        readme = f.read()
    check("Still recording when bundled" in readme, "the README says the run was still recording")
    shown = subprocess.run([TDBG, "show", os.path.join(ex, "busy", "runs", "a"), "--limit", "1"],
                           stdout=subprocess.PIPE, text=True).stdout
    head = shown.splitlines()[:2]
    check(m and f": {m.group(2)} ops," in head[0],
          f"the bundled database holds the ops counted (got {head[0]!r})")
    check("still recording when it was bundled" in " ".join(head) and "killed" not in " ".join(head),
          f"the bundled run is not called killed (got {head})")


def case_thread_pool():
    # A ThreadPoolExecutor hands tasks to whichever thread is free: thread k of A and of B hold
    # different tasks in identical runs. Compared as one set they are identical; a changed task
    # is still a divergence.
    rc, r = pool_runs("thread_pool", "ThreadPoolExecutor(2)", "0.4")
    check(rc == 1 and r["status"] == "diverged", f"a changed task diverges (exit {rc})")


KV_INSERT = r'''
import sys, torch
torch.manual_seed(0)
proj = torch.nn.Linear(8, 8)
with torch.no_grad():
    cache = torch.empty(2, 5, 8)          # filled one position at a time
    x = torch.randn(2, 8)
    for t in range(5):
        cache[:, t] = proj(x)
        if sys.argv[1] == "scale" and t == 3:
            cache[:, t] *= 1.001          # B only: an op A never runs writes into the cache
        x = (cache[:, :t + 1] * x[:, None, :]).sum(1).tanh()   # reads it through a slice
print(round(float(x.sum()), 4))
'''


def case_kv_insert():
    # An op that only B runs writes into a half-filled `empty` cache, which the program then
    # reads through a slice: the value difference that follows is the inserted op's doing
    # (structure), never "data from outside".
    script = write_script("kv_insert.py", KV_INSERT)
    a, _ = record("kv_insert_a", ["plain"], script)
    b, _ = record("kv_insert_b", ["scale"], script)
    rc, r = diff(a, b)
    d = r.get("first_divergence") or {}
    after = d.get("value_after_structure") or {}
    check(rc == 1 and d.get("kind") == "structure" and after.get("cause") == "structure",
          f"the value difference after the inserted write is structure: {d.get('kind')}, "
          f"{after.get('cause')} ({after.get('detail')})")


THREAD_ORDER = r'''
import sys, threading, torch
torch.ones(1).neg()  # the main thread's op
go_first = threading.Event()
done = threading.Event()
def job(k, wait):
    if wait:
        done.wait()
    torch.full((4,), float(k)).mul(k + 1).sum()
    if not wait:
        done.set()
# Created in the same order in both runs; which runs its first op first is the argument.
t1 = threading.Thread(target=job, args=(1, sys.argv[1] == "second"))
t2 = threading.Thread(target=job, args=(2, sys.argv[1] != "second"))
t1.start(); t2.start(); t1.join(); t2.join()
print("done")
'''


def case_thread_order():
    # Two threads created in the same order whose first ops come in the opposite order: the
    # same thread must be compared with itself (pairing by first op made this a divergence).
    script = write_script("thread_order.py", THREAD_ORDER)
    a, _ = record("thread_order_a", ["first"], script)
    b, _ = record("thread_order_b", ["second"], script)
    rc, r = diff(a, b)
    check(rc == 0 and r["status"] == "identical",
          f"identical (exit {rc}: {(r.get('first_divergence') or {}).get('detail')})")


def case_nan():
    a, _ = record("nan", ["--inf-step", "2"])
    p = subprocess.run([TDBG, "nan", "--json", a], stdout=subprocess.PIPE, text=True)
    check(p.returncode == 1, f"exit status 1 (got {p.returncode})")
    f = json.loads(p.stdout)["first_nonfinite"]
    check(f is not None, "a non-finite value is found")
    if f is None:
        return
    line, file = line_of(f)
    check(f["step"] == 2, f"at step 2 (got {f['step']})")
    check(file == "train.py" and line == MARK["inf"], f"at train.py:{MARK['inf']} (got {file}:{line})")
    # `loss * 1e39`: the Inf appears in aten::mul or, innermost, in the op inside it that
    # casts the float64 scalar 1e39 to float32 (torch 1.13 records aten::to/copy_ there).
    ops = [f["op"]] + [e["op"] for e in f.get("enclosing", [])]
    check("aten::mul" in ops, f"op aten::mul or an op inside it (got {ops})")
    check(all(i["finite"] is not False for i in f["inputs"]), "its inputs were finite")
    text = subprocess.run([TDBG, "nan", a], stdout=subprocess.PIPE, text=True).stdout
    print(text)
    # The JSON holds the cause the text says, for scripts (t147 F2).
    cause = f.get("cause") or ""
    check(cause and f"  cause:    {cause[:40]}" in text and "beyond float32's largest value" in cause,
          f"the JSON's cause is the text's (got {cause!r})")
    # From a later step: nothing new starts there, but what step 2 started is carried on: not
    # finite (exit 1). Past the last step there is nothing to look in (exit 2).
    p = subprocess.run([TDBG, "nan", "--json", "--from-step", "3", a], stdout=subprocess.PIPE,
                       text=True)
    r = json.loads(p.stdout)
    check(p.returncode == 1 and r["status"] == "carried" and r["carried"] > 0 and r["skipped"] > 0,
          f"--from-step 3: carried from step 2 (got {p.returncode}: {p.stdout[:300]})")
    text = subprocess.run([TDBG, "nan", "--from-step", "3", a], stdout=subprocess.PIPE, text=True).stdout
    check(f"{r['skipped']} start(s) before step 3 were skipped" in text and
          "run without --from-step for the first of them" in text,
          f"the text says how many starts were skipped before the step: {text!r}")
    p = subprocess.run([TDBG, "nan", "--from-step", "1000", a], stdout=subprocess.PIPE, text=True)
    check(p.returncode == 2 and p.stdout.startswith("unchecked:") and "no op is at step 1000" in p.stdout,
          f"--from-step past the end: unchecked (got {p.returncode}: {p.stdout!r})")
    b, _ = record("finite", [])
    p = subprocess.run([TDBG, "nan", b], stdout=subprocess.PIPE, text=True)
    check(p.returncode == 0, "a finite run exits 0")


def first_nonfinite(name, args):
    """Records train.py with `args`, runs `tdbg nan` on it and checks it finds something at
    step 2; returns the finding and its (line, file), or None."""
    a, _ = record(name, args)
    p = subprocess.run([TDBG, "nan", "--json", a], stdout=subprocess.PIPE, text=True)
    check(p.returncode == 1, f"exit status 1 (got {p.returncode})")
    f = json.loads(p.stdout)["first_nonfinite"]
    check(f is not None, "a non-finite value is found")
    if f is None:
        return None
    print(subprocess.run([TDBG, "nan", a], stdout=subprocess.PIPE, text=True).stdout)
    check(f["step"] == 2, f"at step 2 (got {f['step']})")
    return f, line_of(f)


def case_nan_data():
    # NaN in the NumPy data of step 2: no op makes it, it comes in. Reported where it enters
    # (the op that takes the batch in), not at the kernel that first computes with it (mkldnn's
    # convolution restrides its own buffer with a nested as_strided_), and never as finite.
    found = first_nonfinite("nan_data", ["--conv", "--bad-data", "2:nan"])
    if found is None:
        return
    f, (line, file) = found
    check(f.get("entered") == "input", f"entered through an input (got {f.get('entered')})")
    check(file == "train.py" and line == MARK["data"], f"at train.py:{MARK['data']} (got {file}:{line})")
    check(any(i["finite"] is False for i in f["inputs"]), "an input is reported non-finite")
    # Under --hash outputs the batch's NumPy values are not hashed: the op that takes them in
    # only moves them, so the NaN came in with them (not "made here").
    run, _ = record("nan_data_outputs", ["--conv", "--bad-data", "2:nan"], options=["--hash", "outputs"])
    text = subprocess.run([TDBG, "nan", run], stdout=subprocess.PIPE, text=True).stdout
    check("cause:    NaN entered here: " in text and "only moves values" in text and "made here" not in text,
          f"--hash outputs: the NaN entered with data from outside (got {text[:600]!r})")


def case_nan_backward_inf():
    # An Inf in NumPy data that the forward squashes (tanh) stays finite there; the weight's
    # gradient multiplies it by 0 in backward: NaN from Inf, through the slice addmm saved,
    # whose values the backward mm's record does not hold.
    script = write_script("nan_backward_inf.py", NAN_BACKWARD_INF)
    run, _ = record("nan_backward_inf", [], script)
    text = subprocess.run([TDBG, "nan", "--nan-only", run], stdout=subprocess.PIPE, text=True).stdout
    check("cause:    made here: NaN from inputs that hold Inf" in text and "saved for backward by aten::addmm" in text
          and "made here, or brought in" not in text,
          f"NaN from an Inf the forward saved (got {text[:700]!r})")


NAN_BACKWARD_INF = r'''
import numpy, torch
torch.manual_seed(0)
layer = torch.nn.Linear(3, 2)
raw = torch.from_numpy(numpy.array([[1.0, numpy.inf, 0.5, 7.0], [0.2, 0.1, 0.3, 7.0]], dtype=numpy.float32))
loss = torch.tanh(layer(raw[:, :3])).sum()
loss.backward()
'''


def case_nan_worker_window():
    # A worker's transform makes the NaN (0/0 of a flat sample, batch of step 3); a --steps
    # window leaves the workers out: the NaN enters the main process at step 3, and the cause
    # says the process forked children that the window left out.
    script = write_script("nan_worker_window.py", NAN_WORKER_WINDOW)
    run, _ = record("nan_worker_window", [], script, options=["--steps", "2:5"])
    check(len(glob.glob(os.path.join(run, "*.sqlite"))) == 1, "the window holds the main process alone")
    text = subprocess.run([TDBG, "nan", run], stdout=subprocess.PIPE, text=True).stdout
    check("NaN entered here" in text and "this process forked 2 child process(es) (first in step 0)" in text
          and "record without --steps to see the workers' ops" in text,
          f"the workers the window left out are named (got {text[:900]!r})")


NAN_WORKER_WINDOW = r'''
import torch
from torch.utils.data import Dataset, DataLoader
class Flat(Dataset):
    def __init__(self):
        self.x = torch.randn(24, 4, generator=torch.Generator().manual_seed(0))
        self.x[13] = 0.5  # flat: its std is 0
    def __len__(self): return 24
    def __getitem__(self, i):
        s = self.x[i]
        return (s - s.mean()) / s.std()
if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for xb in DataLoader(Flat(), batch_size=4, num_workers=2):
        loss = model(xb).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
'''


def case_nan_tensor_list():
    # NaN in a Python list made a tensor by torch.tensor, recorded with --hash outputs (which
    # hashes only what ops make): entered with that data, never uninitialized memory; with
    # --hash all, at the op that takes it in.
    script = write_script("nan_tensor_list.py", NAN_TENSOR_LIST)
    mark = marks(script)
    for mode, says in (("outputs", f"data torch.tensor took from Python at nan_tensor_list.py:{mark['data']}"),
                       ("all", "NaN entered here: an input holds NaN that no recorded op produced")):
        run, _ = record("nan_tensor_list_" + mode, [], script, options=["--hash", mode])
        text = subprocess.run([TDBG, "nan", run], stdout=subprocess.PIPE, text=True).stdout
        check(says in text and "uninitialized" not in text, f"--hash {mode}: {says!r} (got {text[:500]!r})")


NAN_TENSOR_LIST = r'''
import torch
torch.manual_seed(0)
layer = torch.nn.Linear(3, 1)
x = torch.tensor([[1.0, float("nan"), 2.0]])  # MARK:data
print(layer(x).sum().item())
'''


def case_nan_bits():
    # A NaN's bits written through an int32 view of a float tensor that torch.tensor filled
    # whole: named as that write, never as uninitialized memory.
    script = write_script("nan_bits.py", NAN_BITS)
    mark = marks(script)
    run, _ = record("nan_bits", [], script)
    text = subprocess.run([TDBG, "nan", run], stdout=subprocess.PIPE, text=True).stdout
    check(f"wrote into it through a view of another dtype (int32)" in text and f"nan_bits.py:{mark['bits']}" in text
          and "uninitialized" not in text, f"the int32 write is named (got {text[:600]!r})")
    # The other way: int32 bits filled in, then viewed as float32 and read.
    run, _ = record("nan_bits_view", ["view"], script)
    text = subprocess.run([TDBG, "nan", run], stdout=subprocess.PIPE, text=True).stdout
    check("a view of int32 data as float32" in text and f"nan_bits.py:{mark['view']}" in text,
          f"the view of int32 bits is named (got {text[:600]!r})")


NAN_BITS = r'''
import sys, torch
if len(sys.argv) > 1:
    x = torch.empty(2, 3).view(torch.int32).fill_(0x7FC00000).view(torch.float32)  # MARK:view
    print(torch.nn.functional.linear(x, torch.ones(1, 3)).tolist())
    sys.exit()
a = torch.tensor([1.0, 2.0, 3.0])
a.view(torch.int32)[0] = 0x7FC00000  # MARK:bits
print((a * 2).tolist())
'''


# A corrupt sample read by a DataLoader worker: NaN comes into the main process in a batch,
# with no op of its own.
NAN_WORKER = r"""
import torch, numpy as np
from torch.utils.data import Dataset, DataLoader
class DS(Dataset):
    def __init__(self):
        self.x = np.random.default_rng(0).standard_normal((32, 4)).astype(np.float32)
        self.x[21, 1] = np.nan
    def __len__(self): return 32
    def __getitem__(self, i):
        return torch.from_numpy(self.x[i]) * 1.0  # MARK:getitem
if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    for xb in DataLoader(DS(), batch_size=8, num_workers=2):
        model(xb).sum().backward()  # MARK:forward
"""


def case_nan_worker():
    # The NaN starts in the worker; the main process's start is listed under it. With every
    # input hashed, that start says NaN entered from an input; with --hash outputs, whose
    # inputs carry no values, it says it may have come in through one, not only "made there";
    # both name the worker whose batch brought it.
    script = write_script("nan_worker.py", NAN_WORKER)
    batch = ": a batch from its DataLoader worker 0/2 (process 1), where NaN starts, most likely"
    for options, says in (((), ", NaN entered from an input" + batch),
                          (("--hash", "outputs"),
                           ", made there, or brought in by an input whose values were not recorded" + batch)):
        run, _ = record("nan_worker" + "_".join(options), [], script, options=options)
        text = subprocess.run([TDBG, "nan", run], stdout=subprocess.PIPE, text=True).stdout
        also = [l for l in text.splitlines() if l.lstrip().startswith("also:")]
        check("in DataLoader worker" in text.splitlines()[0] and len(also) == 1 and also[0].endswith(says),
              f"{' '.join(options) or 'default'}: the worker's op, and the main process's start ending "
              f"{says!r} (got {text[:200]!r}, {also})")
    # With an optimizer, --from-step 1: the workers count no steps, and the worker's start,
    # which loaded the batch ahead of the step that read it, is skipped; the answer says so
    # (t147 F3: nothing said).
    stepped = write_script("nan_worker_steps.py", NAN_WORKER.replace(
        "    model = torch.nn.Linear(4, 1)\n",
        "    model = torch.nn.Linear(4, 1)\n    opt = torch.optim.SGD(model.parameters(), lr=0.0)\n").replace(
        "        model(xb).sum().backward()  # MARK:forward\n",
        "        opt.zero_grad(); model(xb).sum().backward(); opt.step()  # MARK:forward\n"))
    run, _ = record("nan_worker_steps", [], stepped)
    text = subprocess.run([TDBG, "nan", "--from-step", "1", run], stdout=subprocess.PIPE, text=True).stdout
    check(re.search(r"\d+ start\(s\) before step 1 were skipped in processes that hold none from it",
                    text) is not None,
          f"--from-step 1: the worker's skipped start is said (got {text[:600]!r})")


UNINITIALIZED = r'''
import sys, torch
w = torch.ones(8)
for step in range(4):
    if step == 2:
        buf = torch.empty(8)  # MARK:empty
        # Filled outside torch's ops, as garbage would be: no recorded op writes it.
        buf.numpy()[:] = float(sys.argv[1])
    else:
        buf = torch.zeros(8)
    data = torch.tensor([float(sys.argv[2])] * 8)  # MARK:tensor
    print(step, (w * buf + data).sum().item())  # MARK:read
'''


def case_uninitialized():
    # Memory an `empty` returned, read by an op with nothing recorded written into it: NaN or a
    # difference there is named as that memory, with the `empty`'s line, not as data from
    # outside (the line to fix is the `empty`). torch.tensor's data, copied into an `empty`
    # and handed over by lift_fresh, stays data from outside.
    script = write_script("uninitialized.py", UNINITIALIZED)
    mark = marks(script)
    nan_run, _ = record("uninit_nan", ["nan", "1"], script)
    p = subprocess.run([TDBG, "nan", "--json", nan_run], stdout=subprocess.PIPE, text=True)
    f = json.loads(p.stdout).get("first_nonfinite") or {}
    check(p.returncode == 1 and f.get("entered") == "uninitialized",
          f"NaN entered from uninitialized memory (exit {p.returncode}, entered {f.get('entered')})")
    line, file = line_of(f)
    check(line == mark["read"], f"where it is read, line {mark['read']} (got {file}:{line})")
    makers = [i.get("uninitialized_from") for i in f.get("inputs", []) if i.get("uninitialized_from")]
    check(len(makers) == 1 and isinstance(makers[0], dict) and makers[0].get("op") == "aten::empty"
          and makers[0].get("source", "").endswith(f"uninitialized.py:{mark['empty']}"),
          f"the input names the aten::empty at line {mark['empty']} (got {makers})")
    text = subprocess.run([TDBG, "nan", nan_run], stdout=subprocess.PIPE, text=True).stdout
    check("from uninitialized memory" in text, f"the cause says so: {text[:400]!r}")
    a, _ = record("uninit_a", ["1", "1"], script)
    b, _ = record("uninit_b", ["2", "1"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("cause") == "external_input"
          and "returned uninitialized" in d.get("detail", "")
          and (d.get("uninitialized_from") or {}).get("source", "").endswith(f"uninitialized.py:{mark['empty']}"),
          f"diff names the empty (exit {rc}: {d.get('cause')}: {d.get('detail')})")
    c, _ = record("uninit_c", ["1", "3"], script)
    rc, r = diff(a, c)
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("cause") == "external_input"
          and "no recorded op produced it" in d.get("detail", ""),
          f"torch.tensor data is data from outside (exit {rc}: {d.get('detail')})")
    line, file = line_of(d.get("a"))
    check(line == mark["tensor"], f"at the torch.tensor line {mark['tensor']} (got {file}:{line})")
    # Read by an op that writes it in place (`acc += g` into a torch.empty_like): the same
    # memory, named with its empty's line, not a --hash outputs gap of a run hashed with all.
    script = write_script("uninitialized_inplace.py", UNINITIALIZED_INPLACE)
    mark = marks(script)
    a, b, _, _ = pair("uninit_inplace", ["1"], ["2"], script)
    # tdbg nan on garbage that is NaN, read unhashed by the in-place add: entered from the
    # empty_like's memory, not "made here".
    nan_run, _ = record("uninit_inplace_nan", ["nan"], script)
    text = subprocess.run([TDBG, "nan", nan_run], stdout=subprocess.PIPE, text=True).stdout
    check("NaN entered here from uninitialized memory" in text and f"uninitialized_inplace.py:{mark['acc']}" in text,
          f"nan: the in-place read of NaN garbage entered from the empty_like (got {text[:500]!r})")
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    line, file = line_of(d.get("a"))
    detail = d.get("detail", "")
    check(rc == 1 and d.get("cause") == "external_input" and line == mark["inplace"] and
          "returned uninitialized" in detail and f"uninitialized_inplace.py:{mark['acc']}" in detail
          and "--hash" not in detail,
          f"the in-place read names the empty_like (exit {rc}: {d.get('cause')} line {line}: {detail})")
    # zeros replaced by empty: after the change, B's input is named as the empty's memory.
    script = write_script("uninitialized_zeros.py", UNINITIALIZED_ZEROS)
    a, b, _, _ = pair("uninit_zeros", ["zeros"], ["empty"], script)
    rc, r = diff(a, b)
    after = (r["first_divergence"] or {}).get("value_after_structure") or {}
    check(rc == 1 and "B: read from memory that aten::empty at" in after.get("detail", "") and
          "returned uninitialized" in after.get("detail", ""),
          f"zeros made empty: B's memory named (got {rc}: {after.get('detail')})")
    # Written in part (padding): the rows' copies matched, the rest is the empty's memory. The
    # same command line in both runs, as for real garbage (the value comes from the
    # environment here): the cause is that memory alone, with no guess at unseeded generators.
    script = write_script("uninitialized_pad.py", UNINITIALIZED_PAD)
    mark = marks(script)
    runs = []
    for name, garbage in (("uninit_pad_a", "1"), ("uninit_pad_b", "2")):
        os.environ["GARBAGE"] = garbage
        runs.append(record(name, [], script)[0])
    del os.environ["GARBAGE"]
    rc, r = diff(*runs)
    d = r["first_divergence"] or {}
    line, file = line_of(d.get("a"))
    detail = d.get("detail", "")
    check(rc == 1 and line == mark["read"] and "wrote only a part of it" in detail and
          f"uninitialized_pad.py:{mark['pad']}" in detail and d.get("uninitialized_memory") is True
          and "Python's random" not in detail and "PYTHONHASHSEED" not in detail,
          f"the padding names the empty, and nothing else (exit {rc}: {d.get('cause')} line {line}: {detail})")


# torch.zeros, or torch.empty in its place (argv[1] "empty"), whose memory holds 3 (set outside
# torch's ops, as garbage would be).
UNINITIALIZED_ZEROS = r'''
import sys, torch
w = torch.ones(8)
if sys.argv[1] == "empty":
    buf = torch.empty(8)
    buf.numpy()[:] = 3.0
else:
    buf = torch.zeros(8)
print((w * buf).sum().item())
'''


# A padding buffer from torch.empty with only its rows' starts written by ops; the rest holds
# what the memory held (here set outside torch's ops to argv[1], as garbage would be).
UNINITIALIZED_PAD = r'''
import os, torch
torch.manual_seed(0)
seqs = [torch.randn(n, 4) for n in (2, 5, 3)]
pad = torch.empty(3, 5, 4)  # MARK:pad
pad.numpy()[:] = float(os.environ["GARBAGE"])  # as garbage would be: no recorded op writes it
for i, s in enumerate(seqs):
    pad[i, :len(s)] = s
print(torch.nn.functional.linear(pad, torch.ones(2, 4)).sum().item())  # MARK:read
'''


UNINITIALIZED_INPLACE = r'''
import sys, torch
g = torch.ones(8)
acc = torch.empty_like(g)  # MARK:acc
acc.numpy()[:] = float(sys.argv[1])  # as garbage would be: no recorded op writes it
acc += g  # MARK:inplace
print(acc.sum().item())
'''


GENERATOR = r'''
import sys, torch
torch.manual_seed(0)
mode = sys.argv[1]
print(torch.rand(4, generator=torch.default_generator if mode == "default" else None).sum().item())
own = torch.Generator().manual_seed(0) if mode == "own" else None
ds = torch.utils.data.TensorDataset(torch.arange(16.))
for (x,) in torch.utils.data.DataLoader(ds, batch_size=4, shuffle=True, generator=own):  # MARK:loader
    print(x.sum().item())
g = torch.Generator().manual_seed(1)
for step in range(3):
    if mode == "perm_default":
        perm = torch.randperm(16)  # MARK:perm_default
    else:
        perm = torch.randperm(16, generator=g)  # MARK:perm_own
    print(perm[:4].tolist())
'''


def case_generator():
    # An explicit generator is recorded as an argument: the default one reads as None (the
    # same numbers), a generator of its own is named, and passing it in one run only is the
    # answer, at the DataLoader's seed draw.
    script = write_script("generator.py", GENERATOR)
    mark = marks(script)
    none, out_none = record("gen_none", ["none"], script)
    default, out_default = record("gen_default", ["default"], script)
    own, _ = record("gen_own", ["own"], script)
    check(out_none == out_default, "precondition: the default generator draws what None does")
    rc, r = diff(none, default)
    check(rc == 0 and r.get("status") == "identical", f"default generator = None: identical (got {r.get('status')})")
    rc, r = diff(none, own)
    d = r["first_divergence"] or {}
    arg = d.get("argument") or {}
    line, file = line_of(d.get("a"))
    check(rc == 1 and d.get("cause") == "arguments" and arg.get("name") == "generator"
          and arg.get("value_a") == "None" and arg.get("value_b") == "torch.Generator(device='cpu')"
          and line == mark["loader"],
          f"its own generator is the argument that differs, at line {mark['loader']} "
          f"(got {d.get('cause')}, {arg}, {file}:{line})")
    # randperm with a generator in A, without in B (another overload, one argument fewer): the
    # argument is named, and the calls on the two branches are not said to have moved.
    perm_default, _ = record("gen_perm_default", ["perm_default"], script)
    rc, r = diff(none, perm_default)
    d = r["first_divergence"] or {}
    check(rc == 1 and "generator=torch.Generator(device='cpu') in A only: B draws from the default generator"
          in d.get("detail", "") and not d.get("reordered"),
          f"the generator passed in A only is named, no reorder (got {d.get('detail')})")


SHARED_GENERATOR = r'''
import sys, threading, torch
# Two threads take turns drawing random numbers, in the order argv[1] gives ("aab": a twice,
# then b), from the default generator (shared) or each from its own (argv[3] "own").
order, seed, gens = sys.argv[1], int(sys.argv[2]), sys.argv[3]
torch.manual_seed(seed)
torch.set_num_threads(1)
turns = order * 13
state = {"i": 0}
cond = threading.Condition()
out = {}
def work(name, gen):
    acc = torch.zeros(8)
    while True:
        with cond:
            cond.wait_for(lambda: state["i"] >= len(turns) or turns[state["i"]] == name)
            if state["i"] >= len(turns):
                break
            acc = torch.tanh(acc + torch.randn(8, generator=gen))  # MARK:draw
            state["i"] += 1
            cond.notify_all()
    out[name] = acc.sum().item()
own = {n: torch.Generator().manual_seed(s) for n, s in (("a", 1), ("b", 2))}
threads = [threading.Thread(target=work, args=(n, own[n] if gens == "own" else None))
           for n in "ab"]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(sorted(out.items()))
'''


def case_shared_generator():
    # Threads drawing from one generator in another order: the same seed, other numbers per
    # op. Diff says so from the generator states both runs recorded, and not for another seed.
    script = write_script("shared_generator.py", SHARED_GENERATOR)
    mark = marks(script)
    ab, out_ab = record("shared_ab", ["aab", "0", "shared"], script)
    ba, out_ba = record("shared_ba", ["aba", "0", "shared"], script)
    other_seed, _ = record("shared_seed1", ["aab", "1", "shared"], script)
    check(out_ab != out_ba, "precondition: the order of draws changes the numbers")
    rc, r = diff(ab, ba)
    d = r["first_divergence"] or {}
    line, _ = line_of(d.get("a"))
    check(rc == 1 and d.get("cause") == "rng" and d.get("shared_generator") is True
          and "threads that share a random generator" in d.get("detail", "")
          and line == mark["draw"],
          f"another order of draws: a shared generator, at line {mark['draw']} "
          f"(got {d.get('cause')}, {d.get('shared_generator')}, line {line}: {d.get('detail')})")
    rc, r = diff(ab, other_seed)
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("cause") == "rng" and not d.get("shared_generator")
          and "share" not in d.get("detail", ""),
          f"another seed: no shared generator said (got {d.get('cause')}: {d.get('detail')})")


EVAL_MODE = r'''
import sys, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                        torch.nn.Linear(8, 1))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
if sys.argv[1] == "eval":
    m.eval()                                      # a validation's eval() left on
for step in range(3):
    x = torch.randn(16, 4)
    loss = m(x).pow(2).mean()                     # MARK:forward
    opt.zero_grad(); loss.backward(); opt.step()
'''


def case_eval_mode():
    # BatchNorm in eval mode in B: its running-statistics update (num_batches_tracked += 1)
    # is missing, a structural change; the headline says which module runs in which mode.
    script = write_script("eval_mode.py", EVAL_MODE)
    mark = marks(script)
    a, _ = record("eval_mode_train", ["train"], script)
    b, _ = record("eval_mode_eval", ["eval"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    v = d.get("value_after_structure") or {}
    arg = v.get("argument") or {}
    check(rc == 1 and d.get("kind") == "structure" and arg.get("name") == "training" and arg.get("module_mode"),
          f"a structural change, then the training argument (got {d.get('kind')}, {arg})")
    check("Sequential.1 runs in training mode in A and in eval mode in B" in d.get("detail", ""),
          f"the headline names the module and its modes (got {d.get('detail')!r})")
    line, _ = line_of(d.get("a"))
    check(line == mark["forward"], f"at the forward's line {mark['forward']} (got {line})")


AUTOCAST = r'''
import sys, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step in range(2):
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=sys.argv[1] == "bf16"):
        loss = torch.nn.functional.cross_entropy(m(x), y)          # MARK:forward
    opt.zero_grad(); loss.backward(); opt.step()
'''


def case_autocast():
    # Mixed precision in one run only: the first op computes in bfloat16 in B, said as such.
    script = write_script("autocast.py", AUTOCAST)
    mark = marks(script)
    a, _ = record("autocast_off", ["off"], script)
    b, _ = record("autocast_bf16", ["bf16"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    line, _ = line_of(d.get("a"))
    check(rc == 1 and d.get("kind") == "structure" and line == mark["forward"]
          and "B computes in 16 bits here: autocast covers this op in one run only" in d.get("detail", ""),
          f"autocast in B, at line {mark['forward']} (got {d.get('kind')}, {line}, {d.get('detail')!r})")


EDITED = r'''
import torch
x = torch.ones(3)
print((x * 2).sum().item())
'''


def case_edited_source():
    # The script edited after it ran: the lines diff, show and the bundle point into are not
    # the code that ran, and each says so. Before the edit, nothing is said.
    script = write_script("edited.py", EDITED)
    a, _ = record("edited_a", [], script)
    b, _ = record("edited_b", [], script)
    note = "edited.py changed since the recording"
    rc, r = diff(a, b)
    check(rc == 0 and not any(note in n for n in r.get("warnings", [])), f"unchanged: no warning ({r.get('warnings')})")
    with open(script, "a") as f:
        f.write("# edited after the recording\n")
    rc, r = diff(a, b)
    check(rc == 0 and any(note in n for n in r.get("warnings", [])), f"edited: diff warns ({r.get('warnings')})")
    text = diff_text(a, b).splitlines()
    check(len(text) > 1 and note in text[1], f"under the headline: {text[:3]}")
    p = subprocess.run([TDBG, "show", a], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(p.returncode == 0 and note in p.stderr, f"and show: {p.stderr!r}")
    bundle = os.path.join(WORK, "edited.tar.gz")
    subprocess.run([TDBG, "bundle", a, b, "-o", bundle], check=True, stdout=subprocess.DEVNULL)
    with tarfile.open(bundle) as t:
        readme = next(t.extractfile(m).read().decode() for m in t.getmembers() if m.name.endswith("README.md"))
    check("edited.py` changed after it was recorded" in readme, f"and the bundle's README: {readme[:800]!r}")
    check(any("of A and of B" in n for n in r.get("warnings", [])), f"of both runs: {r.get('warnings')}")
    # A run of the edited file: A ran the other version, B the one there now.
    c, _ = record("edited_c", [], script)
    rc, r = diff(a, c)
    check(any("changed since the recording of A:" in n and "for A" in n and
              "A and B ran different versions of it" in n for n in r.get("warnings", [])),
          f"only A's lines are not the code there now: {r.get('warnings')}")


# The same file in both runs, another branch: the scheduler steps before the optimizer with
# an argument, after it without (the lines of the two opt.step() calls differ by 2, as an
# edit that moved them would make them differ).
CODE_PATH = r'''
import sys, torch
torch.manual_seed(0)
w = torch.nn.Parameter(torch.ones(4, 4))
opt = torch.optim.SGD([w], lr=0.1)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / 3)
for step in range(3):
    opt.zero_grad(); (w * w).sum().backward()
    if len(sys.argv) > 1:
        sched.step()
        opt.step()  # MARK:first
    else:
        opt.step()  # MARK:after
        sched.step()
'''


def case_code_path():
    # Two lines of one unedited file: another code path, never "an edit that moved the lines".
    script = write_script("code_path.py", CODE_PATH)
    a, b, _, _ = pair("code_path", [], ["first"], script)
    rc, r = diff(a, b)
    d = r.get("first_divergence") or {}
    text = diff_text(a, b)
    check(rc == 1 and d.get("same_source_file") is True and "another code path)" in text and
          "from an edit" not in text, f"another code path of the same file: {text[:700]!r}")


# Tensors summed in the order a set of their names iterates: Python's str hash, and so the
# order, changes in every run unless PYTHONHASHSEED is set.
HASH_SEED = r'''
import torch
names = {"alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"}
ws = {n: torch.ones(1 + k) for k, n in enumerate(sorted(names))}
print(" ".join(names))
print(sum(ws[n].pow(2).sum() for n in names).item())
'''


def case_hash_seed():
    # A set of strings iterated in another order in each run, with PYTHONHASHSEED unset in
    # both: the reordering is named, and so is the unset seed.
    script = write_script("hash_seed.py", HASH_SEED)
    os.environ.pop("PYTHONHASHSEED", None)
    a, out_a = record("hash_seed_a", [], script)
    for attempt in range(8):  # until the two runs' orders differ (1 in 40,320 they do not)
        b, out_b = record("hash_seed_b", [], script)
        if out_b != out_a:
            break
    rc, r = diff(a, b)
    d = r.get("first_divergence") or {}
    check(rc == 1 and d.get("reordered") and "PYTHONHASHSEED is unset in both runs" in d.get("detail", ""),
          f"reordered by the unset hash seed (got {rc}: {d.get('detail')})")


# One param group per parameter, with an lr by its place in a list made from a set of names:
# the groups' settings are the same in both runs, and which parameter each holds is not.
GROUPS_FROM_SET = r'''
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
named = dict(model.named_parameters())
params = [named[n] for n in {n for n in named}]
opt = torch.optim.SGD([{"params": [p], "lr": 0.1 * 0.5 ** k} for k, p in enumerate(params)])
x = torch.randn(16, 4)
for step in range(2):
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()
print([n for n in {n for n in named}])
'''


def case_groups_from_set():
    # The parameter the first differing update writes is in another param group in each run:
    # said so, with the groups' order, not blamed on the optimizer's state.
    script = write_script("groups_from_set.py", GROUPS_FROM_SET)
    runs, outs = [], set()
    for seed in range(1, 40):  # two hash seeds that order the names differently
        os.environ["PYTHONHASHSEED"] = str(seed)
        run, out = record(f"groups_from_set_{len(runs)}", [], script)
        if out not in outs:
            outs.add(out)
            runs.append(run)
        if len(runs) == 2:
            break
    os.environ.pop("PYTHONHASHSEED")
    check(len(runs) == 2, "precondition: two hash seeds order the set differently")
    text = diff_text(*runs)
    check("param groups' settings are the same in both runs, this parameter is in another group in "
          "each run, so the groups were given the parameters in another order" in text and
          "the optimizer's state" not in text, f"the groups' order is named: {text[:3000]!r}")


# Two layers of one shape whose weights the optimizer is given in another order (with an
# argument): its first update reads another layer's weight, made at the same line.
SAME_SHAPE_ORDER = r'''
import sys, torch
torch.manual_seed(0)
layers = [torch.nn.Linear(4, 4, bias=False) for _ in range(2)]
params = [l.weight for l in (layers[::-1] if len(sys.argv) > 1 else layers)]
opt = torch.optim.SGD([{"params": [p], "lr": 0.1 / (k + 1)} for k, p in enumerate(params)])
x = torch.randn(3, 4)
opt.zero_grad()
layers[1](layers[0](x)).pow(2).sum().backward()
opt.step()
'''


def case_same_shape_order():
    # The optimizer's parameters of one shape in another order: the update reads another
    # layer's weight, made by the same line; said to be the optimizer's order, with the unset
    # PYTHONHASHSEED (a set of names is the usual way to get there).
    script = write_script("same_shape_order.py", SAME_SHAPE_ORDER)
    os.environ.pop("PYTHONHASHSEED", None)
    a, b, _, _ = pair("same_shape_order", [], ["reversed"], script)
    rc, r = diff(a, b)
    detail = (r["first_divergence"] or {}).get("detail", "")
    check(rc == 1 and "inside optimizer.step(), the parameters are updated in another order" in detail
          and "PYTHONHASHSEED is unset in both runs" in detail,
          f"the optimizer's order and the hash seed are named (got {detail!r})")


# An embedding, frozen (requires_grad False) when argv[1] is "freeze".
FROZEN = r'''
import sys, torch
torch.manual_seed(0)
emb, ln, head = torch.nn.Embedding(20, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 1)
if len(sys.argv) > 1:
    emb.weight.requires_grad_(False)
params = [p for m in (emb, ln, head) for p in m.parameters() if p.requires_grad]
opt = torch.optim.SGD(params, lr=0.1)
ids = torch.randint(0, 20, (8,))
for step in range(2):
    opt.zero_grad()
    head(ln(emb(ids))).pow(2).mean().backward()
    opt.step()
'''


def case_frozen():
    # A layer frozen in one run only: the backward op that no longer computes a gradient for
    # its input says so in plain words.
    script = write_script("frozen.py", FROZEN)
    a, b, _, _ = pair("frozen", [], ["freeze"], script)
    rc, r = diff(a, b)
    d = r.get("first_divergence") or {}
    check(rc == 1 and "B computes no gradient for this backward op's input" in d.get("detail", "")
          and "requires_grad_(False)" in d.get("detail", ""),
          f"the frozen parameter is named as such (got {rc}: {d.get('detail')})")
    # Unfrozen at step 3 in B only: the head's AddmmBackward0 computes its input's gradient
    # first (`t` of its weight, `mm`), ops inserted, not the same `t` with other values in
    # "another layout"; and A's optimizer leaves the backbone's 4 tensors from that step on,
    # not only where the runs start (t145 F1).
    script = write_script("unfreeze.py", UNFREEZE)
    a, b, _, _ = pair("unfreeze", ["-1"], ["3"], script)
    rc, r = diff(a, b)
    d = r.get("first_divergence") or {}
    changes = d.get("structural_changes") or [{}]
    first = [c.get("op") for c in changes[0].get("inserted", [])]
    left = d.get("not_updated") or {}
    check(rc == 1 and d.get("kind") == "structure" and (d.get("b") or {}).get("step") == 3
          and first == ["aten::t", "aten::mm"] and left.get("run") == "A" and left.get("missing") == 4,
          f"unfrozen at step 3: t and mm inserted in B's AddmmBackward0, A leaves 4 tensors (got "
          f"{d.get('kind')} at step {(d.get('b') or {}).get('step')}: {d.get('cause')}, inserted "
          f"{first}, not_updated {left.get('run')} {left.get('missing')})")
    # Trained, then frozen at step 3 in B only (gradients set to None): B's optimizer leaves
    # the 4 tensors it updated before (t146 F4).
    a, b, _, _ = pair("freeze", ["-1", "freeze"], ["3", "freeze"], script)
    rc, r = diff(a, b)
    d = r.get("first_divergence") or {}
    left = d.get("not_updated") or {}
    check(rc == 1 and d.get("kind") == "structure" and left.get("run") == "B"
          and left.get("missing") == 4 and left.get("step") == 3,
          f"frozen at step 3: B leaves 4 tensors (got {d.get('kind')}: {d.get('detail')}, "
          f"not_updated {left})")


# A backbone frozen for warm-up, unfrozen at step argv[1] (-1: never); its parameters are in
# the optimizer from the start.
UNFREEZE = r'''
import sys, torch
torch.manual_seed(0)
backbone = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                               torch.nn.ReLU())
head = torch.nn.Linear(32, 3)
frozen = len(sys.argv) < 3  # argv[2] "freeze": trained from the start, frozen at argv[1]
backbone.requires_grad_(not frozen)
opt = torch.optim.AdamW([{"params": backbone.parameters(), "lr": 1e-4},
                         {"params": head.parameters(), "lr": 1e-3}])
data = torch.randn(192, 12)
target = data[:, :3].argmax(1)
for step in range(6):
    if step == int(sys.argv[1]):
        backbone.requires_grad_(frozen)  # MARK:plant
    x, y = data[step * 32:(step + 1) * 32], target[step * 32:(step + 1) * 32]
    loss = torch.nn.functional.cross_entropy(head(backbone(x)), y)
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
'''


# A small conv net: its first layer left out of the optimizer's parameters, or the model moved
# to channels_last (which replaces each conv weight's data, `param.data = ...`, by an op whose
# output has the same values).
PARAMS_LEFT = r'''
import sys, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.AdaptiveAvgPool2d(1),
                            torch.nn.Flatten(), torch.nn.Linear(4, 2))
x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 2, (4,))
mode = sys.argv[1]
if mode == "channels_last":
    model = model.to(memory_format=torch.channels_last)
    x = x.contiguous(memory_format=torch.channels_last)
if mode == "double":
    model, x = model.double(), x.double()
params = list(model[2:].parameters()) if mode == "left_out" else model.parameters()
opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
for step in range(2):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
'''


def case_params_left():
    # A layer left out of the optimizer: backward computes its gradients in both runs, so the
    # headline says the optimizer was not given them, not that no gradient reaches them.
    script = write_script("params_left.py", PARAMS_LEFT)
    a, _ = record("params_left_all", ["all"], script)
    b, _ = record("params_left_out", ["left_out"], script)
    rc, r = diff(a, b)
    left = (r["first_divergence"] or {}).get("not_updated") or {}
    check(rc == 1 and left.get("run") == "B" and left.get("missing") == 2 and
          left.get("skipped_by_optimizer") is True and r.get("results") == "differ",
          f"B's optimizer skips the first conv's weight and bias (got {left}, {r.get('results')})")
    head = diff_text(a, b).splitlines()[0]
    check("backward ran the same ops in both runs, so B's optimizer was not given them" in head and
          "no gradient reaches" not in head, f"and the headline says why: {head!r}")
    # channels_last updates every parameter in both runs: none is said to be left.
    c, _ = record("params_left_cl", ["channels_last"], script)
    rc, r = diff(a, c)
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("kind") == "structure" and d.get("not_updated") is None,
          f"no parameter is left by a run whose weights' data was replaced (got {d.get('not_updated')})")
    # The updates agree up to rounding, for the reason the change gives: the layout, or (the
    # model in float64) the precision.
    check("the same training up to rounding: with tensors in another memory layout" in diff_text(a, c),
          "the layout is why only rounding differs")
    f64, _ = record("params_left_double", ["double"], script)
    check("the same training up to rounding: in another precision, which the conversion above brings"
          in diff_text(a, f64), "the precision is why only rounding differs")
    # B's loss made NaN at step 1: from there its parameters of one shape are all NaN, equal
    # values, yet each is updated; none is said to be left (t150 F2).
    poisoned = write_script("params_nan.py", r'''
import sys, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(4, 8), torch.randn(4, 8)
for step in range(4):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    if len(sys.argv) > 1 and step == 1:
        loss = loss * float("nan")
    loss.backward()
    opt.step()
''')
    pa, pb, _, _ = pair("params_nan", [], ["nan"], poisoned)
    rc, r = diff(pa, pb, "--full")
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("kind") == "structure" and d.get("not_updated") is None,
          f"no parameter left by a run gone NaN (got {d.get('not_updated')})")
    # And the run gone NaN is said to be, with tdbg nan to find why (t150 F3).
    line = [l for l in diff_text(pa, pb).splitlines() if l.startswith("  non-finite:")]
    check(line and "B's values hold NaN or Inf from step 1 (first " in line[0]
          and "`tdbg nan` on B" in line[0], f"B's NaN named: {line}")


# Batches made on the main thread, or (with an argument) on a loader thread the main thread
# waits for, as a C++ DataLoader's worker threads make them.
OPS_ELSEWHERE = r'''
import sys, threading, torch
def load(out):
    for k in range(3):
        out.append(torch.arange(6.).mul(k).add(1))
batches = []
if len(sys.argv) > 1:
    t = threading.Thread(target=load, args=(batches,)); t.start(); t.join()
else:
    load(batches)
w = torch.ones(6)
for b in batches:
    w = w * b
print(w.sum().item())
'''


def case_ops_elsewhere():
    # Work moved to a thread only B has while B's main thread goes on: not "removed".
    script = write_script("ops_elsewhere.py", OPS_ELSEWHERE)
    a, b, _, _ = pair("ops_elsewhere", [], ["thread"], script)
    rc, r = diff(a, b)
    d = r.get("first_divergence") or {}
    moved = d.get("ops_elsewhere") or {}
    check(rc == 1 and moved.get("side") == "A" and "run in B on thread" in d.get("detail", ""),
          f"the ops moved to B's loader thread (got {rc}: {d.get('detail')})")


FUNCTION_CONSTANT = r'''
import sys, torch
torch.manual_seed(0)
class Leaky(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        slope = torch.tensor([float(sys.argv[1])])  # MARK:constant
        ctx.save_for_backward(x, slope)
        return torch.where(x > 0, x, x * slope)
    @staticmethod
    def backward(ctx, g):
        x, slope = ctx.saved_tensors
        return torch.where(x > 0, g, g * slope)
lin = torch.nn.Linear(6, 8)
x = torch.randn(16, 6)
for step in range(2):
    loss = Leaky.apply(lin(x)).square().mean()
    loss.backward()
    print(step, loss.item())
'''


def case_function_constant():
    # A constant made from Python data inside a custom autograd Function's forward (reentrant
    # checkpointing is one too) is the program's data, not a kernel's buffer: another value is
    # data from outside at its line, not "nondeterministic" at the op that reads it.
    script = write_script("function_constant.py", FUNCTION_CONSTANT)
    mark = marks(script)
    a, _ = record("fnconst_a", ["0.5"], script)
    b, _ = record("fnconst_b", ["0.25"], script)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    line, file = line_of(d.get("a"))
    check(rc == 1 and d.get("cause") == "external_input" and line == mark["constant"],
          f"external_input at line {mark['constant']} (exit {rc}: {d.get('cause')} at {file}:{line})")
    rc, r = diff(a, record("fnconst_a2", ["0.5"], script)[0])
    check(rc == 0 and r.get("status") == "identical", f"and the same run twice is identical (got {r.get('status')})")


UNINITIALIZED_PART = r'''
import sys, torch
w = torch.full((8,), 2.0)
buf = torch.empty(8)  # MARK:empty
# The garbage, written outside torch's ops: NaN, and huge values the product overflows on.
buf.numpy()[:] = float('nan')
buf.numpy()[6:] = 3e38
if sys.argv[1] == "part":
    buf[:4] = torch.ones(4)  # MARK:part
print((w * buf).sum().item())  # MARK:read
'''


def case_uninitialized_part():
    # The NaN of an `empty`'s memory that an op wrote only a part of (`buf[:4] = ...` where
    # torch.zeros was meant) enters where it is read: not "finite" because a recorded op wrote
    # into the tensor, and not an Inf "made" by the product that overflows on the garbage.
    script = write_script("uninitialized_part.py", UNINITIALIZED_PART)
    mark = marks(script)
    for mode in ("part", "whole"):
        run, _ = record("uninit_" + mode, [mode], script)
        p = subprocess.run([TDBG, "nan", "--json", run], stdout=subprocess.PIPE, text=True)
        f = json.loads(p.stdout).get("first_nonfinite") or {}
        line, file = line_of(f)
        check(p.returncode == 1 and f.get("entered") == "uninitialized" and line == mark["read"],
              f"{mode}: NaN entered from uninitialized memory at line {mark['read']} "
              f"(exit {p.returncode}, entered {f.get('entered')}, {file}:{line})")
        makers = [i.get("uninitialized_from") for i in f.get("inputs", []) if i.get("uninitialized_from")]
        check(len(makers) == 1 and makers[0].get("source", "").endswith(f":{mark['empty']}"),
              f"{mode}: the input names the aten::empty at line {mark['empty']} (got {makers})")
        writers = [i.get("written_in_part_by") for i in f.get("inputs", []) if i.get("written_in_part_by")]
        if mode == "part":
            check(len(writers) == 1 and writers[0].get("op") == "aten::copy_"
                  and writers[0].get("source", "").endswith(f":{mark['part']}"),
                  f"and the op that wrote a part of it, at line {mark['part']} (got {writers})")
            text = subprocess.run([TDBG, "nan", run], stdout=subprocess.PIPE, text=True).stdout
            check("wrote finite values into a part of it only" in text, f"the cause says so: {text[:600]!r}")
        else:
            check(not writers, f"no op wrote into it (got {writers})")


STALE_NAN = r'''
import numpy as np, torch
torch.manual_seed(0)
w = torch.randn(4, 1)
for step in range(4):
    x = torch.randn(8, 4)  # MARK:made
    if step == 2:
        x.numpy()[3, 1] = np.nan  # written behind torch's back: no op, no version bump
    print(step, (x @ w).sum().item())  # MARK:read
'''


def case_stale_nan():
    # NaN written into a tensor's memory through NumPy after it was hashed: the recording
    # cannot see the write, and the matmul that reads it cannot make NaN from the finite values
    # recorded for its inputs. `tdbg nan` says an input changed outside torch's ops, naming the
    # candidates, not that the matmul made NaN.
    script = write_script("stale_nan.py", STALE_NAN)
    mark = marks(script)
    run, _ = record("stale_nan", [], script)
    p = subprocess.run([TDBG, "nan", "--json", run], stdout=subprocess.PIPE, text=True)
    f = json.loads(p.stdout).get("first_nonfinite") or {}
    line, file = line_of(f)
    check(p.returncode == 1 and line == mark["read"] and f.get("step") == 0,
          f"the NaN shows at the read, line {mark['read']} (exit {p.returncode}, {file}:{line})")
    stale = f.get("stale_inputs") or []
    check(any((s.get("producer") or {}).get("op") == "aten::randn"
              and (s["producer"].get("source") or "").endswith(f"stale_nan.py:{mark['made']}")
              for s in stale),
          f"the randn'd input is named as possibly changed since (got {stale})")
    text = subprocess.run([TDBG, "nan", run], stdout=subprocess.PIPE, text=True).stdout
    check("changed outside torch's ops" in text and "made here" not in text,
          f"the cause says so: {text[:500]!r}")


def case_inf_conv():
    # Inf beside -Inf in the data (Inf that comes in is not a start: masks) meets a convolution,
    # which makes NaN out of them: the start is the convolution's kernel op, not the op nested
    # in it that only restrides the kernel's output buffer.
    found = first_nonfinite("inf_conv", ["--conv", "--bad-data", "2:inf"])
    if found is None:
        return
    f, (line, file) = found
    check(f.get("entered") is None, f"made by an op, not entered (got {f.get('entered')})")
    check(file == "train.py" and line == MARK["conv"], f"at train.py:{MARK['conv']} (got {file}:{line})")
    check("conv" in f["op"], f"a convolution op (got {f['op']})")
    check(f["tensor"]["summary"]["nan"] > 0, "its output holds NaN")


def case_nan_mask():
    # An attention mask full of -inf is Inf on purpose: not reported, and a real overflow
    # after it still is.
    a, _ = record("nan_mask_finite", ["--mask"])
    p = subprocess.run([TDBG, "nan", "--json", a], stdout=subprocess.PIPE, text=True)
    check(p.returncode == 0, f"a masked but finite run exits 0 (got {p.returncode}: {p.stdout})")
    # Its bundle does not say that it holds no Inf.
    bundle = os.path.join(WORK, "nan_mask_finite.tar.gz")
    subprocess.run([TDBG, "bundle", "-o", bundle, a], check=True, stdout=subprocess.DEVNULL)
    with tarfile.open(bundle) as tar:
        readme = next(tar.extractfile(m).read().decode() for m in tar.getmembers()
                      if m.name.endswith("README.md"))
    check("holds no NaN or Inf" not in readme and "No NaN or Inf starts in run A" in readme,
          f"the bundle README says no NaN or Inf starts, not that there is none (got {readme!r})")
    b, _ = record("nan_mask_inf", ["--mask", "--inf-step", "2"])
    p = subprocess.run([TDBG, "nan", "--json", b], stdout=subprocess.PIPE, text=True)
    check(p.returncode == 1, f"exit status 1 (got {p.returncode})")
    f = json.loads(p.stdout)["first_nonfinite"]
    line, file = line_of(f)
    check(f is not None and f["step"] == 2, "at step 2")
    check(file == "train.py" and line == MARK["inf"], f"at train.py:{MARK['inf']} (got {file}:{line})")
    check(f is not None and f.get("explained_before", 0) > 0,
          "the mask's ops were seen and explained")
    print(subprocess.run([TDBG, "nan", b], stdout=subprocess.PIPE, text=True).stdout)


# A safe log (torch.where discards log's NaN for x <= 0) each step; with argv[1] "real", a
# 0/0 standardization at step 2 that makes the loss NaN; with "guard", a NaN check reads the
# log's output itself.
NAN_WHERE = r"""
import sys, torch
torch.manual_seed(0)
lin = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(lin.parameters(), lr=0.01)
for step in range(4):
    x = torch.randn(16, 4)
    r = lin(x)
    logged = torch.log(r)
    if sys.argv[1] == "guard":
        print(bool(torch.isnan(logged).any()))
    if sys.argv[1] == "count":                                         # a log line counts them
        print("nan count", torch.isnan(logged).sum().item())
    feat = torch.where(r > 0, logged, torch.zeros_like(r))
    if sys.argv[1] == "scalar":                                        # where with a number
        feat = torch.where(r > 0, torch.log(r), 0.)
    if sys.argv[1] == "reuse":                                         # masked twice, then used
        other = torch.where(r > 0.5, torch.log(r - 0.5), torch.zeros_like(r))
        feat = feat + other + logged.sum()
    if sys.argv[1] == "printed":                                       # a sum of it printed
        print(float((r + 0.0 * logged).sum()))
        feat = torch.where(r > 0, logged, torch.zeros_like(r))
    if sys.argv[1] == "sqrt0":                                         # sqrt(0)'s gradient: 0/0
        d = r - r.detach()
        feat = torch.where(d > 0, torch.sqrt(d), torch.zeros_like(d))
    if sys.argv[1] == "real" and step == 2:
        feat = (feat - feat) / (feat - feat).std()                     # the real 0/0
    loss = feat.pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
"""


NAN_COUNT = r"""
import sys, torch
torch.manual_seed(0)
w = torch.nn.Parameter(torch.randn(4))
opt = torch.optim.SGD([w], lr=0.1)
for step in range(5):
    x = torch.randn(16, 4)
    mask = (x[:, 0] > 0).long() if step != 3 else torch.zeros(16, dtype=torch.long)
    per = (x * w).sum(1) * mask
    if sys.argv[1] == "nan":
        loss = per.sum() / mask.sum()                                  # MARK:mean
    else:
        loss = (per.sum() + 1) / mask.sum()                            # MARK:plus_one
    opt.zero_grad(); loss.backward(); opt.step()
"""


NAN_LOGGED_LATE = r"""
import sys, torch
torch.manual_seed(0)
lin = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(lin.parameters(), lr=0.01)
for step in range(6):
    x = torch.randn(8, 4)
    y = torch.randn(8, 1) * (1e20 if step == 3 else 1.0)               # finite, its square is not
    loss = torch.nn.functional.mse_loss(lin(x), y)                     # MARK:loss
    opt.zero_grad(); loss.backward(); opt.step()
    if sys.argv[1] == "after":
        print(step, loss.item())                                       # read after the step
"""


def case_nan_logged_late():
    # A loss that overflows to Inf (a target 1e20 too large), read by Python only after
    # optimizer.step() (in the next step's count) or not at all: backward's seed (ones_like)
    # reads only its shape, so nothing masked it, and the run is not finite.
    script = write_script("nan_logged_late.py", NAN_LOGGED_LATE)
    mark = marks(script)
    for mode in ("after", "none"):
        run, out = record("nan_logged_late_" + mode, [mode], script)
        rc, r = nan_json(run)
        f = r.get("first_nonfinite") or {}
        check(rc == 1 and f.get("op") == "aten::mse_loss" and f.get("step") == 3 and
              (f.get("source") or {}).get("line") == mark["loss"] and not f.get("backward"),
              f"{mode}: the loss's overflow, mse_loss at line {mark['loss']}, step 3, not a "
              f"backward op after it (got {rc} "
              f"{r.get('status')} {f.get('op')} step {f.get('step')} {(f.get('source') or {}).get('line')})")
        # Its inputs come through broadcast_tensors, a view of each: the target's values are
        # the target's, not the prediction's.
        values = [((i.get("values") or {}).get("max") or 0) for i in f.get("inputs", [])]
        check(len(values) == 2 and abs(values[0]) < 100 and values[1] > 1e19,
              f"{mode}: the inputs' values are the prediction's and the target's (got maxima {values})")


NAN_CAUSES = r"""
import sys, torch
torch.manual_seed(0)
x = torch.randn(16, 4)
mode = sys.argv[1]
if mode == "acos":                                     # a cosine similarity rounded past 1
    cos = x[:, 0].clamp(-1, 1) * 1.0000002             # (exact on every CPU: no sum)
    print(torch.acos(cos).sum().item())
elif mode == "pow":
    print(x.pow(1.5).sum().item())
elif mode == "adam":                                   # eps 0 and a zero gradient
    w = torch.nn.Parameter(torch.ones(4))
    opt = torch.optim.Adam([w], lr=0.1, eps=0.0)
    (w * 0).sum().backward()
    opt.step()
    print(w.sum().item())
elif mode == "half":
    print((x.half() * 1e5).float().sum().item())
elif mode == "saved":                                  # exp's Inf, read again by its backward
    w = torch.nn.Parameter(torch.ones(4))
    torch.exp(w * 100.0).clamp(max=10).sum().backward()   # forward finite, gradient 0 * Inf
    print(w.grad)
elif mode == "var1":                                   # a batch of one sample
    print(x[:1].var(0).sum().item())
elif mode == "empty":                                  # a selection that holds nothing
    print(x[x > 100].mean().item())
elif mode == "ignored":                                # every target ignored
    print(torch.nn.functional.cross_entropy(x, torch.full((16,), -100)).item())
"""


def case_nan_causes():
    # The cause names the operation on finite values that made NaN or Inf, with the input
    # values that show it, at full precision where six digits would hide it (1.0000001).
    script = write_script("nan_causes.py", NAN_CAUSES)
    for mode, op, says in (
            ("acos", "aten::acos", r"acos of a value outside \[-1, 1\]: input min [-0-9.e]+, max 1\.0000\d*[1-9]"),
            ("pow", "aten::pow", r"a negative base to a fractional power: input min -[0-9.]+, exponent 1\.5"),
            ("adam", "aten::addcdiv_", r"tensor2, the divisor, holds 0"),
            ("half", "aten::mul", r"a result beyond float16's range, whose largest value is 65504"),
            # (--nan-only: past the exp's Inf, to the backward's 0 * Inf; exp's result is read
            # again there as a tensor autograd saved, unknown to the recording.)
            ("saved", "aten::mul", r"most likely saved for backward by aten::exp \(seq \d+\) at "
                                   r"nan_causes.py:\d+, whose .*output 0 holds 4 Inf"),
            # Reductions dividing by a count of 0 (t147 F1).
            ("var1", "aten::var", r"var with correction 1 over 1 element\(s\) along dim \[0\] "
                                  r"\(input 1x4\): it divides by n - 1 = 0"),
            ("empty", "aten::mean", r"mean of 0 elements \(input 0: an empty selection"),
            ("ignored", "aten::nll_loss_forward", r"the loss's total weight is 0: every target "
                                                  r"is ignore_index \(-100\)")):
        run, _ = record("nan_causes_" + mode, [mode], script)
        text = subprocess.run([TDBG, "nan", *(["--nan-only"] if mode == "saved" else []), run],
                              stdout=subprocess.PIPE, text=True).stdout
        head = text.split("\n")[0] + text[text.find("cause:"):].split("\n")[0]
        check(f"non-finite at {op} " in text and re.search(says, text),
              f"{mode}: {op}, and its cause (got {head!r})")


NAN_WHERE_GRAD = r"""
import sys, torch
torch.manual_seed(0)
lin = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(lin.parameters(), lr=0.01)
mask = sys.argv[1] if len(sys.argv) > 1 else "where"
for step in range(3):
    out = lin(torch.randn(8, 4))
    if mask == "where":
        safe = torch.where(out > 0, torch.sqrt(out), torch.zeros_like(out))    # MARK:sqrt
    elif mask == "rows":
        # Attention whose second row is masked throughout: softmax makes it 0/0, the masked
        # weights are zeroed after it; softmax's backward makes NaN of that row, and the
        # backward of the masked_fill before it zeroes that again. No gradient is NaN.
        keep = torch.tensor([[True, True, False, True], [False] * 4] * 4)
        w = torch.softmax(out.masked_fill(~keep, float("-inf")), dim=-1)    # MARK:rows
        safe = w.masked_fill(~keep, 0.0) * out
    elif mask == "rows_loss":
        # The same row left NaN: it reaches the loss through cross_entropy, whose backward
        # makes finite values of it without reading them; no mask of the program's.
        keep = torch.tensor([[True, True, False, True], [False] * 4] * 4)
        w = torch.softmax(out.masked_fill(~keep, float("-inf")), dim=-1)    # MARK:rows_loss
        safe = torch.nn.functional.cross_entropy(w, torch.zeros(8, dtype=torch.long), reduction="none")
    else:
        safe = torch.nan_to_num(torch.sqrt(out), nan=0.0)    # MARK:sqrt_nan_to_num
    loss = safe.mean()
    if mask == "rows":
        assert all(torch.isfinite(p.grad).all() for p in lin.parameters() if p.grad is not None)
    opt.zero_grad(); loss.backward(); opt.step()
"""


def case_nan_where_grad():
    # torch.where over a sqrt: the forward's NaN is masked, but the gradient of a masked
    # element is 0 * NaN. The sqrt is the start, and the text says why the mask did not help.
    script = write_script("nan_where_grad.py", NAN_WHERE_GRAD)
    mark = marks(script)
    run, _ = record("nan_where_grad", [], script)
    rc, r_nan = nan_json(run)
    f = r_nan.get("first_nonfinite") or {}
    check(rc == 1 and f.get("op") == "aten::sqrt" and (f.get("source") or {}).get("line") == mark["sqrt"]
          and (f.get("masked_then_backward") or "").startswith("aten::where (seq "),
          f"the sqrt, masked by where in the forward (got {rc} {f.get('op')} "
          f"{(f.get('source') or {}).get('line')} {f.get('masked_then_backward')})")
    text = subprocess.run([TDBG, "nan", run], stdout=subprocess.PIPE, text=True).stdout
    check("masked:   by aten::where" in text and "torch.sqrt(torch.where(x > 0, x, 1))" in text,
          f"the text says what to do instead: {text[:700]!r}")
    # nan_to_num as the mask: its backward tests the saved values (isfinite), and the sqrt's
    # backward reads them itself; the same trap, said the same way.
    run, _ = record("nan_to_num_grad", ["nan_to_num"], script)
    rc, r_nan = nan_json(run)
    f = r_nan.get("first_nonfinite") or {}
    check(rc == 1 and f.get("op") == "aten::sqrt" and
          (f.get("source") or {}).get("line") == mark["sqrt_nan_to_num"] and
          (f.get("masked_then_backward") or "").startswith("aten::nan_to_num (seq "),
          f"the sqrt, masked by nan_to_num in the forward (got {rc} {f.get('op')} "
          f"{(f.get('source') or {}).get('line')} {f.get('masked_then_backward')})")
    # NaN that backward makes of a masked one and masks again itself is no start: the run is
    # finite (exit 0), and the softmax is listed as masked.
    run, _ = record("nan_rows_grad", ["rows"], script)
    rc, r = nan_json(run)
    masked = [(m.get("op"), (m.get("source") or {}).get("line")) for m in r.get("contained_starts") or []
              if m.get("masked_by")]
    check(rc == 0 and r.get("first_nonfinite") is None and ("aten::_softmax", mark["rows"]) in masked,
          f"a fully masked row zeroed after softmax is masked, also in backward (got {rc} "
          f"{(r.get('first_nonfinite') or {}).get('op')} {masked})")
    # Left NaN, it is the start, and no mask is claimed: cross_entropy's backward making finite
    # values is no mask of the program's forward.
    run, _ = record("nan_rows_loss", ["rows_loss"], script)
    rc, r_nan = nan_json(run)
    f = r_nan.get("first_nonfinite") or {}
    check(rc == 1 and f.get("op") == "aten::_softmax" and
          (f.get("source") or {}).get("line") == mark["rows_loss"] and "masked_then_backward" not in f,
          f"the softmax of the row left NaN, with no mask claimed (got {rc} {f.get('op')} "
          f"{(f.get('source') or {}).get('line')} {f.get('masked_then_backward')})")


# Training whose learning rate is far too large: the weights blow up over the steps and the
# loss overflows to Inf at step 3. With "spike", a small learning rate and an input scaled to
# overflow at step 3 only.
NAN_GROWTH = r"""
import sys, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
spike = sys.argv[1] == "spike"
opt = torch.optim.SGD(model.parameters(), lr={"spike": 1e-3, "jump": 1e37}.get(sys.argv[1], 3.0))
x, y = torch.randn(64, 8) * 3, torch.randn(64, 1) * 10
for step in range(6):
    opt.zero_grad()
    scale = 1e30 if spike and step == 3 else 1.0
    loss = torch.nn.functional.mse_loss(model(x) * scale, y)    # MARK:loss
    if not torch.isfinite(loss):
        break
    loss.backward()
    opt.step()
"""


def case_nan_growth():
    # An overflow whose inputs grew over the steps before it (a learning rate too large) says
    # so, step by step; one that comes at once (an input scaled at one step) does not.
    script = write_script("nan_growth.py", NAN_GROWTH)
    mark = marks(script)
    run, _ = record("nan_growth", ["lr"], script)
    rc, r_nan = nan_json(run)
    f = r_nan.get("first_nonfinite") or {}
    grew = [s["step"] for s in (f.get("input_growth") or {}).get("steps", [])]
    mags = [s["magnitude"] for s in (f.get("input_growth") or {}).get("steps", [])]
    check(rc == 1 and f.get("op") == "aten::mse_loss" and
          (f.get("source") or {}).get("line") == mark["loss"] and grew == list(range(f.get("step", -1) + 1))
          and mags == sorted(mags) and mags[-1] > 1e4 * mags[0],
          f"the overflow's inputs grew step by step (got {rc} {f.get('op')} step {f.get('step')} "
          f"{list(zip(grew, mags))})")
    text = subprocess.run([TDBG, "nan", run], stdout=subprocess.PIPE, text=True).stdout
    check("  grew:     the largest input magnitude of aten::mse_loss here, by step: 0: " in text and
          "a learning rate too large" in text, f"the text says they grew: {text[:900]!r}")
    # And from which step (above 10x step 0's from there on), by name: step 1 here.
    check((f.get("input_growth") or {}).get("grew_from") == 1 and
          "where to look: step 1, from which it stays above 10x its first step's size" in text,
          f"the step it grew from is named (got {(f.get('input_growth') or {}).get('grew_from')})")
    # A learning rate far too large: the first layer's matrix product overflows in step 1,
    # its inputs up from about 10 to 1e37 after one update; said as a jump, and as a product.
    run, _ = record("nan_jump", ["jump"], script)
    rc, r_nan = nan_json(run)
    f = r_nan.get("first_nonfinite") or {}
    check(rc == 1 and f.get("step") == 1 and (f.get("input_growth") or {}).get("jumped") is True,
          f"a jump after one update (got {rc} {f.get('op')} step {f.get('step')} "
          f"{f.get('input_growth')})")
    text = subprocess.run([TDBG, "nan", run], stdout=subprocess.PIPE, text=True).stdout
    check("The values jumped after one optimizer step: a learning rate far too large" in text and
          "an overflow: products of inputs up to" in text, f"the text says so: {text[:900]!r}")
    run, _ = record("nan_spike", ["spike"], script)
    rc, r_nan = nan_json(run)
    f = r_nan.get("first_nonfinite") or {}
    check(rc == 1 and f.get("step") == 3 and "input_growth" not in f,
          f"an overflow at one step has no growth (got {rc} step {f.get('step')} "
          f"{f.get('op')} {f.get('input_growth')})")


def case_nan_count():
    # A masked mean over an integer count that is 0 at one step: the divisor has no summary
    # (tdbg keeps none of integer tensors), and the cause still says it is 0, from what a
    # division can make: NaN only as 0/0, Inf from an integer divisor only as x/0.
    script = write_script("nan_count.py", NAN_COUNT)
    mark = marks(script)
    for mode, line, says in (("nan", mark["mean"], "0/0: dividing finite numbers makes NaN only as 0/0"),
                             ("inf", mark["plus_one"], "x/0: dividing by an integer makes Inf only as x/0")):
        run, _ = record("nan_count_" + mode, [mode], script)
        rc, r = nan_json(run)
        f = r.get("first_nonfinite") or {}
        check(rc == 1 and f.get("op") == "aten::div" and f.get("step") == 3 and
              (f.get("source") or {}).get("line") == line,
              f"{mode}: the div at line {line}, step 3 (got {rc} {f.get('op')} step "
              f"{f.get('step')} {(f.get('source') or {}).get('line')})")
        text = subprocess.run([TDBG, "nan", run], stdout=subprocess.PIPE, text=True).stdout
        check(says in text and "divisor input 1 (int64" in text,
              f"{mode}: the cause says the integer divisor is 0: {text[:600]!r}")


def case_nan_where():
    # NaN the program masks on purpose (torch.where over a log) is passed over as masked, so
    # the NaN that reaches the loss is found; a run with only the masked one is finite; a NaN
    # check that reads the log's output makes it a start again.
    script = write_script("nan_where.py", NAN_WHERE)
    want = 1 + NAN_WHERE.split("\n").index(next(l for l in NAN_WHERE.split("\n") if "the real 0/0" in l))
    runs = {mode: record("nan_where_" + mode, [mode], script)[0]
            for mode in ("real", "plain", "guard", "count", "scalar", "reuse", "printed", "sqrt0")}
    rc, r = nan_json(runs["real"])
    f = r.get("first_nonfinite") or {}
    check(rc == 1 and f.get("op") == "aten::div" and f.get("step") == 2 and
          (f.get("source") or {}).get("line") == want,
          f"the real 0/0 at line {want}, step 2 (got {rc} {f.get('op')} step "
          f"{f.get('step')} {(f.get('source') or {}).get('line')})")
    check(f.get("masked_before", 0) >= 2, f"the masked logs before it counted (got {f.get('masked_before')})")
    text = subprocess.run([TDBG, "nan", runs["real"]], stdout=subprocess.PIPE, text=True).stdout
    print(text)
    check("masked:   aten::log" in text and "read by aten::where" in text, "the masked log is listed")
    check("division by a divisor that holds 0" in text and "0/0" in text,
          f"the cause says which operation made it: {text[:500]!r}")
    rc, r = nan_json(runs["plain"])
    check(rc == 0 and r.get("status") == "finite" and r.get("masked", 0) >= 1,
          f"only masked NaN: finite, exit 0 (got {rc} {r.get('status')} masked {r.get('masked')})")
    for mode in ("guard", "count"):
        rc, r = nan_json(runs[mode])
        f = r.get("first_nonfinite") or {}
        check(rc == 1 and f.get("op") == "aten::log",
              f"{mode}: a NaN check read it: the log is the start (got {rc} {f.get('op')})")
    text = subprocess.run([TDBG, "nan", runs["guard"]], stdout=subprocess.PIPE, text=True).stdout
    check("log of a negative value: input min -" in text, f"the log's cause: {text[:400]!r}")
    # The mask the program wrote is seen, and why it does not count is said: the guard's test
    # at its line, or (reuse) the op that passed the NaN on unmasked.
    lines = NAN_WHERE.split("\n")
    guard_line = 1 + lines.index(next(l for l in lines if "torch.isnan(logged).any()" in l))
    reuse_line = 1 + lines.index(next(l for l in lines if "logged.sum()" in l))
    for mode, why, op, line in (("guard", "Python read a test of them", "aten::is_nonzero", guard_line),
                                ("reuse", "an op passed them on", "aten::sum", reuse_line)):
        rc, r_nan = nan_json(runs[mode])
        f = r_nan.get("first_nonfinite") or {}
        no = f.get("mask_rejected") or {}
        check(no.get("by", "").startswith("aten::where") and why in no.get("why", "")
              and (no.get("op") or {}).get("op") == op
              and ((no.get("op") or {}).get("source") or {}).get("line") == line
              and "masked_then_backward" not in f,
              f"{mode}: the where is seen, and {op} at line {line} is why it does not count "
              f"(got {no}, masked_then_backward {f.get('masked_then_backward')})")
    text = subprocess.run([TDBG, "nan", runs["guard"]], stdout=subprocess.PIPE, text=True).stdout
    check("masked:   by aten::where" in text and "yet a start: Python read a test" in text,
          f"the text says it: {text[:600]!r}")
    # Python reads a sum made of it unmasked: the op that passed it on is why, not the read.
    printed_line = 1 + lines.index(next(l for l in lines if "0.0 * logged" in l))
    rc, r_nan = nan_json(runs["printed"])
    no = (r_nan.get("first_nonfinite") or {}).get("mask_rejected") or {}
    check("an op passed them on" in no.get("why", "") and (no.get("op") or {}).get("op") == "aten::mul"
          and ((no.get("op") or {}).get("source") or {}).get("line") == printed_line,
          f"printed: the mul at line {printed_line} passed it on (got {no})")
    # NaN that backward makes (sqrt's gradient at 0), which reaches the weights and a mask of
    # the next step: no mask of the start's own values, so none is named.
    rc, r_nan = nan_json(runs["sqrt0"])
    f = r_nan.get("first_nonfinite") or {}
    check(rc == 1 and f.get("step") == 0 and "mask_rejected" not in f,
          f"sqrt0: a start in step 0's backward, no mask named (got {f.get('op')} step "
          f"{f.get('step')}, {f.get('mask_rejected')})")
    # where with a number reads the log through views of it: masked all the same.
    p = subprocess.run([TDBG, "nan", "--json", runs["scalar"]], stdout=subprocess.PIPE, text=True)
    check(p.returncode == 0, f"torch.where(x > 0, torch.log(x), 0.): masked (got {p.returncode})")
    # Masked where it is first read, then read again into the loss (after another masked
    # start): the first log is the start.
    want_line = 1 + NAN_WHERE.split("\n").index(next(l for l in NAN_WHERE.split("\n") if "logged = " in l))
    rc, r_nan = nan_json(runs["reuse"])
    f = r_nan.get("first_nonfinite") or {}
    check(rc == 1 and f.get("op") == "aten::log" and f.get("step") == 0 and
          (f.get("source") or {}).get("line") == want_line,
          f"a masked NaN read again later is the start (got {rc} {f.get('op')} step "
          f"{f.get('step')} {(f.get('source') or {}).get('line')})")
    # Inf from outside (NumPy here, a checkpoint's optimizer state elsewhere) is no start, as
    # a mask's -inf is not; where it first came in is said.
    script = write_script("inf_in.py", "import numpy, torch\n"
                          "x = torch.from_numpy(numpy.array([1.0, numpy.inf], dtype=numpy.float32))\n"
                          "print((x * 2).clamp(max=5).sum().item())\n")
    run, _ = record("inf_in", [], script)
    rc, r = nan_json(run)
    came = r.get("inf_entered") or {}
    check(rc == 0 and came.get("op") == "aten::lift_fresh" and (came.get("source") or {}).get("line") == 2,
          f"Inf from NumPy: where it came in (got {rc} {came.get('op')} {came.get('source')})")
    text = subprocess.run([TDBG, "nan", run], stdout=subprocess.PIPE, text=True).stdout
    check("Inf came in: aten::lift_fresh" in text, f"and said: {text!r}")
    # A NaN made of it (inf - inf) is a start, and the Inf it read is traced to where it came in.
    script = write_script("inf_in_nan.py", "import numpy, torch\n"
                          "x = torch.from_numpy(numpy.array([1.0, numpy.inf], dtype=numpy.float32))\n"
                          "print((x * 2 - x).sum().item())\n")
    run, _ = record("inf_in_nan", [], script)
    rc, r_nan = nan_json(run)
    f = r_nan.get("first_nonfinite") or {}
    came = f.get("inf_entered") or {}
    check(rc == 1 and f.get("op") == "aten::sub" and came.get("op") == "aten::lift_fresh",
          f"NaN of that Inf: the start, and where the Inf came in (got {f.get('op')}, {came.get('op')})")
    # Recorded with --ops: the Inf most likely came from an op the selection left out (t150 F7).
    run, _ = record("inf_in_nan_ops", [], script, options=["--ops", "mul|sub"])
    text = subprocess.run([TDBG, "nan", run], stdout=subprocess.PIPE, text=True).stdout
    came = [l for l in text.splitlines() if "Inf came in" in l]
    check(came and "from an op the recording's selection left out, or data no recorded op made" in came[0],
          f"the selection named first: {came or text!r}")


def case_errors():
    os.makedirs(WORK, exist_ok=True)
    bogus = os.path.join(WORK, "not_a_run.sqlite")
    with open(bogus, "w") as f:
        f.write("hello")
    p = subprocess.run([TDBG, "diff", bogus, bogus], stderr=subprocess.PIPE, text=True)
    check(p.returncode == 2, "an unreadable run exits 2")
    check(p.stderr.startswith("tdbg diff: ") and p.stderr.count("\n") == 1 and bogus in p.stderr,
          f"with one line naming the file (got {p.stderr!r})")
    for steps in ("3", "a:0", "-1:0", "3:"):
        p = subprocess.run([TDBG, "diff", bogus, bogus, "--align-steps", steps], stderr=subprocess.PIPE,
                           text=True)
        check(p.returncode == 2 and p.stderr.count("\n") == 1 and "want A:B" in p.stderr,
              f"--align-steps {steps}: one line, exit 2 (got {p.returncode}: {p.stderr!r})")
    p = subprocess.run([TDBG, "nan", os.path.join(WORK, "missing")], stderr=subprocess.PIPE, text=True)
    check(p.returncode == 2 and p.stderr.startswith("tdbg nan: "), "tdbg nan on a missing run exits 2")
    # A bundle given where a run goes: say how to get the runs out of it.
    gz = os.path.join(WORK, "a_bundle.tar.gz")
    with tarfile.open(gz, "w:gz") as tar:
        tar.add(bogus, arcname="x/not_a_run.sqlite")
    p = subprocess.run([TDBG, "diff", gz, gz], stderr=subprocess.PIPE, text=True)
    check(p.returncode == 2 and p.stderr.count("\n") == 1 and "tdbg bundle --extract" in p.stderr,
          f"a bundle passed as a run says to extract it (got {p.stderr!r})")
    # Wrong option values: one short line naming the subcommand and the option.
    for argv in (["show", "--limit", "-1"], ["show", "--process", "-1"], ["nan", "--from-step", "x"],
                 ["show", "--step", "99999999999999999999"],
                 ["diff", "--context", "abc", bogus]):
        p = subprocess.run([TDBG] + argv + [bogus], stderr=subprocess.PIPE, text=True)
        check(p.returncode == 2 and p.stderr.startswith("tdbg %s: %s" % (argv[0], argv[1]))
              and p.stderr.count("\n") == 1 and len(p.stderr) < 200,
              f"{argv}: one short line (got {p.stderr!r})")
    # A word where a number goes is said to be no number (not "not in range").
    for argv, want in ((["diff", "--context", "abc", bogus], "want a whole number from 0 to 1000"),
                       (["diff", "--scan-limit", "abc", bogus], "want a whole number of ops"),
                       (["view", "--port", "http", bogus], "want a whole number from 0 to 65535")):
        p = subprocess.run([TDBG] + argv + [bogus], stderr=subprocess.PIPE, text=True)
        check(p.returncode == 2 and want in p.stderr, f"{argv}: says {want!r} (got {p.stderr!r})")
    # A run damaged where export reads it (an op block's bytes): the error names the run's
    # database, not the trace file it was writing.
    run, _ = record("errors_run", ["--steps", "2"])
    db = glob.glob(os.path.join(run, "*.sqlite"))[0]
    import sqlite3
    con = sqlite3.connect(db)
    con.execute("UPDATE op_blocks SET ops = zeroblob(length(ops)) WHERE id = (SELECT max(id) FROM op_blocks)")
    con.commit()
    con.close()
    trace = os.path.join(WORK, "errors_trace.json")
    p = subprocess.run([TDBG, "export", "--chrome-trace", run, "-o", trace], stderr=subprocess.PIPE,
                       text=True)
    check(p.returncode == 2 and p.stderr.startswith("tdbg export: " + db),
          f"export of a damaged run names the run's database first (got {p.stderr!r})")


def case_selection():
    # Runs that recorded different parts, or no values, must say so instead of reading as an
    # ordinary answer.
    a, _ = record("sel_nohash_a", [], options=["--hash", "none"])
    b, _ = record("sel_nohash_b", ["--poke", "7.5"], options=["--hash", "none"])
    rc, r = diff(a, b)
    check(rc == 0 and r["values_compared"] is False,
          f"--hash none: identical in what was recorded, values not compared (got {rc}, {r.get('values_compared')})")
    check(any("--hash none" in w for w in r["warnings"]), f"with a warning (got {r['warnings']})")
    text = subprocess.run([TDBG, "diff", a, b], stdout=subprocess.PIPE, text=True).stdout
    check(text.startswith("identical in ops, shapes and arguments (tensor values not recorded)"),
          f"the headline says what was compared (got {text.splitlines()[:1]})")
    check("next:     the values were not compared; to compare them, record both again with hashing on" in text,
          f"and how to compare the values (got {text!r})")
    # Nor can tdbg nan look for NaN there: unchecked, exit 2, never "finite".
    p = subprocess.run([TDBG, "nan", a], stdout=subprocess.PIPE, text=True)
    check(p.returncode == 2 and p.stdout.startswith("unchecked: ") and "--hash none" in p.stdout,
          f"tdbg nan on a --hash none run: unchecked (got {p.returncode}: {p.stdout!r})")

    # A run without source lines against one with: said once, and a line only one run has is
    # no other code path.
    a, _ = record("sel_stacks_a", ["--lr", "0.05"])
    b, _ = record("sel_stacks_b", ["--lr", "0.1"], options=["--no-stacks"])
    rc, r = diff(a, b)
    check(rc == 1 and any("only B was recorded with --no-stacks" in w for w in r["warnings"]),
          f"--no-stacks in B only is named (got {r['warnings']})")
    text = diff_text(a, b)
    where = [l for l in text.splitlines() if l.startswith("  where:")]
    check("another code path" not in text and len(where) == 1 and "train.py:" in where[0],
          f"one where line, A's, and no other code path suspected: {text[:600]!r}")

    a, _ = record("sel_steps_a", [], options=["--steps", "1:4"])
    b, _ = record("sel_steps_b", [], options=["--steps", "2:4"])
    rc, r = diff(a, b)
    check(any("different --steps (A 1:4, B 2:4)" in w for w in r["warnings"]),
          f"different step windows are named (got {r['warnings']})")
    # A whole run against a window of a run with another seed: what the window's first op
    # reads was made before it, which B does not hold; no code passes another tensor, and the
    # seed's note says the random ops before the window were not compared (t149 F1).
    whole, _ = record("sel_steps_whole", ["--steps", "4"])
    seeded, _ = record("sel_steps_seed", ["--steps", "4", "--seed", "1"], options=["--steps", "2:4"])
    rc, r = diff(whole, seeded)
    d = r.get("first_divergence") or {}
    seed = next((st for st in r.get("settings") or [] if st.get("key") == "seed"), {})
    check(rc == 1 and d.get("cause") == "external_input"
          and "B's recording begins later" in d.get("detail", "")
          and "B's recording begins after the program's start" in seed.get("note", ""),
          f"made before B's window, the seed's ops not compared (got {d.get('cause')}: "
          f"{d.get('detail')}; {seed})")
    # Named the other way round, the same answer for A (t151 F5).
    rc, r = diff(seeded, whole)
    d = r.get("first_divergence") or {}
    check(rc == 1 and d.get("cause") == "external_input"
          and "A's recording begins later" in d.get("detail", ""),
          f"made before A's window (got {d.get('cause')}: {d.get('detail')})")
    # A bundle's README says what each run holds.
    bundle = os.path.join(WORK, "sel_steps.tar.gz")
    subprocess.run([TDBG, "bundle", "-o", bundle, a, b], check=True, stdout=subprocess.DEVNULL)
    with tarfile.open(bundle) as t:
        readme = next(t.extractfile(m).read().decode() for m in t.getmembers() if m.name.endswith("README.md"))
    check("Run A was recorded with --steps 1:4" in readme and "Run B was recorded with --steps 2:4" in readme,
          f"the README names each run's selection: {readme[:900]!r}")

    # Rings that kept other ends of the runs: nothing in common to compare.
    a, _ = record("sel_ring_a", ["--steps", "2"], options=["--ring", "20"])
    b, _ = record("sel_ring_b", ["--steps", "6"], options=["--ring", "20"])
    p = subprocess.run([TDBG, "diff", a, b], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(p.returncode == 2 and "no op in common" in p.stderr and p.stderr.count("\n") == 1,
          f"disjoint rings: one-line error, exit 2 (got {p.returncode}, {p.stderr!r})")
    p = subprocess.run([TDBG, "nan", "--json", b], stdout=subprocess.PIPE, text=True)
    notes = json.loads(p.stdout).get("notes", [])
    check(any("a ring kept the last ones" in n for n in notes),
          f"tdbg nan says the ring dropped earlier ops (got {notes})")
    p = subprocess.run([TDBG, "show", b, "--op", "0", "--limit", "1"], stdout=subprocess.PIPE, text=True)
    check("(op 0 is not in this database" in p.stdout,
          f"tdbg show --op of a dropped op says so (got {p.stdout!r})")
    # One thread's ops: its tidx start past the ring's op count.
    p = subprocess.run([TDBG, "show", b, "--thread", "0", "--plain"], stdout=subprocess.PIPE,
                       text=True)
    shown = [l for l in p.stdout.splitlines() if " step=" in l]
    check(p.returncode == 0 and len(shown) == 20,
          f"tdbg show --thread 0 lists the ring's 20 ops (got {len(shown)}: {p.stdout[:300]!r})")
    for option, value, said in (("--thread", "7", "no op of thread 7 in this process (its threads: 0)"),
                                ("--step", "99", "no op of step 99 (the last step held is "),
                                ("--step", "0", "no op of step 0 (the first step held is ")):
        p = subprocess.run([TDBG, "show", b, option, value], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        check(p.returncode == 2 and said in p.stderr and p.stderr.count("\n") == 1 and p.stdout == "",
              f"tdbg show {option} {value} with nothing there says so, on stderr alone (got "
              f"{p.returncode}: {p.stderr!r}, stdout {p.stdout[:200]!r})")
    # Rings over runs that differ from the start: the first differing input was made by an op
    # the ring dropped, which is where the runs parted, not another tensor passed.
    a, _ = record("sel_ring_lr_a", ["--lr", "0.05"], options=["--ring", "150"])
    b, _ = record("sel_ring_lr_b", ["--lr", "0.1"], options=["--ring", "150"])
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("cause") == "external_input" and "is not in the recording (a --ring"
          in d.get("detail", ""), f"rings: the difference is older than the ring (got "
          f"{d.get('cause')}: {d.get('detail')})")
    # Whatever the first compared op's cause reads as (a view of other memory, data from
    # outside), a ring that dropped the start says the runs may have parted before it.
    ring_script = write_script("ring_mlp.py", r"""
import sys, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(m.parameters(), lr=float(sys.argv[1]))
x, y = torch.randn(64, 8), torch.randn(64, 1)
for step in range(5):
    opt.zero_grad()
    torch.nn.functional.mse_loss(m(x), y).backward()
    opt.step()
""")
    for ring in ("40", "50", "60"):
        a, _ = record("sel_ring_short_a" + ring, ["0.1"], ring_script, options=["--ring", ring])
        b, _ = record("sel_ring_short_b" + ring, ["0.2"], ring_script, options=["--ring", ring])
        rc, r = diff(a, b)
        d = r["first_divergence"] or {}
        check(rc == 1 and "--ring" in d.get("detail", ""),
              f"ring {ring}: the cause says the ring may hide the start (got {d.get('cause')}: "
              f"{d.get('detail')})")


def case_ddp():
    # Two data-parallel ranks whose processes start in either order: identical runs must pair
    # rank with rank, and one changed value in rank 1's NumPy data must be found in rank 1.
    a, b, out_a, out_b = pair("ddp_same", [], [], DDP_SCRIPT)
    check(sorted(out_a.splitlines()) == sorted(out_b.splitlines()), "the ranks print the same")
    rc, r = diff(a, b)
    check(rc == 0 and r["status"] == "identical", f"identical DDP runs (exit {rc})")
    check("thread(s) of 3 processes compared)" in diff_text(a, b).splitlines()[0],
          "the identical headline says how many processes each run has")
    # tdbg show on the run: mp.spawn's parent records no op; rank 0's process is shown.
    p = subprocess.run([TDBG, "show", a, "--limit", "1"], stdout=subprocess.PIPE, text=True)
    check(p.returncode == 0 and "(rank 0/2)" in p.stdout.splitlines()[0] and "process 0 holds no op" in p.stdout,
          f"show picks the first process with ops (got {p.stdout[:300]!r})")
    # B's step 1 under DDP's no_sync(): the all-reduce A runs there is named in the headline.
    a, b, _, _ = pair("ddp_no_sync", [], ["--no-sync-step", "1"], DDP_SCRIPT)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    change = d.get("collective_change") or {}
    check(rc == 1 and d.get("kind") == "structure" and change.get("run") == "A"
          and change.get("op", "").startswith("c10d::allreduce") and change.get("step") == 1
          and "a sync one run skipped, such as DDP's gradient all-reduce under no_sync()" in diff_text(a, b),
          f"the skipped all-reduce is named (got {d.get('kind')}: {d.get('detail')}, {change})")
    # And then every rank raises: the rank is named as the process that ended, not mp.spawn's
    # parent (process 0, no op), which exits with status 1 because they did.
    b, p = record_ending("ddp_no_sync_raise", ["--no-sync-step", "1", "--raise-step", "2"], DDP_SCRIPT)
    rc, r = diff(a, b)
    ended = (r["first_divergence"] or {}).get("run_ended") or {}
    check(rc == 1 and p.returncode == 1 and ended.get("process", 0) > 0 and "(rank " in ended.get("text", ""),
          f"a rank named as the process that ended (got {p.returncode}, {ended})")
    # Ranks that raise with no other change: the all-reduces A runs after B's end are no sync
    # that B skipped.
    b, p = record_ending("ddp_raise", ["--raise-step", "1"], DDP_SCRIPT)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and p.returncode == 1 and "collective_change" not in d,
          f"no skipped sync where B ended (got {d.get('cause')}: {d.get('detail')}, {d.get('collective_change')})")
    # Rank 1 alone runs two more ops, then raises: its change is the first divergence, though
    # rank 0's gradients (all-reduced from rank 1's) differ earlier by A's clock of rank 0,
    # and rank 1 exited with an error (an error exit yields only where the run just stopped).
    b, p = record_ending("ddp_extra_raise", ["--extra-rank", "1", "--extra-step", "2"], DDP_SCRIPT)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    line, file = line_of(d.get("b"))
    check(rc == 1 and p.returncode == 1 and d.get("kind") == "structure" and d.get("process") == 2
          and line == marks(DDP_SCRIPT)["extra"] and (d.get("run_ended") or {}).get("process") == 2,
          f"rank 1's inserted ops first (got process {d.get('process')}, {d.get('kind')} at "
          f"{file}:{line}, ended {d.get('run_ended')})")
    a, b, _, _ = pair("ddp_poke", [], ["--poke-rank", "1", "--poke-step", "2"], DDP_SCRIPT)
    rc, r = diff(a, b)
    check(rc == 1, f"exit status 1 (got {rc})")
    d = r["first_divergence"]
    check(d is not None and d["cause"] == "external_input",
          f"cause external_input (got {d and d['cause']})")
    line, file = line_of(d and d["a"])
    want = marks(DDP_SCRIPT)["data"]
    check(file == "ddp_train.py" and line == want, f"source ddp_train.py:{want} (got {file}:{line})")
    check(d is not None and d["a"]["step"] == 2, f"at step 2 (got {d and d['a']['step']})")
    # Processes in canonical order: the launcher, rank 0, rank 1.
    check(d is not None and d.get("process") == 2, f"in rank 1's process (got {d and d.get('process')})")
    proc = (d or {}).get("process_a") or {}
    check(proc.get("rank") == "1/2" and "rank 1/2" in proc.get("text", ""),
          f"the process is named by its rank (got {proc})")
    # The ranks run mp.spawn's `spawn_main` command: the program's is the launcher's.
    check(any(st.get("key") == "cmdline" and "--poke-rank" in st.get("b", "") for st in r.get("settings", [])),
          f"the launcher's command lines are compared (got {r.get('settings')})")
    # Rank 0 alone: its gradients differ because rank 1's came in through the collectives,
    # which the cause must name rather than pass off as a kernel's nondeterminism.
    import sqlite3

    def rank0(run):
        for db in glob.glob(os.path.join(run, "*.sqlite")):
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
                row = con.execute("SELECT value FROM meta WHERE key = 'rank'").fetchone()
            if row and row[0].startswith("0/"):
                return db
        return None
    rc, r = diff(rank0(a), rank0(b))
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("cause") == "external_input" and d.get("collective")
          and ("came in through" in d.get("detail", "")
               or "the values come from the other ranks" in d.get("detail", "")),
          f"rank 0 alone: the collective is named (got {d.get('cause')}: {d.get('detail')})")
    # tdbg nan on one database of the run: the others beside it are pointed to.
    p = subprocess.run([TDBG, "nan", "--json", rank0(a)], stdout=subprocess.PIPE, text=True)
    notes = json.loads(p.stdout).get("notes", []) if p.returncode in (0, 1) else []
    check(any("other database(s) beside it" in n and "tdbg nan " + a in n for n in notes),
          f"nan on one rank's database points to the run (got {p.returncode} {notes})")


def case_ddp_nan():
    # NaN made on rank 1 reaches rank 0 through a hand-written all_reduce: on rank 0's
    # database alone, tdbg nan names the collective it came in through; on the whole run, rank
    # 1's op that made it.
    run, _ = record("ddp_nan", ["--nan-rank", "1"], DDP_SCRIPT)
    dbs = {}
    for db in glob.glob(os.path.join(run, "*.sqlite")):
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            row = con.execute("SELECT value FROM meta WHERE key = 'rank'").fetchone()
        if row:
            dbs[row[0]] = db
    rc, r_nan = nan_json(dbs.get("0/2", run))
    f = r_nan.get("first_nonfinite") or {}
    check(rc == 1 and (f.get("collective") or {}).get("op") == "c10d::allreduce_",
          f"rank 0 alone: the NaN came in through the all_reduce (got {rc} "
          f"{f.get('op')} {f.get('entered')} {f.get('collective')})")
    text = subprocess.run([TDBG, "nan", dbs.get("0/2", run)], stdout=subprocess.PIPE, text=True).stdout
    check("NaN came in through c10d::allreduce_" in text, f"the cause says so: {text[:600]!r}")
    rc, r_nan = nan_json(run)
    f = r_nan.get("first_nonfinite") or {}
    line, file = line_of(f)
    check(rc == 1 and file == "ddp_train.py" and line == marks(DDP_SCRIPT)["nan"],
          f"the whole run: rank 1's op that made it (got {f.get('op')} at {file}:{line})")
    # Rank 0's start is listed under it, by rank, as brought by the all-reduce.
    text = subprocess.run([TDBG, "nan", run], stdout=subprocess.PIPE, text=True).stdout
    also = [l for l in text.splitlines() if l.lstrip().startswith("also:")]
    check(len(also) == 1 and "(rank 0/2)" in also[0]
          and "came in through c10d::allreduce_" in also[0] and "from another rank" in also[0],
          f"rank 0's start: its rank, and the all-reduce it came through (got {also})")
    # NaN in rank 1's data reaches rank 0's gradients through DDP's all-reduce, inside its
    # reducer (whose bucket is not hashed): rank 0's start names the all-reduce.
    run_data, _ = record("ddp_nan_data", ["--nan-data-rank", "1"], DDP_SCRIPT)
    rc, r_data = nan_json(run_data)
    f = r_data.get("first_nonfinite") or {}
    line, file = line_of(f)
    also = [s for s in f.get("other_starts", []) if (s.get("process") or {}).get("rank") == "0/2"]
    check(rc == 1 and line == marks(DDP_SCRIPT)["data"] and (f.get("process_info") or {}).get("rank") == "1/2"
          and len(also) == 1 and also[0].get("entered") == "input"
          and (also[0].get("collective") or {}).get("op") == "c10d::allreduce_",
          f"rank 1's data, then rank 0 through DDP's all-reduce (got {f.get('op')} at {file}:{line}, {also})")
    # The bundle's README says which rank's op it is (op numbers count per process).
    bundle = os.path.join(WORK, "ddp_nan.tar.gz")
    subprocess.run([TDBG, "bundle", run, "-o", bundle], stdout=subprocess.DEVNULL, check=True)
    readme = subprocess.run([TDBG, "bundle", "--inspect", bundle], stdout=subprocess.PIPE, text=True).stdout
    check(re.search(r"First non-finite value in run A\*\*: op #\d+ `aten::mul` at step \d+ of rank 1/2", readme),
          f"the bundle's README names the rank: {readme[:800]!r}")
    # mp.spawn's parent's database (no op) against the whole run: which one holds none.
    parent = next(db for db in glob.glob(os.path.join(run, "*.sqlite")) if db not in dbs.values())
    p = subprocess.run([TDBG, "diff", parent, run], stderr=subprocess.PIPE, text=True)
    check(p.returncode == 2 and "holds no op, and its process pairs with one of B that holds none "
          "either (B's ops are in its other processes)" in p.stderr,
          f"a launcher's database against the run: says A holds none (got {p.returncode}: {p.stderr!r})")


def case_reduce_op():
    # The same metric all-reduced with MAX instead of SUM on both ranks: the collective's reduce
    # op is an argument (a TorchScript object, recorded by what it means), so the first
    # divergence is that argument at the collective, not the values read from it afterwards.
    a, b, _, _ = pair("reduce_op", [], ["--metric-op", "max"], DDP_SCRIPT)
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("cause") == "arguments", f"cause arguments (got {d.get('cause')}: "
          f"{d.get('detail')})")
    check((d.get("a") or {}).get("op") == "c10d::allreduce_",
          f"at the collective (got {(d.get('a') or {}).get('op')})")
    arg = d.get("argument") or {}
    check(arg.get("value_a") == "ReduceOp.SUM" and arg.get("value_b") == "ReduceOp.MAX",
          f"the reduce ops named (got {arg})")
    line, file = line_of(d.get("a"))
    want = marks(DDP_SCRIPT)["metric"]
    check(file == "ddp_train.py" and line == want, f"source ddp_train.py:{want} (got {file}:{line})")


def case_gather():
    # Gloo runs all_gather's copies on its worker threads, which take the work items in
    # another order each run: those ops are the collective's own, not the program's, and two
    # identical runs must diff identical (they read as diverged when the workers' ops were
    # recorded and paired by thread).
    script = os.path.join(HERE, "scripts", "gather_train.py")
    a, b, out_a, out_b = pair("gather", [], [], script)
    check(sorted(out_a.splitlines()) == sorted(out_b.splitlines()), "the ranks print the same")
    for i in range(2):
        rc, r = diff(a, b)
        check(rc == 0 and r["status"] == "identical", f"identical gathering runs (exit {rc})")
        if rc != 0:
            break
        b, _ = record("gather_b", [], script)


# A training loop that calls a custom op (a Python kernel registered with torch.library, as
# an extension's op would be). argv[1]: the step at which the op crashes inside (-1: never),
# argv[2]: how (segv, abort, kill_abort: SIGABRT sent with kill() to its own pid,
# double_free: glibc aborts on a corrupted heap, holding malloc's lock, bus: a
# SIGBUS reading a mapped file another process truncated, or raise: an exception, which
# "catch" catches and goes on).
CRASH = r"""
import ctypes, os, signal, sys, threading, time, torch
CRASH_STEP, HOW = int(sys.argv[1]), sys.argv[2]
lib = torch.library.Library("crashtest", "DEF")
lib.define("scale(Tensor x, int step) -> Tensor")
def scale(x, step):
    y = x.mul(0.5)
    if step == CRASH_STEP and HOW in ("watchdog", "hang"):
        # A hang inside the op, ended by a watchdog thread's abort or by a signal from outside.
        if HOW == "watchdog":
            threading.Thread(target=lambda: (time.sleep(0.3), os.abort())).start()
        print("waiting", flush=True)
        time.sleep(60)
    if step == CRASH_STEP and HOW != "hang_backward":
        if HOW in ("raise", "catch"):
            raise RuntimeError("scale failed at step %d" % step)
        if HOW == "kill_abort":
            os.kill(os.getpid(), signal.SIGABRT)
        if HOW == "double_free":
            libc = ctypes.CDLL(None)
            libc.malloc.restype = ctypes.c_void_p
            libc.free.argtypes = [ctypes.c_void_p]
            block, other = libc.malloc(4096), libc.malloc(4096)
            libc.free(block)
            libc.free(block)
        ctypes.string_at(0) if HOW == "segv" else os.abort()
    return y.tanh()
lib.impl("scale", scale, "CPU")
class Slow(torch.autograd.Function):  # a backward that hangs at CRASH_STEP ("hang_backward")
    step = -1
    @staticmethod
    def forward(ctx, x):
        return x * 2
    @staticmethod
    def backward(ctx, g):
        if Slow.step == CRASH_STEP:
            print("waiting", flush=True)
            time.sleep(60)
        return g.mul(2)
torch.manual_seed(0)
w = torch.randn(4, 4, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
if HOW == "bus":
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crash_bus.bin")
    with open(path, "wb") as f:
        f.write(b"\0" * (1 << 20))
    mapped = torch.from_file(path, shared=True, size=1 << 18)
for step in range(5):
    opt.zero_grad()
    if HOW == "bus":
        if step == CRASH_STEP:
            os.truncate(path, 0)
        w.data.add_(mapped[:4].sum())  # MARK:bus_call
    try:
        h = torch.ops.crashtest.scale(torch.ones(2, 4) @ w, step)  # MARK:crash_call
        if HOW == "hang_backward":
            Slow.step = step
            h = Slow.apply(h)  # MARK:slow_call
    except RuntimeError:
        if HOW != "catch":
            raise
        h = torch.ones(2, 4)
    h.sum().backward() if h.requires_grad else (w * h.sum()).sum().backward()
    opt.step()
    print(step, float(w.sum()), flush=True)
"""


# A small training; "refactor" adds a multiplication by 1.0 that changes no value, "raise"
# raises an error after the optimizer step of step 3 of 8 (an out-of-memory error, say).
ENDED_AFTER_CHANGE = r"""
import sys, torch
torch.manual_seed(0)
x, y = torch.randn(32, 6), torch.randn(32, 1)
w = torch.randn(6, 1, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.05)
for step in range(8):
    h = x @ w
    if "refactor" in sys.argv:
        h = h * 1.0
    loss = ((h - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if "raise" in sys.argv and step == 3:
        raise RuntimeError("out of memory (simulated)")  # MARK:raise
    if "mm" in sys.argv and step == 3:
        torch.mm(x, x)  # MARK:mm
print(float(loss))
"""


def case_ended_after_change():
    # A change that adds work only, and a run that then raises: what both ran agrees, but B
    # has no results past its end. The headline says the values are the same only up to
    # there, never "work, not results", and --results exits 1, as it does for a run that
    # raises with no change at all.
    script = write_script("ended_after_change.py", ENDED_AFTER_CHANGE)
    a, _ = record("ended_after_change_a", [], script)
    # An op that raises (a shape error in torch.mm) is named where the headline says B ended.
    b, p = record_ending("ended_after_change_mm", ["refactor", "mm"], script)
    headline = diff_text(a, b).split("\n")[0]
    check(p.returncode == 1 and f"after an error raised inside aten::mm at ended_after_change.py:{marks(script)['mm']}"
          in headline, f"the op that raised is named in the headline: {headline}")
    for name, args in (("refactor", ["refactor", "raise"]), ("plain", ["raise"])):
        b, p = record_ending("ended_after_change_" + name, args, script)
        check(p.returncode == 1 and "out of memory (simulated)" in p.stderr,
              f"{name}: precondition: B raises as without tdbg (got {p.returncode})")
        rc, r = diff(a, b)
        d = r["first_divergence"] or {}
        text = diff_text(a, b)
        headline = text.split("\n")[0]
        check(rc == 1 and r.get("ended_differently") is True, f"{name}: the runs ended differently ({rc}, {r.get('warnings')})")
        check("not results" not in text and "did not alter what the training computed" not in text,
              f"{name}: no all-clear for a run that raised: {text[:600]}")
        if name == "refactor":
            ended = d.get("run_ended") or {}
            check(d.get("kind") == "structure" and d.get("values_same") is not None
                  and ended.get("run") == "B" and ended.get("step") == 3,
                  f"refactor: the values are the same up to where B ended at step 3 (got {d.get('detail')}, {ended})")
            check("; the values stay the same up to where B ended: B's process exited with status 1" in headline
                  and headline.endswith("after its last op, in step 3"), f"refactor: the headline says where B ended: {headline}")
        else:
            check(d.get("cause") == "ended" and "updates are the same in every step both ran" in headline,
                  f"plain: B ended early, its updates the same up to there: {headline}")
        results = subprocess.run([TDBG, "diff", "--results", a, b], stdout=subprocess.DEVNULL).returncode
        check(results == 1, f"{name}: diff --results exits 1 for a run that raised (got {results})")


# A DataLoader worker that segfaults in a custom op (argv[1]: the index it crashes at, -1
# never). torch's own SIGSEGV handler in the worker prints its message and raises the signal
# again with the default action; the main process then fails with "worker exited unexpectedly".
DL_CRASH = r"""
import ctypes, sys, torch
CRASH = int(sys.argv[1])
lib = torch.library.Library("dlcrash", "DEF")
lib.define("scale(Tensor x, int i) -> Tensor")
def scale(x, i):
    y = x.mul(0.5)
    if i == CRASH:
        ctypes.string_at(0)
    return y.tanh()
lib.impl("scale", scale, "CPU")
torch.manual_seed(0)
class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        return torch.ops.dlcrash.scale(torch.full((4,), float(i)), i)  # MARK:dl_call
for batch in torch.utils.data.DataLoader(Data(), batch_size=2, num_workers=1):
    print(float(batch.sum()), flush=True)
"""


def flagged_in_show(run, flag="unfinished"):
    """The lines `tdbg show` prints for each op it flags `flag` (its header line first)."""
    p = subprocess.run([TDBG, "show", "--limit", "0", run], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    check(p.returncode == 0, f"tdbg show {run} exits 0 (got {p.returncode}: {p.stderr.strip()})")
    blocks, current = [], []
    for line in p.stdout.splitlines():
        if re.match(r"\s+\d+ t\d+ ", line):
            current = [line]
            blocks.append(current)
        elif current:
            current.append(line)
    return [b for b in blocks if any(flag + ":" in line for line in b)]


KILLED_AT = r"""
import os, sys, torch
torch.manual_seed(0)
lin = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(lin.parameters(), lr=0.01)
for step in range(8):
    if step == int(sys.argv[1]):
        os.kill(os.getpid(), 9)                                        # killed before step N
    loss = lin(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
"""


def case_window_killed():
    # A run killed at step 5, kept as a ring, against a --steps window of a run that went on
    # past it: B ended early, though A's window ends later than B's last step (not identical).
    # Two rings hold no step in common: the advice reaches one step past B's last.
    script = write_script("killed_at.py", KILLED_AT)
    a_window, _ = record("killed_window_a", ["-1"], script, options=["--steps", "3:7"])
    a_ring, _ = record("killed_ring_a", ["-1"], script, options=["--ring", "40"])
    b, p = record_ending("killed_ring_b", ["5"], script, options=["--ring", "200"])
    check(p.returncode == -9, f"B killed by SIGKILL (got {p.returncode})")
    rc, r = diff(a_window, b)
    d = r.get("first_divergence") or {}
    check(rc == 1 and d.get("cause") == "ended",
          f"A's window goes on past B's end: ended early (got {rc} {r.get('status')} {d.get('cause')})")
    p = subprocess.run([TDBG, "diff", a_ring, b], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(p.returncode == 2 and re.search(r"record A again with --steps \d+:6, the steps B holds and the next", p.stderr),
          f"two rings with no step in common: record A over B's steps and the next (got {p.stderr!r})")


def case_ring_against_whole():
    # The ring of a run that crashed at a bad batch, whose code also checks each step's loss
    # (ops A does not run), against a whole run of the clean data: paired by step from the
    # ring's first whole step, not by position (B runs more ops per step, so the same position
    # is an earlier step of B): the checks are inserted ops, then the bad batch is the first
    # value that differs, at its step and line.
    script = write_script("ring_whole.py", RING_WHOLE)
    mark = marks(script)
    a, _ = record("ring_whole_a", ["clean"], script)
    b, p = record_ending("ring_whole_b", ["bad"], script, options=["--ring", "400"])
    check(p.returncode == 1, f"B raises at the bad batch (got {p.returncode})")
    rc, r = diff(a, b)
    d = r["first_divergence"] or {}
    v = d.get("value_after_structure") or {}
    line, _ = line_of(v.get("a"))
    check(rc == 1 and d.get("kind") == "structure" and (d.get("b") or {}).get("op") == "aten::isfinite"
          and v.get("cause") == "external_input" and (v.get("a") or {}).get("step") == 40 and line == mark["data"],
          f"the checks inserted, then the bad batch at step 40, line {mark['data']} (got {d.get('kind')} "
          f"{(d.get('b') or {}).get('op')}: {v.get('cause')} step {(v.get('a') or {}).get('step')} line {line})")


RING_WHOLE = r'''
import sys, torch
torch.manual_seed(0)
model = torch.nn.Linear(6, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(60):
    rows = [[float((step * 7 + i * 3 + j) % 11) for j in range(6)] for i in range(4)]
    if sys.argv[1] == "bad" and step == 40:
        rows[2][3] = float("nan")
    x = torch.tensor(rows)  # MARK:data
    loss = model(x).pow(2).mean()
    if sys.argv[1] == "bad":
        assert torch.isfinite(loss), f"loss is {loss.item()} at step {step}"
    opt.zero_grad(); loss.backward(); opt.step()
'''


def case_crash():
    # A process that a fault or an abort ends inside an op keeps that op, flagged unfinished
    # with its inputs, and the diff says the run ended inside it, not that the program changed.
    script = write_script("crash.py", CRASH)
    call_line = marks(script)["crash_call"]
    a, out_a = record("crash_a", ["-1", "segv"], script)
    # tdbg show on a copy whose strings table lost a name (overwritten pages): one line, exit 2.
    damaged = os.path.join(WORK, "crash_damaged")
    shutil.rmtree(damaged, ignore_errors=True)
    shutil.copytree(a, damaged)
    import sqlite3
    for db in glob.glob(os.path.join(damaged, "*.sqlite")):
        with sqlite3.connect(db) as con:
            con.execute("DELETE FROM strings WHERE text = 'aten::tanh'")
    p = subprocess.run([TDBG, "show", "--limit", "0", damaged], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    check(p.returncode == 2 and p.stderr.startswith("tdbg show: ") and "corrupt" in p.stderr
          and p.stderr.count("\n") == 1,
          f"tdbg show on a damaged strings table: exit {p.returncode}, {p.stderr!r}")
    for how, sig, name in (("segv", 11, "SIGSEGV"), ("abort", 6, "SIGABRT"),
                           ("kill_abort", 6, "SIGABRT"), ("double_free", 6, "SIGABRT")):
        out, p = record_ending("crash_b_" + how, ["2", how], script)
        check(p.returncode == -sig, f"{how}: killed by signal {sig}, as without tdbg (got {p.returncode})")
        check(out_a.startswith(p.stdout) and p.stdout.count("\n") == 2,
              f"{how}: B printed steps 0 and 1 as A did (got {p.stdout!r})")
        # A writer blocked in free() after its commit (the heap is broken) is not waited for.
        check("did not finish within 10 s" not in p.stderr,
              f"{how}: the close did not wait out its bound: {p.stderr[-300:]!r}")
        rc, r = diff(a, out)
        d = r["first_divergence"]
        check(rc == 1 and d is not None and d["cause"] == "ended",
              f"{how}: cause ended (got {d and d['cause']}: {d and d.get('detail')})")
        # The ops A runs after B ended are counted in their own steps (2 to 5), not all in 2.
        steps = [row["step"] for row in ((d or {}).get("growth") or {}).get("steps", [])]
        check(steps == [2, 3, 4, 5], f"{how}: growth spreads A's remaining ops over steps (got {steps})")
        if d is None:
            continue
        detail = d.get("detail", "")
        check(f"was ended by signal {sig} ({name}) inside crashtest::scale at crash.py:{call_line} "
              in detail,
              f"{how}: the detail names the op it ended inside, with its line: {detail}")
        check(d["a"] is not None and d["a"]["op"] == "aten::tanh" and d["a"]["step"] == 2,
              f"{how}: A's next op is the tanh B never ran, at step 2 (got {d['a']})")
        blocks = flagged_in_show(out)
        check(len(blocks) == 1 and "crashtest::scale" in blocks[0][0]
              and "in 0 float32[2x4]" in blocks[0][1] and "arg step = 2" in blocks[0][2],
              f"{how}: tdbg show marks crashtest::scale unfinished, with its input: {blocks}")
        if how == "segv":
            trace = os.path.join(WORK, "crash_segv_trace.json")
            subprocess.run([TDBG, "export", "--chrome-trace", "-o", trace, out], check=True)
            with open(trace) as f:
                events = json.load(f)["traceEvents"]
            marked = [e["name"] for e in events if e.get("args", {}).get("unfinished")]
            check(marked == ["crashtest::scale"],
                  f"{how}: the Chrome trace marks the op the process ended in (got {marked})")
    # A hang inside an op that another thread's abort (a watchdog) or a SIGTERM from outside (a
    # launcher's timeout) ends: no flag marks the op the main thread was stuck in, but each
    # thread's account at the close names it.
    for how, sig, name in (("watchdog", 6, "SIGABRT"), ("hang", 15, "SIGTERM"),
                           ("hang_backward", 15, "SIGTERM")):
        if how == "hang_backward":
            # Stuck in a custom Function's backward: the node is placed at its forward's line.
            out = os.path.join(WORK, "crash_b_" + how)
            shutil.rmtree(out, ignore_errors=True)
            proc = subprocess.Popen([TDBG, "record", "-o", out, "--", PYTHON, script, "2", how],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for line in proc.stdout:
                if line == "waiting\n":
                    proc.send_signal(signal.SIGTERM)
                    break
            proc.communicate(timeout=60)
            shown = subprocess.run([TDBG, "show", "--limit", "1", out], stdout=subprocess.PIPE,
                                   text=True).stdout.splitlines()
            slow_line = marks(script)["slow_call"]
            check(proc.returncode == -signal.SIGTERM and len(shown) > 1 and
                  f"was inside SlowBackward at crash.py:{slow_line}" in shown[1],
                  f"{how}: the backward node is named at its forward's line: {proc.returncode} {shown[:2]}")
            continue
        out = os.path.join(WORK, "crash_b_" + how)
        shutil.rmtree(out, ignore_errors=True)
        proc = subprocess.Popen([TDBG, "record", "-o", out, "--", PYTHON, script, "2", how],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line == "waiting\n":
                if how == "hang":
                    proc.send_signal(signal.SIGTERM)  # forwarded to the program
                break
        proc.communicate(timeout=60)
        check(proc.returncode == -sig and "".join(lines) == out_a[:out_a.index("2 ")] + "waiting\n",
              f"{how}: killed by signal {sig} after steps 0 and 1 (got {proc.returncode}: {lines})")
        rc, r = diff(a, out)
        d = r["first_divergence"] or {}
        check(rc == 1 and d.get("cause") == "ended" and d.get("ended_step") == 2 and
              f"was ended by signal {sig} ({name}) while this thread was inside crashtest::scale "
              f"at crash.py:{call_line}, after " in d.get("detail", ""),
              f"{how}: the detail names the op the main thread was inside: {d.get('detail')}")
        notes = " ".join(r.get("notes", []))
        check(f"while thread 0 (main) was inside crashtest::scale at crash.py:{call_line}:" in notes,
              f"{how}: the note about B's ending names it too: {notes}")
        shown = subprocess.run([TDBG, "show", "--limit", "1", out], stdout=subprocess.PIPE,
                               text=True).stdout.splitlines()
        check(len(shown) > 1 and shown[1] == f"the process was ended by signal {sig} ({name}) "
              f"while thread 0 (main) was inside crashtest::scale at crash.py:{call_line}",
              f"{how}: tdbg show says how the process ended, under its header: {shown[:2]}")
        # A bundle numbers strings and frames afresh: the account must still name the op.
        bundle = os.path.join(WORK, f"crash_{how}.tar.gz")
        unpacked = os.path.join(WORK, f"crash_{how}_bundle")
        shutil.rmtree(unpacked, ignore_errors=True)
        p = subprocess.run([TDBG, "bundle", a, out, "-o", bundle], capture_output=True, text=True)
        with tarfile.open(bundle) as tar:
            tar.extractall(unpacked)
        b_dbs = glob.glob(os.path.join(unpacked, "*", "runs", "b", "*.sqlite"))
        shown = subprocess.run([TDBG, "show", "--limit", "1", *b_dbs[:1]], stdout=subprocess.PIPE,
                               text=True).stdout.splitlines()
        check(p.returncode == 0 and len(b_dbs) == 1 and len(shown) > 1 and
              f"while thread 0 (main) was inside crashtest::scale at crash.py:{call_line}" in shown[1],
              f"{how}: the bundle's copy of B says the same (got {p.returncode}, {b_dbs}, {shown[:2]})")
    # A DataLoader worker's segfault: torch's handler takes it and raises it again, and the
    # worker's database still gets the op it crashed in.
    dl_script = write_script("crash_dl.py", DL_CRASH)
    dl_line = marks(dl_script)["dl_call"]
    a_dl, _ = record("crash_dl_a", ["-1"], dl_script)
    b, p = record_ending("crash_dl_b", ["5"], dl_script)
    # (torch words it by which of its checks sees the dead worker first: its own message, or
    # the pipe's error when the parent was reading from the worker as it died: a reset, or an
    # EOFError that Python at times cannot even print. Untraced, 40 runs gave all of these.)
    check(p.returncode == 1 and ("exited unexpectedly" in p.stderr
                                 or "is killed by signal" in p.stderr
                                 or "ConnectionResetError" in p.stderr
                                 or "EOFError" in p.stderr),
          f"DataLoader: the main process fails as without tdbg (exit {p.returncode}: "
          f"{p.stderr[-300:]!r})")
    rc, r = diff(a_dl, b)
    d = r["first_divergence"] or {}
    check(rc == 1 and d.get("cause") == "ended" and
          f"was ended by signal 11 (SIGSEGV) inside dlcrash::scale at crash_dl.py:{dl_line}" in d.get("detail", ""),
          f"DataLoader: the worker's crash is named with its op and line: "
          f"{r['first_divergence'] and r['first_divergence'].get('detail')} {r.get('notes')}")
    # Unreadable memory behind an input (a mapped file truncated under it): tdbg's read of
    # the input steps over the fault (the input is "not hashed", memory that cannot be read),
    # the op's own read ends the program with SIGBUS, as without tdbg, and the op is named.
    bus_line = marks(script)["bus_call"]
    a_bus, _ = record("crash_a_bus", ["-1", "bus"], script)
    b, p = record_ending("crash_b_bus", ["2", "bus"], script)
    check(p.returncode == -7, f"bus: killed by SIGBUS (got {p.returncode})")
    rc, r = diff(a_bus, b)
    d = r["first_divergence"]
    check(rc == 1 and d is not None and d["cause"] == "ended"
          and f"was ended by signal 7 (SIGBUS) inside aten::sum at crash.py:{bus_line} " in d.get("detail", ""),
          f"bus: the run ended inside the sum that read the truncated file (got {d})")
    blocks = flagged_in_show(b)
    check(len(blocks) == 1 and "aten::sum" in blocks[0][0]
          and "memory that cannot be read" in blocks[0][1]
          and "unfinished" in blocks[-1][-1] and "as tdbg read its inputs" not in blocks[-1][-1],
          f"bus: tdbg show marks aten::sum unfinished, its input not read by tdbg: {blocks}")
    # An op that raised (a Python exception out of the op): kept with its inputs, flagged
    # raised; the same inputs with an error in one run only is where the runs part, and two
    # runs that raise and catch the same error are identical.
    b, p = record_ending("crash_b_raise", ["2", "raise"], script)
    check(p.returncode == 1 and "scale failed at step 2" in p.stderr,
          f"raise: exits 1 with the traceback (got {p.returncode}: {p.stderr[-200:]!r})")
    rc, r = diff(a, b)
    d = r["first_divergence"]
    check(rc == 1 and d is not None and d["cause"] == "structure"
          and "raised an error in B only, with the same inputs" in d.get("detail", "")
          and d["b"] is not None and d["b"]["op"] == "crashtest::scale" and d["b"]["raised"],
          f"raise: the runs part at the op that raised in B only (got {d})")
    check(any("B's process 0 (pid " in n and "exited with status 1 (an uncaught Python exception"
              in n for n in r.get("notes", [])),
          f"raise: a note says how B's process ended (got {r.get('notes')})")
    blocks = flagged_in_show(b, "raised")
    check(len(blocks) == 1 and "crashtest::scale" in blocks[0][0]
          and "in 0 float32[2x4]" in blocks[0][1],
          f"raise: tdbg show flags crashtest::scale raised, with its input: {blocks}")
    caught = [record("crash_catch_%d" % k, ["2", "catch"], script)[0] for k in range(2)]
    rc, r = diff(caught[0], caught[1])
    check(rc == 0 and r["status"] == "identical",
          f"catch: two runs that raise and catch the same error are identical (exit {rc})")
    # A libtorch C++ program ended by a c10::Error that nothing catches (std::terminate, then
    # abort): the op that threw is kept with the inputs it was given.
    program = os.environ.get("SHAPE_ERROR_CPP")
    if not program or not os.path.exists(program):
        print("SKIP (C++ part): no shape_error_cpp built (no libtorch)")
        return
    a, b = os.path.join(WORK, "crash_cpp_a"), os.path.join(WORK, "crash_cpp_b")
    for run in (a, b):
        shutil.rmtree(run, ignore_errors=True)
    p = subprocess.run([TDBG, "record", "-o", a, "--", program], stdout=subprocess.DEVNULL)
    check(p.returncode == 0, f"C++: the good run exits 0 (got {p.returncode})")
    plain = subprocess.run([program, "--bad-step", "3"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    p = subprocess.run([TDBG, "record", "-o", b, "--", program, "--bad-step", "3"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(p.returncode == plain.returncode == -6 and p.stdout == plain.stdout
          and "mat1 and mat2 shapes cannot be multiplied" in p.stderr,
          f"C++: aborts as without tdbg (exit {p.returncode}, without {plain.returncode})")
    rc, r = diff(a, b)
    d = r["first_divergence"]
    check(d is not None and d["a"] and d["a"]["op"] == "aten::randn" and d["a"]["step"] == 3,
          f"C++: the first divergence is the bad batch's randn at step 3 (got {d and d['a']})")
    notes = " ".join(r.get("notes", []))
    check("was ended by signal 6 (SIGABRT) inside aten::addmm" in notes,
          f"C++: a note names the op the abort came in: {notes}")
    blocks = flagged_in_show(b)
    check(len(blocks) == 1 and "aten::addmm" in blocks[0][0]
          and "in 1 float32[32x7]" in " ".join(blocks[0]),
          f"C++: tdbg show marks the addmm unfinished with the 32x7 batch: {blocks}")
    # Source lines from the program's debug info (built with -g), read by tdbg, not recorded:
    # the addmm is in Net::forward, the randn at its line of main.
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpp", "shape_error.cpp")
    with open(source) as f:
        lines = f.read().splitlines()
    forward_line = next(n for n, t in enumerate(lines, 1) if "torch::Tensor forward(" in t)
    randn_line = next(n for n, t in enumerate(lines, 1) if "at::randn(" in t)
    check(f"inside aten::addmm at shape_error.cpp:{forward_line}:" in notes,
          f"C++: the unfinished addmm is at shape_error.cpp:{forward_line}, in Net::forward: {notes}")
    src = (d or {}).get("a", {}).get("source") or {}
    check(src.get("file", "").endswith("/shape_error.cpp") and src.get("line") == randn_line
          and src.get("binary") == os.path.realpath(program) and src.get("offset", "").startswith("0x"),
          f"C++: the randn's source is shape_error.cpp:{randn_line}, its binary and offset kept: {src}")
    check(len(blocks) == 1 and f"shape_error.cpp:{forward_line}" in blocks[0][0],
          f"C++: tdbg show gives the unfinished addmm its line: {blocks and blocks[0][0]}")
    text = diff_text(a, b)
    # The randn is in a lambda of main: its own frame, or inlined in main's; named either way.
    check(re.search(r"shape_error\.cpp:%d in (main::\{lambda#1\}::operator\(\)|"
                    r"operator\(\) inlined in main)\n" % randn_line, text)
          and "addr2line -C" not in text,
          f"C++: tdbg diff prints the line and the lambda's name, and no addr2line hint for "
          f"frames that have one: {text}")
    # torch's at::randn, inlined into that line, is library code: counted, not listed.
    stack = text[text.find("  stack ("):]
    check("/usr/include/ATen/" not in stack and "library frame(s)" in stack,
          f"C++: the stack leaves inlined library code out: {stack}")
    # The report's data (what the viewer shows) carries the same lines.
    report = os.path.join(WORK, "crash_cpp_report")
    shutil.rmtree(report, ignore_errors=True)
    p = subprocess.run([TDBG, "report", "-o", report, a, b], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    html = open(os.path.join(report, "index.html")).read() if p.returncode == 0 else ""
    # (An op row of the viewer's tables, not the diff's own JSON, which the report embeds too.)
    check(re.search(r'"name":"aten::addmm","parent":[-0-9]+,"region":[0-9]+,"rng":null,'
                    r'"seq":[0-9]+,"source":\{"binary":"[^"]*","file":"[^"]*/shape_error\.cpp"',
                    html) is not None,
          f"C++: the report's ops have their source lines (exit {p.returncode} {p.stderr[-200:]!r})")
    # The bundle snapshots the program's source, not the torch and libstdc++ headers its
    # inlined frames point into.
    bundle = os.path.join(WORK, "crash_cpp.tar.gz")
    p = subprocess.run([TDBG, "bundle", a, b, "-o", bundle], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    with tarfile.open(bundle) as tar:
        sources = [n.split("/sources/", 1)[1] for n in tar.getnames() if "/sources/" in n]
    check(p.returncode == 0 and sources and all(n.endswith("shape_error.cpp") for n in sources),
          f"C++: the bundle's sources are the program's only (exit {p.returncode}): {sources}")

    # The program rebuilt after the recording: the file at the recorded path is another binary
    # (its build-id differs), so its debug info says nothing about these offsets.
    copy = os.path.join(WORK, "crash_cpp_program")
    shutil.copyfile(program, copy)
    os.chmod(copy, 0o755)
    a, b = os.path.join(WORK, "crash_cpp_stale_a"), os.path.join(WORK, "crash_cpp_stale_b")
    for run, args in ((a, []), (b, ["--bad-step", "3"])):
        shutil.rmtree(run, ignore_errors=True)
        subprocess.run([TDBG, "record", "-o", run, "--", copy, *args], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    other = os.environ.get("TRAIN_CPP")
    shutil.copyfile(other if other and os.path.exists(other) else "/bin/true", copy)
    rc, r = diff(a, b)
    d = r["first_divergence"]
    notes = r.get("warnings", [])
    src = (d or {}).get("a", {}).get("source") or {}
    copy = os.path.realpath(copy)  # as the recorder names it
    check(src.get("file") == copy and src.get("line") == 0 and " +0x" in src.get("function", ""),
          f"C++, binary replaced: the randn's frame stays as recorded, without a line: {src}")
    check(f"{copy} changed since the recording: C++ frames shown without lines" in notes,
          f"C++, binary replaced: a note says why there are no lines: {notes}")
    text = diff_text(a, b)
    check("shape_error.cpp" not in text and "is another build now; with the build that ran: "
          "addr2line -C -f -i -e BUILD 0x" in text,
          "C++, binary replaced: no line in the text, and the addr2line hint is for the build "
          "that ran, not the file there now")

    # Built without debug info (here: stripped of it): no lines, and the hint is for a build
    # with -g, not for the binary that has none.
    bare = os.path.join(WORK, "crash_cpp_bare")
    shutil.copyfile(program, bare)
    os.chmod(bare, 0o755)
    subprocess.run(["strip", "--strip-debug", bare], check=True)
    a, b = os.path.join(WORK, "crash_cpp_bare_a"), os.path.join(WORK, "crash_cpp_bare_b")
    for run, args in ((a, []), (b, ["--bad-step", "3"])):
        shutil.rmtree(run, ignore_errors=True)
        subprocess.run([TDBG, "record", "-o", run, "--", bare, *args], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    text = diff_text(a, b)
    check(f"(lines: {os.path.realpath(bare)} has no debug info; built again with -g and the same "
          "flags: addr2line -C -f -i -e BUILD 0x" in text,
          f"C++ without debug info: the addr2line hint is for a -g build: {text}")
    # A -g build read without addr2line on PATH: that is said, not "no debug info".
    a, b = os.path.join(WORK, "crash_cpp_noaddr_a"), os.path.join(WORK, "crash_cpp_noaddr_b")
    for run, args in ((a, []), (b, ["--bad-step", "3"])):
        shutil.rmtree(run, ignore_errors=True)
        subprocess.run([TDBG, "record", "-o", run, "--", program, *args], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    text = subprocess.run([TDBG, "diff", a, b], stdout=subprocess.PIPE, text=True,
                          env=dict(os.environ, PATH="/nonexistent")).stdout
    check("(lines: addr2line (binutils) is not on PATH; with it: addr2line -C -f -i -e "
          f"{os.path.realpath(program)} 0x" in text and "has no debug info" not in text,
          f"C++ without addr2line: said so, with the command for the binary as it is: {text}")


def case_cpp_weight_write():
    # The C++ optimizer steps an alias of each parameter made afresh in every step
    # (`p.data()`): a weight written in place before a step (weight surgery) must still be
    # named as what made the values the step reads, not data from outside torch.
    program = os.environ.get("TRAIN_CPP")
    if not program or not os.path.exists(program):
        print("skip: the C++ example (train_cpp) is not built")
        sys.exit(77)
    runs = []
    for name, args in (("cpp_write_a", []), ("cpp_write_b", ["--scale-step", "3"])):
        run = os.path.join(WORK, name)
        shutil.rmtree(run, ignore_errors=True)
        subprocess.run([TDBG, "record", "-q", "-o", run, "--", program, "--steps", "6", *args],
                       stdout=subprocess.DEVNULL, check=True)
        runs.append(run)
    rc, r = diff(*runs)
    d = r["first_divergence"] or {}
    inserted = [o.get("op") for h in d.get("structural_changes") or [] for o in h.get("inserted") or []]
    check(d.get("kind") == "structure" and (d.get("b") or {}).get("step") == 3 and "aten::mul_" in inserted,
          f"B's in-place mul_ at step 3 is the change (got {d.get('kind')}, {d.get('detail')}, {inserted})")
    v = d.get("value_after_structure") or {}
    check(v.get("cause") != "external_input" and "aten::mul_" in (v.get("detail") or ""),
          f"the first value it changed is said to come from that mul_, not from outside torch "
          f"(got {v.get('cause')}: {v.get('detail')})")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        sys.exit("usage: diff_e2e.py " + "|".join(CASES))
    os.makedirs(WORK, exist_ok=True)
    CASES[sys.argv[1]]()
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
