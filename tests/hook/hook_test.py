"""End-to-end tests of what libtdbg_torch.so records: real /usr/bin/python3, real torch, the
run database read back with SQLite through the views of docs/schema.md.

Each case runs small scripts (or the examples) with the hook loaded and checks the database.
Usage: hook_test.py --lib build/lib/libtdbg_torch.so --case NAME [--examples DIR] [--cpp BIN]
Run with no --case to list the cases.
"""
import argparse
import glob
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap

ARGS = None


class Run:
    """One recorded run: its directory, standard output and databases."""

    def __init__(self, out_dir, stdout, stderr=""):
        self.dir = out_dir
        self.stdout = stdout
        self.stderr = stderr
        self.paths = sorted(glob.glob(os.path.join(out_dir, "*.sqlite")))

    def db(self, pid=None):
        """The database of `pid`, or of the only/first process that recorded ops."""
        for path in self.paths:
            con = connect(path)
            meta = dict(con.execute("select key, value from meta"))
            if pid is not None and meta.get("pid") != str(pid):
                continue
            if pid is None and meta.get("ppid") and any(
                    _meta(p).get("pid") == meta.get("ppid") for p in self.paths):
                continue  # a child; the caller wants the parent
            return con
        raise AssertionError("no database for pid %s in %s" % (pid, self.paths))


def connect(path):
    """A read-only connection with tdbg's SQL functions loaded, so the views work."""
    con = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    con.enable_load_extension(True)
    con.load_extension(os.path.join(os.path.dirname(ARGS.lib), "libtdbg_sqlite"))
    con.enable_load_extension(False)
    return con


def _meta(path):
    con = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    return dict(con.execute("select key, value from meta"))


# Every work directory a case makes; main() removes them when the case passes and keeps them
# (and names them) when it fails, for a look at the recording.
WORK_DIRS = []


def work_dir():
    work = tempfile.mkdtemp(prefix="tdbg_hook_")
    WORK_DIRS.append(work)
    return work


def run_python(code, env=None, args=(), record=True, name="script.py"):
    """Runs `code` as a script file under the hook; returns the `Run`."""
    work = work_dir()
    script = os.path.join(work, name)
    with open(script, "w") as f:
        f.write(textwrap.dedent(code))
    return run_command([ARGS.python, script] + list(args), env=env, record=record, cwd=work)


def run_command(cmd, env=None, record=True, cwd=None, timeout=600):
    work = cwd or work_dir()
    out_dir = os.path.join(work, "run")
    full_env = dict(os.environ)
    for key in list(full_env):
        if key.startswith("TDBG_"):
            del full_env[key]
    if record:
        # A sanitizer build's hook needs the sanitizer runtime loaded first (`--preload-first`).
        full_env["LD_PRELOAD"] = " ".join(x for x in (ARGS.preload_first, ARGS.lib) if x)
        if ARGS.preload_first:
            full_env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
        full_env["TDBG_OUT"] = out_dir
        full_env["TDBG_QUIET"] = "1"
    full_env.update(env or {})
    proc = subprocess.run(cmd, env=full_env, cwd=work, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError("%s exited with %d:\n%s" % (cmd, proc.returncode,
                                                         proc.stderr.decode()[-3000:]))
    return Run(out_dir, proc.stdout.decode(), proc.stderr.decode())


def one(con, sql, *params):
    row = con.execute(sql, params).fetchone()
    if row is None:
        raise AssertionError("no row for: %s %s" % (sql, params))
    return row


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def first_op(con, name, after=-1):
    return one(con, "select seq, parent, depth, step, module, stack, user_frame, fwd, flags, rng "
               "from op_view where name = ? and seq > ? order by seq limit 1", name, after)


def tensors(con, seq, role):
    return con.execute("select idx, status, hash, producer, reason, shape from tensor_view "
                       "where op = ? and role = ? order by idx", (seq, role)).fetchall()


# ---- cases ---------------------------------------------------------------------------------

def case_nesting():
    r = run_python("""
        import torch
        x = torch.ones(3, 4)
        w = torch.ones(5, 4)
        b = torch.zeros(5)
        y = torch.nn.functional.linear(x, w, b)
    """)
    con = r.db()
    linear = first_op(con, "aten::linear")
    check(linear[2] == 0 and linear[1] is None, "aten::linear is top level: %s" % (linear,))
    addmm = first_op(con, "aten::addmm", linear[0])
    check(addmm[1] == linear[0] and addmm[2] == 1,
          "aten::addmm nests in aten::linear at depth 1: %s" % (addmm,))
    # Every parent is an earlier op one level up.
    for seq, parent, depth in con.execute("select seq, parent, depth from op_view "
                                          "where parent is not null"):
        pdepth = one(con, "select depth from op_view where seq = ?", parent)[0]
        check(parent < seq and pdepth == depth - 1, "op %d: bad parent %d" % (seq, parent))


def case_inplace():
    r = run_python("""
        import torch
        x = torch.arange(4.0)
        x.add_(1)
        y = torch.arange(1.0, 5.0)   # what x holds after the in-place op
    """)
    con = r.db()
    arange = first_op(con, "aten::arange")
    produced = [t for t in tensors(con, arange[0], "output")][0]
    add = first_op(con, "aten::add_")
    check(add[8] & 4, "aten::add_ is flagged in-place")
    before = tensors(con, add[0], "input")[0]
    after = tensors(con, add[0], "output")[0]
    check(before[2] == produced[2],
          "the in-place input is hashed before the mutation: %s vs %s" % (before, produced))
    check(before[2] != after[2], "the output hash is taken after the mutation")
    arange2 = first_op(con, "aten::arange", add[0])
    fresh = tensors(con, arange2[0], "output")[0]
    check(after[2] == fresh[2], "in-place result hashes like the same values made fresh")


def case_uninitialized():
    r = run_python("""
        import torch
        e = torch.empty(5)
        v = e.view(5)      # a view of it: still uninitialized, nothing read
        e.fill_(2.0)
        g = e * 1          # now it is defined
        u = torch.empty(3)
        u.numpy()[:] = 7.0 # filled outside torch's ops, as torch.tensor([...]) does
        h = u + 1          # read at the top level: hashed as data from outside
        k = torch.full((3,), 7.0)
        b = torch.empty(3)
        b.index_put_((torch.tensor([0, 1, 2]),), torch.ones(3))  # filled by an op that writes it
        o = torch.empty(6)
        o[3:] = torch.full((3,), 5.0)  # only the tail is written, through a view
        tail = o[3:]                   # a view of the written part
        s = tail.sum()                 # reads only what was written
        kv = torch.empty(2, 4)
        kv[:, 0] = torch.full((2,), 3.0)  # column 0 written (a cache filled step by step)
        seen = kv[:, :1]                  # a view of a view of the written part
        seen.cos()
        z = torch.empty(0, 4)             # no element: nothing uninitialized to read
        z.sum(0)
    """)
    con = r.db()
    empty = first_op(con, "aten::empty")
    check(tensors(con, empty[0], "output")[0][1] == "uninitialized", "aten::empty output")
    view = first_op(con, "aten::view", empty[0])
    check(tensors(con, view[0], "input")[0][1] == "uninitialized", "a view's unread input")
    check(tensors(con, view[0], "output")[0][1] == "uninitialized", "a view of it")
    mul = first_op(con, "aten::mul", view[0])
    status = tensors(con, mul[0], "input")[0][1]
    check(status in ("known", "hashed"), "after fill_ the input is data: %s" % status)
    add = first_op(con, "aten::add", mul[0])
    read = tensors(con, add[0], "input")[0]
    check(read[1] == "hashed", "memory filled outside torch and read at the top level is hashed: %s"
          % (read,))
    full = tensors(con, first_op(con, "aten::full", add[0])[0], "output")[0]
    check(read[2] == full[2], "with the values it holds: %s vs %s" % (read, full))
    put = first_op(con, "aten::index_put_", add[0])
    written = tensors(con, put[0], "input")[0]
    check(written[1] == "uninitialized",
          "an op writing into an empty buffer does not hash its garbage: %s" % (written,))
    five = tensors(con, first_op(con, "aten::full", put[0])[0], "output")[0]
    sliced = first_op(con, "aten::slice", first_op(con, "aten::copy_", put[0])[0])
    base = tensors(con, sliced[0], "input")[0]
    check(base[1] != "hashed", "a view of a partly written buffer does not hash the unwritten "
          "rest: %s" % (base,))
    summed = tensors(con, first_op(con, "aten::sum", sliced[0])[0], "input")[0]
    check(summed[1] == "hashed" and summed[2] == five[2],
          "its reader hashes what the view covers, the written values: %s vs %s" % (summed, five))
    wrote = first_op(con, "aten::copy_", put[0])
    check(summed[3] == wrote[0], "and names the op that wrote them (copy_ at seq %d): %s"
          % (wrote[0], summed))
    cos = first_op(con, "aten::cos", sliced[0])
    for seq, in con.execute("select seq from op_view where name = 'aten::slice' and seq > ? and "
                            "seq < ? order by seq desc limit 2", (sliced[0], cos[0])):
        viewed = tensors(con, seq, "input")[0]
        check(viewed[1] != "hashed", "a view of a view never hashes the buffer: %s" % (viewed,))
    read_kv = tensors(con, cos[0], "input")[0]
    wrote_kv = con.execute("select max(seq) from op_view where name = 'aten::copy_' and seq < ?",
                           (cos[0],)).fetchone()[0]
    check(read_kv[1] == "hashed" and read_kv[3] == wrote_kv,
          "its reader hashes what it reads, made by the copy_ into the column (seq %s): %s"
          % (wrote_kv, read_kv))
    nothing = first_op(con, "aten::sum", cos[0])
    read_z = tensors(con, nothing[0], "input")[0]
    check(read_z[1] in ("known", "hashed") and not read_z[4],
          "a tensor of no element is data, not memory left uninitialized: %s" % (read_z,))


def case_unhashable():
    # A sparse tensor is not hashed, but its reader still names the op that made it (so that
    # `tdbg nan` and `tdbg diff` can point there).
    r = run_python("""
        import torch
        s = torch.sparse_coo_tensor(torch.tensor([[0, 1]]), torch.tensor([0., 1.]), (3,))
        d = (s / 0.0).to_dense()
    """)
    con = r.db()
    div = first_op(con, "aten::div")
    out = tensors(con, div[0], "output")[0]
    check(out[1] == "not_hashed", "a sparse output is not hashed: %s" % (out,))
    dense = first_op(con, "aten::to_dense", div[0])
    read = tensors(con, dense[0], "input")[0]
    check(read[1] == "not_hashed" and read[3] == div[0],
          "its reader names the op that made it: %s (div is seq %d)" % (read, div[0]))


def case_foreign_memory():
    # Memory torch did not allocate (a NumPy array's) can change with no op seeing it: every
    # read hashes it again; a recorded op that wrote it since is named as its producer.
    r = run_python("""
        import numpy as np, torch
        arr = np.zeros(4, dtype=np.float32)
        x = torch.from_numpy(arr)
        x.sum()
        arr[2] = 7.0       # through NumPy: no op sees it
        x.cos()
        x[1] = 5.0         # a recorded op writes it
        x.mul(2)
    """)
    con = r.db()
    total = first_op(con, "aten::sum")
    cos = first_op(con, "aten::cos", total[0])
    a, b = tensors(con, total[0], "input")[0], tensors(con, cos[0], "input")[0]
    check(a[1] == "hashed" and b[1] == "hashed" and a[2] != b[2],
          "each read hashes what the array holds now: %s, %s" % (a, b))
    writer = first_op(con, "aten::copy_", cos[0])
    mul = first_op(con, "aten::mul", cos[0])
    m = tensors(con, mul[0], "input")[0]
    check(m[1] == "hashed" and m[3] == writer[0],
          "read after a recorded write names the writer: %s (copy_ is seq %d)" % (m, writer[0]))


def case_foreign_expanded():
    # An expand of foreign memory is hashed at every read by the values it holds once: reading
    # a trillion-element broadcast of four NumPy floats costs four floats (its full logical
    # size would never finish), the summary still describes the whole, and a change through
    # NumPy still changes the hash.
    r = run_python("""
        import numpy as np, torch
        arr = np.array([1.0, -2.0, 3.0, float("nan")], dtype=np.float32)
        big = torch.from_numpy(arr).expand(10**12, 4)
        big.index_select(0, torch.tensor([0, 10**12 - 1]))
        arr[0] = 5.0       # through NumPy: no op sees it
        big.index_select(0, torch.tensor([7]))
    """)
    con = r.db()
    first = first_op(con, "aten::index_select")
    second = first_op(con, "aten::index_select", first[0])
    a, b = tensors(con, first[0], "input")[0], tensors(con, second[0], "input")[0]
    check(a[1] == "hashed" and b[1] == "hashed" and a[2] != b[2],
          "each read hashes what the array holds now: %s, %s" % (a, b))
    summary = con.execute("select min, max, sum, nan from tensor_view where op = ? and "
                          "role = 'input' and idx = 0", (first[0],)).fetchone()
    check(summary == (-2.0, 3.0, 2.0 * 10**12, 10**12),
          "the summary is the whole broadcast's: %s" % (summary,))


def case_view():
    r = run_python("""
        import torch
        x = torch.arange(12.0)
        v = x.view(3, 4)
        t = v.t()
        s = x[2:6]
        v2 = x.view(3, 4)
    """)
    con = r.db()
    view = first_op(con, "aten::view")
    out = tensors(con, view[0], "output")[0]
    check(out[1] == "view" and out[2], "view output is a derived hash: %s" % (out,))
    tr = first_op(con, "aten::t")
    out_t = tensors(con, tr[0], "output")[0]
    check(out_t[1] == "view" and out_t[2] != out[2], "a transposed view hashes differently")
    view2 = first_op(con, "aten::view", view[0])
    check(tensors(con, view2[0], "output")[0][2] == out[2], "same view, same derived hash")
    hashed_views = one(con, "select count(*) from tensor_view t join op_view o on o.seq = t.op "
                       "where o.name in ('aten::view', 'aten::t', 'aten::slice') and "
                       "t.role = 'output' and t.status = 'hashed'")[0]
    check(hashed_views == 0, "views are never rehashed")


def case_set_data():
    # `Module.to(torch.float64)` assigns `p.data = p.to(torch.float64)`: the same TensorImpl and
    # version counter, a new storage and dtype. The next use must hash the new values, not
    # reuse the float32 entry (which made identical runs differ by heap addresses).
    r = run_python("""
        import torch
        torch.manual_seed(0)
        lin = torch.nn.Linear(4, 1)
        y = lin(torch.ones(2, 4))
        lin.to(torch.float64)
        z = lin(torch.ones(2, 4, dtype=torch.float64))
    """)
    con = r.db()
    first = first_op(con, "aten::linear")
    second = first_op(con, "aten::linear", first[0])
    converted = {}
    for (seq,) in con.execute("select seq from op_view where name = 'aten::_to_copy' and "
                              "seq > ? and seq < ?", (first[0], second[0])):
        out = tensors(con, seq, "output")[0]
        converted[out[5]] = out[2]
    check(set(converted) == {"1x4", "1"}, "weight and bias converted: %s" % converted)
    before = tensors(con, first[0], "input")
    after = tensors(con, second[0], "input")
    for i, shape in ((1, "1x4"), (2, "1")):
        check(after[i][2] == converted[shape],
              "input %d of the second linear has the float64 hash %s: %s" % (i, converted[shape], after[i]))
        check(after[i][2] != before[i][2], "float32 and float64 hashes differ: %s" % (after[i],))


def case_steps():
    r = run_python("""
        import torch
        torch.manual_seed(0)
        m = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for i in range(3):
            opt.zero_grad()
            m(torch.ones(2, 4)).sum().backward()
            opt.step()
        torch.ones(1).neg()
    """)
    con = r.db()
    steps = con.execute("select r.start_seq, r.step from regions r join strings s "
                        "on s.id = r.name where s.text like 'Optimizer.step#%' order by r.id"
                        ).fetchall()
    check([s for _, s in steps] == [0, 1, 2], "three optimizer steps: %s" % steps)
    neg = first_op(con, "aten::neg")
    check(neg[3] == 3, "an op after the third step has step 3: %s" % (neg,))
    linears = [row[0] for row in con.execute(
        "select step from op_view where name = 'aten::linear' order by seq")]
    check(linears == [0, 1, 2], "forward passes by step: %s" % linears)
    zero_grad = one(con, "select count(*) from regions r join strings s on s.id = r.name "
                    "where s.text like 'Optimizer.zero_grad#%' and r.kind = 0")[0]
    check(zero_grad == 3, "zero_grad ranges are user regions")

    # Two optimizers stepped every iteration (a GAN): an iteration is one step, not two; then
    # the first optimizer alone (the second out of use).
    r = run_python("""
        import torch
        torch.manual_seed(0)
        d, g = torch.nn.Linear(4, 1), torch.nn.Linear(2, 4)
        od = torch.optim.Adam(d.parameters(), lr=1e-3)
        og = torch.optim.SGD(g.parameters(), lr=1e-2)
        for it in range(4):
            od.zero_grad(); d(g(torch.randn(3, 2)).detach()).mean().backward(); od.step()
            torch.full((1,), float(it)).sin()   # marks the generator's part of iteration `it`
            og.zero_grad(); (-d(g(torch.randn(3, 2)))).mean().backward(); og.step()
        for it in range(20):
            od.step()
        torch.ones(1).cosh()
    """)
    con = r.db()
    marks = con.execute("select step from op_view where name = 'aten::sin' order by seq").fetchall()
    # Only the first iteration's generator part cannot know yet that a second optimizer comes.
    check([m for (m,) in marks] == [1, 1, 2, 3], "two optimizers: one step per iteration: %s" % marks)
    exp = first_op(con, "aten::cosh")
    # Once the generator's optimizer is out of use (16 steps of the other without it), the
    # count catches up: each of the 20 steps counted.
    check(exp[3] == 24, "the remaining optimizer counts each of its steps after: %s" % (exp,))

    # Each optimizer's settings say which of the process's optimizers it is, by the order of
    # their first steps, also in a --steps window that begins at the second one's step.
    gan = """
        import torch
        torch.manual_seed(0)
        d, g = torch.nn.Linear(4, 1), torch.nn.Linear(2, 4)
        od = torch.optim.Adam(d.parameters(), lr=1e-3)
        og = torch.optim.Adam(g.parameters(), lr=1e-2)
        for it in range(3):
            od.zero_grad(); d(g(torch.randn(3, 2)).detach()).mean().backward(); od.step()
            og.zero_grad(); (-d(g(torch.randn(3, 2)))).mean().backward(); og.step()
    """
    for window in (None, "1:2"):
        con = run_python(gan, env={"TDBG_STEPS": window} if window else None).db()
        settings = [json.loads(text) for (text,) in con.execute(
            "select s.text from regions r join strings s on s.id = r.name where r.kind = 3 "
            "order by r.start_seq")]
        by_lr = {(o["groups"][0]["lr"], o["index"]) for o in settings}
        check(by_lr == {(1e-3, 1), (1e-2, 2)},
              "window %s: the optimizers' indexes by lr: %s" % (window, sorted(by_lr)))

    # Two threads, each training a model of its own at its own pace: each counts its own
    # iterations (one count for both would move in an order the scheduler picks).
    r = run_python("""
        import threading, time, torch
        def train(width, pause):
            torch.manual_seed(width)
            m = torch.nn.Linear(width, 1)
            opt = torch.optim.SGD(m.parameters(), lr=0.1)
            for it in range(5):
                opt.zero_grad(); m(torch.ones(2, width)).sum().backward(); opt.step()
                time.sleep(pause)
        threads = [threading.Thread(target=train, args=(w, p)) for w, p in ((3, 0.0), (5, 0.05))]
        for t in threads: t.start()
        for t in threads: t.join()
    """)
    con = r.db()
    for width in (3, 5):
        steps = [s for (s,) in con.execute(
            "select o.step from op_view o join tensor_view t on t.op = o.seq and t.role = 'input' "
            "and t.idx = 0 where o.name = 'aten::linear' and t.shape = ? order by o.seq",
            ("2x%d" % width,))]
        check(steps == [0, 1, 2, 3, 4], "thread training width %d counts its own steps: %s"
              % (width, steps))


def case_modules():
    r = run_python("""
        import torch, torch.nn as nn
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                return torch.tanh(self.fc(x))
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([Block(), Block()])
            def forward(self, x):
                for b in self.blocks:
                    x = b(x)
                return x
        net = Net()
        net(torch.ones(2, 4)).sum().backward()
    """)
    con = r.db()
    mods = [row[0] for row in con.execute(
        "select module from op_view where name = 'aten::addmm' and flags & 1 = 0 order by seq")]
    check(mods == ["Net.blocks.0.fc", "Net.blocks.1.fc"], "forward module paths: %s" % mods)
    tanh = [row[0] for row in con.execute(
        "select module from op_view where name = 'aten::tanh' order by seq")]
    check(tanh == ["Net.blocks.0", "Net.blocks.1"], "ops in the parent module: %s" % tanh)
    bw = con.execute("select b.module, f.module, f.name from op_view b join op_view f "
                     "on f.seq = b.fwd where b.flags & 1 and b.name like 'AddmmBackward%'"
                     ).fetchall()
    check(len(bw) == 2 and all(m == fm and fm.endswith(".fc") and n == "aten::addmm"
                               for m, fm, n in bw),
          "backward ops carry their forward op's module and link: %s" % bw)
    sum_op = first_op(con, "aten::sum")
    check(sum_op[4] is None, "an op outside any module has no module path")
    # With --ops, the first op recorded (where the hooks are installed) runs inside module
    # calls already begun, and nested in an op not recorded: its path and the next ones' are
    # still the whole tree's, not a layer's own class name.
    selected = run_python("""
        import torch, torch.nn as nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(4, 4)
                self.fc2 = nn.Linear(4, 2)
            def forward(self, x):
                return self.fc2(torch.tanh(self.fc1(x)))
        net = Net()
        for _ in range(2):
            net(torch.ones(2, 4)).sum().backward()
    """, env={"TDBG_OPS": "addmm"})
    mods = [row[0] for row in selected.db().execute(
        "select module from op_view where name = 'aten::addmm' order by seq")]
    check(mods == ["Net.fc1", "Net.fc2"] * 2, "--ops addmm: module paths from the first op: %s" % mods)
    # A forward that raised (caught by the script, which goes on) ran no post hook: the
    # module it was in must not claim the ops after it, nor parent the next new module.
    raised = run_python("""
        import torch, torch.nn as nn
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                return torch.tanh(self.fc(x))
        net = nn.Sequential(Block(), Block())
        try:
            net(torch.ones(2, 5))
        except RuntimeError:
            pass
        torch.ones(2).neg()
        net(torch.ones(2, 4)).sum()
        nn.Linear(4, 3)(torch.ones(1, 4)).exp()
    """)
    con = raised.db()
    rows = con.execute("select name, module from op_view where name in "
                       "('aten::addmm', 'aten::sum', 'aten::exp', 'aten::neg') order by seq").fetchall()
    check(rows == [("aten::addmm", "Sequential.0.fc"),  # the one that raised
                   ("aten::neg", None),  # right after it, before any module call
                   ("aten::addmm", "Sequential.0.fc"), ("aten::addmm", "Sequential.1.fc"),
                   ("aten::sum", None), ("aten::addmm", "Linear"), ("aten::exp", None)],
          "after a forward that raised, modules are as if it had returned: %s" % rows)
    # Layers called directly, outside any module call (`model[0](x)`, `self.enc(x)` in a
    # method that is not forward), are named in the tree of the module that holds them, so
    # that two of them are told apart; a module no variable holds keeps its class's name.
    direct = run_python("""
        import weakref, torch, torch.nn as nn
        class Lit(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(4, 4)
                self.head = nn.Linear(4, 2)
            def step(self, x):
                return self.head(self.enc(x)).sum()
        def train():
            model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2))
            x = torch.ones(2, 4)
            probe = torch.ones(3)
            freed = weakref.ref(probe)
            model[2](model[1](model[0](x))).sum()
            del probe
            print("probe freed" if freed() is None else "probe kept alive")
            Lit().step(x)
            nn.Linear(4, 3)(x)
        train()
    """)
    rows = [row[0] for row in direct.db().execute(
        "select module from op_view where name = 'aten::addmm' order by seq")]
    check(rows == ["Sequential.0", "Sequential.2", "Lit.enc", "Lit.head", "Linear"],
          "layers called directly are named in their holder's tree: %s" % rows)
    # Naming them keeps none of the caller's variables alive (a copy of a frame's locals
    # would, and so change when the program's objects are freed: a DDP shutdown hangs).
    check("probe freed" in direct.stdout, "the caller's objects are freed as without tdbg: %r"
          % direct.stdout)
    # A scripted module is named by the class it compiled, not RecursiveScriptModule, and a
    # traced one not TopLevelTracedModule (t148 F5).
    net = '''
        import torch
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(4, 2)
            def forward(self, x):
                return torch.relu(self.fc(x))
    '''
    for how in ("script", "trace"):
        compiled = run_python(net + '''
        torch.jit.%s(Net(), *([torch.ones(1, 4)] if "%s" == "trace" else []))(torch.ones(1, 4))
        ''' % (how, how))
        rows = [row[0] for row in compiled.db().execute(
            "select module from op_view where name = 'aten::relu' order by seq")]
        check(rows and rows[-1] == "Net", "a %sd module's ops are in its class's path: %s" % (how, rows))


def case_batch_norm_stats():
    # Training-mode batch norm updates running_mean/running_var in place through the data
    # pointer (no version bump, and torch 1.13's schema does not mark them written): each
    # batch_norm must read them as they are now, not as the init made them.
    r = run_python("""
        import torch
        torch.manual_seed(0)
        bn = torch.nn.BatchNorm1d(3)
        for _ in range(3):
            print(repr(float(bn.running_mean.sum())), repr(float(bn.running_var.sum())))
            bn(torch.randn(8, 3) * 2 + 1)
    """)
    printed = [tuple(float(x) for x in line.split()) for line in r.stdout.split("\n") if line]
    con = r.db()
    rows = con.execute("select t.op, t.idx, t.status, t.sum from tensor_view t "
                       "join op_view o on o.seq = t.op where o.name = 'aten::batch_norm' "
                       "and t.role = 'input' and t.idx in (3, 4) order by t.op, t.idx").fetchall()
    sums = [(rows[i][3], rows[i + 1][3]) for i in range(0, len(rows), 2)]
    check(len(sums) == 3 and all(st in ("hashed", "known") for _, _, st, _ in rows),
          "each batch_norm hashes its running stats: %s" % rows)
    check(all(abs(a - pa) < 1e-5 and abs(b - pb) < 1e-5 for (a, b), (pa, pb) in zip(sums, printed)),
          "the recorded running stats are the values the program had: %s, printed %s"
          % (sums, printed))


def case_kernel_writes_after_nested_op():
    # The slow conv kernel fills its output with the bias by a nested `copy_`, then multiplies
    # into it through the data pointer. With internal ops recorded (or under inference mode,
    # where every op is), the conv ops must hash what they return, not what the copy_ left.
    for env, mode in (({"TDBG_INTERNAL_OPS": "1"}, ""), ({}, "torch.inference_mode()")):
        r = run_python("""
            import torch
            torch.manual_seed(0)
            conv = torch.nn.Conv2d(3, 4, 3, padding=1)
            x = torch.randn(2, 3, 5, 5)
            with torch.backends.mkldnn.flags(enabled=False), %s:
                y = conv(x)
            print(repr(float(y.sum())))
        """ % (mode or "torch.no_grad()"), env=env)
        real = float(r.stdout.split()[0])
        con = r.db()
        sums = con.execute("select o.name, t.sum from op_view o join tensor_view t on t.op = o.seq "
                           "and t.role = 'output' and t.idx = 0 where o.name in ('aten::conv2d', "
                           "'aten::_slow_conv2d_forward')").fetchall()
        check(len(sums) == 2 and all(abs(v - real) < 1e-4 for _, v in sums),
              "%s: the conv's recorded output is its result (sum %r): %s" % (env or mode, real, sums))


def case_torchscript_line():
    # Ops the TorchScript interpreter runs get the scripted function's own line (and the script
    # frames below the Python call), not the line that called the function.
    r = run_python("""
        import torch
        @torch.jit.script
        def inner(a):
            return torch.relu(a)  # LINE_OF_RELU
        @torch.jit.script
        def outer(x, y):
            return inner(x * y) + 1.0
        @torch.jit.script
        def gelu(x):
            return x * torch.sigmoid(1.702 * x)
        x = torch.randn(4)
        for _ in range(3):  # the profiling executor runs the graph differently each time
            z = outer(x, x)  # LINE_OF_CALL
        z.sum()  # LINE_OF_SUM
        gelu(x)  # LINE_OF_GELU
    """, name="user_script.py")
    con = r.db()
    script = os.path.join(os.path.dirname(r.dir), "user_script.py")
    with open(script) as f:
        marks = {m: i + 1 for i, text in enumerate(f) for m in ("LINE_OF_RELU", "LINE_OF_CALL",
                                                                "LINE_OF_SUM", "LINE_OF_GELU")
                 if m in text}
    relus = con.execute("select f.file, f.line, f.function, o.stack from op_view o "
                        "join frame_view f on f.id = o.user_frame "
                        "where o.name = 'aten::relu'").fetchall()
    check(len(relus) == 3 and all(x[:3] == (script, marks["LINE_OF_RELU"], "inner")
                                  for x in relus),
          "relu is at its line in the scripted `inner`: %s (want line %d)"
          % (relus, marks["LINE_OF_RELU"]))
    # Its stack: inner's line, outer's call of inner, then the Python line calling outer.
    chain = []
    frame = relus[0][3]
    while frame:
        file, line, function, frame = one(con, "select file, line, function, parent "
                                               "from frame_view where id = ?", frame)
        chain.append((line, function))
    check(chain[0] == (marks["LINE_OF_RELU"], "inner") and chain[1][1] == "outer"
          and chain[2] == (marks["LINE_OF_CALL"], "<module>"),
          "the stack runs through both scripted functions to the Python call: %s" % chain[:4])
    total = first_op(con, "aten::sum")
    line = one(con, "select line from frame_view where id = ?", total[6])[0]
    check(line == marks["LINE_OF_SUM"], "an op after the scripted call has its own line: %d" % line)
    # `1.702 * x` runs TorchScript's builtin mul(float, Tensor), compiled from a source string
    # ("<string>"): never the user's line; the script's file is.
    files = [f for (f,) in con.execute(
        "select f.file from op_view o join frame_view f on f.id = o.user_frame "
        "where o.name = 'aten::mul' and o.seq > (select max(seq) from op_view where name = 'aten::sum')")]
    check(files and all(f == script for f in files),
          "the scripted gelu's muls are placed in the user's script, not '<string>': %s" % files)
    # Its innermost frame says what it is: TorchScript's builtin mul, called in gelu, at a line
    # TorchScript did not keep.
    builtins = con.execute(
        "select f.file, f.function from op_view o join frame_view f on f.id = o.stack "
        "where o.name = 'aten::mul' and o.seq > (select max(seq) from op_view where name = 'aten::sum')"
    ).fetchall()
    check(("<TorchScript builtin>", "mul (in gelu)") in builtins,
          "the builtin's frame is named as such: %s" % builtins)


def case_torchscript_stack():
    # The TorchScript interpreter's boxed calls hand RecordFunction its whole stack: a value
    # still used after the op (`a`, read again by the division) came first among the inputs
    # and the outputs. Each op records its own arguments and results only, named.
    r = run_python("""
        import torch
        @torch.jit.script
        def f(x: torch.Tensor) -> torch.Tensor:
            a = torch.relu(x)
            b = a.sum(-1, keepdim=True)
            return a / b
        x = torch.rand(3, 4)
        for _ in range(3):  # the profiling executor's later runs are the optimized graph
            y = f(x)
    """, name="user_script.py")
    con = r.db()
    sums = con.execute("select o.seq, "
                       "(select count(*) from tensor_view t where t.op = o.seq and t.role = 'input'), "
                       "(select count(*) from tensor_view t where t.op = o.seq and t.role = 'output'), "
                       "(select group_concat(a.name) from arg_view a where a.op = o.seq) "
                       "from op_view o where o.name = 'aten::sum'").fetchall()
    check(len(sums) == 3 and all(s[1:] == (1, 1, "dim,keepdim,dtype") for s in sums),
          "each scripted sum has its one input, one output and named arguments: %s" % sums)
    divs = con.execute("select o.seq, t.producer from op_view o join tensor_view t on t.op = o.seq "
                       "and t.role = 'input' and t.idx = 0 where o.name = 'aten::div'").fetchall()
    relus = [s for (s,) in con.execute("select seq from op_view where name = 'aten::relu'")]
    check(len(divs) == 3 and all(p in relus for _, p in divs),
          "each division's input 0 is made by the relu, not the sum: %s (relus %s)" % (divs, relus))


def case_source_line():
    r = run_python("""
        import torch
        x = torch.ones(3)
        y = torch.mul(x, 3)  # LINE_OF_MUL
    """, name="user_script.py")
    con = r.db()
    mul = first_op(con, "aten::mul")
    frame = one(con, "select file, line, function from frame_view where id = ?", mul[6])
    script = os.path.join(os.path.dirname(r.dir), "user_script.py")
    with open(script) as f:
        line = [i + 1 for i, text in enumerate(f) if "LINE_OF_MUL" in text][0]
    check(frame[0] == script and frame[1] == line,
          "user frame is the script's line: %s, want %s:%d" % (frame, script, line))
    stack = one(con, "select file from frame_view where id = ?", mul[5])
    check(stack[0] == script, "a direct call's innermost frame is the script too")
    lin = run_python("""
        import torch
        m = torch.nn.Linear(2, 2)
        m(torch.ones(1, 2))  # LINE_OF_CALL
    """, name="user_script.py")
    con = lin.db()
    linear = first_op(con, "aten::linear")
    inner = one(con, "select file from frame_view where id = ?", linear[5])[0]
    user = one(con, "select file, line from frame_view where id = ?", linear[6])
    check("torch/nn" in inner, "innermost frame is inside torch: %s" % inner)
    check(user[0].endswith("user_script.py") and user[1] == 4,
          "user frame skips torch's frames: %s" % (user,))
    # functorch (a package of its own beside torch in 1.13) and the forward torch.fx generates
    # are not the user's code either.
    fx = run_python("""
        import torch, torch.fx
        from functorch import make_functional, vmap
        class M(torch.nn.Module):
            def forward(self, x):
                return torch.tanh(x) * 2
        gm = torch.fx.symbolic_trace(M())
        gm(torch.ones(3))  # LINE_OF_FX
        fm, params = make_functional(torch.nn.Linear(3, 1))
        vmap(lambda x: fm(params, x))(torch.ones(4, 3))  # LINE_OF_VMAP
    """, name="user_script.py")
    con = fx.db()
    with open(os.path.join(os.path.dirname(fx.dir), "user_script.py")) as f:
        lines = {m: i + 1 for i, text in enumerate(f) for m in ("LINE_OF_FX", "LINE_OF_VMAP")
                 if m in text}
    for op, line in (("aten::tanh", lines["LINE_OF_FX"]), ("aten::linear", lines["LINE_OF_VMAP"])):
        user = one(con, "select file, line from frame_view where id = ?", first_op(con, op)[6])
        check(user[0].endswith("user_script.py") and user[1] == line,
              "%s is placed at the user's line %d: %s" % (op, line, user))


def case_python_in_ranges():
    # Ops run by Python code inside a range rather than by the line that entered it: a custom
    # autograd Function's forward (reentrant checkpointing is one) and, in backward, its
    # `backward` and a tensor hook. Each gets the line of that code; a C++ backward node's
    # ops keep their forward op's line (no stack of their own).
    r = run_python("""
        import torch

        class Swish(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * torch.sigmoid(x)  # LINE_FWD

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                s = torch.sigmoid(x)  # LINE_BWD
                return g * (s + x * s * (1 - s))

        w = torch.randn(4, requires_grad=True)
        w.register_hook(lambda g: g * 3.0)  # LINE_HOOK
        y = Swish.apply(w * 2)  # LINE_CALL
        (y * y).sum().backward()
    """, name="ranges.py")
    con = r.db()
    script = os.path.join(os.path.dirname(r.dir), "ranges.py")
    with open(script) as f:
        text = f.read().splitlines()
    line = {tag: [i + 1 for i, t in enumerate(text) if tag in t][0]
            for tag in ("LINE_FWD", "LINE_BWD", "LINE_HOOK", "LINE_CALL")}

    def where(op):
        if op[5] is None:
            return None
        return one(con, "select file, line from frame_view where id = ?", op[5])

    fwd = first_op(con, "aten::sigmoid")
    check(where(fwd) == (script, line["LINE_FWD"]),
          "a custom Function's forward op has its own line: %s, want %d" % (where(fwd), line["LINE_FWD"]))
    bwd = first_op(con, "aten::sigmoid", fwd[0])
    check(bwd[8] & 1, "the second sigmoid runs in backward")
    check(where(bwd) == (script, line["LINE_BWD"]),
          "a custom backward's op has its line: %s, want %d" % (where(bwd), line["LINE_BWD"]))
    hook = one(con, "select o.seq, o.stack from op_view o join arg_view a on a.op = o.seq "
               "where o.name = 'aten::mul' and a.value = '3'")
    hook_where = one(con, "select file, line from frame_view where id = ?", hook[1])
    check(hook_where == (script, line["LINE_HOOK"]),
          "a tensor hook's op has the hook's line: %s, want %d" % (hook_where, line["LINE_HOOK"]))
    plain = con.execute("select o.stack from op_view o where o.flags & 1 and o.name = 'aten::mul' "
                        "and o.seq not in (select op from arg_view where value = '3') "
                        "and o.parent in (select seq from op_view where name = 'MulBackward0')"
                        ).fetchall()
    check(plain and all(s[0] is None or s[0] == 0 for s in plain),
          "a C++ node's ops keep no stack of their own: %s" % plain)
    # A custom Function whose Python forward raised: torch ends its range before the error
    # reaches Python (no C++ exception), and it is still flagged as raised (flag 64); the
    # same Function's forward that returned is not.
    raised = run_python('''
        import torch

        class Picky(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, fail):
                if fail:
                    raise ValueError("no")
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2, None

        x = torch.ones(3, requires_grad=True)
        try:
            Picky.apply(x, True)
        except ValueError:
            pass
        Picky.apply(x, False).sum()
    ''', name="picky.py")
    flags = [row[0] for row in raised.db().execute(
        "select flags from op_view where name = 'Picky' order by seq")]
    check(len(flags) == 2 and flags[0] & 64 and not flags[1] & 64,
          "a custom Function forward that raised is flagged raised, one that returned not: %s" % flags)
    # Checkpointing recomputes the forward in backward: in the custom Function's backward
    # (reentrant) or in a saved tensor's unpack hook inside a C++ node (non-reentrant). The
    # recomputed ops get the forward's line and module, not the backward call's or none.
    for reentrant in ("True", "False"):
        ck = run_python('''
            import torch
            from torch.utils.checkpoint import checkpoint

            class Block(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = torch.nn.Linear(8, 8)

                def forward(self, x):
                    return torch.tanh(self.fc(x))  # LINE_BLOCK

            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.block = Block()

                def forward(self, x):
                    return checkpoint(self.block, x, use_reentrant=%s).sum()

            x = torch.randn(4, 8, requires_grad=True)
            Net()(x).backward()  # LINE_BACKWARD
        ''' % reentrant, name="ck.py")
        con = ck.db()
        script = os.path.join(os.path.dirname(ck.dir), "ck.py")
        with open(script) as f:
            block_line = [i + 1 for i, t in enumerate(f) if "LINE_BLOCK" in t][0]
        fwd = first_op(con, "aten::addmm")
        recomputed = first_op(con, "aten::addmm", fwd[0])
        check(recomputed is not None and recomputed[8] & 1,
              "reentrant=%s: the addmm is recomputed in backward" % reentrant)
        if recomputed is None:
            continue
        at = one(con, "select file, line from frame_view where id = ?", recomputed[6]) \
            if recomputed[6] else None
        check(at == (script, block_line),
              "reentrant=%s: the recomputed addmm has the forward's line: %s, want %d"
              % (reentrant, at, block_line))
        check(recomputed[4] == fwd[4] and fwd[4].endswith("block.fc"),
              "reentrant=%s: and its module: %r, forward's %r" % (reentrant, recomputed[4], fwd[4]))


def case_checkpoint_backward():
    # Reentrant checkpointing (torch 1.13's default) runs the block's forward again inside its
    # backward node, with grad mode on, and backward then runs through the nodes that made:
    # each of those names the recomputed op as its forward op, as without checkpointing.
    r = run_python("""
        import torch
        from torch.utils.checkpoint import checkpoint
        torch.manual_seed(0)
        block = torch.nn.Sequential(torch.nn.LayerNorm(8), torch.nn.Linear(8, 8))
        x = torch.randn(4, 8, requires_grad=True)
        checkpoint(block, x).pow(2).sum().backward()
    """, name="ckpt.py")
    con = r.db()
    node = first_op(con, "CheckpointFunctionBackward")
    for forward, backward in (("aten::addmm", "AddmmBackward0"),
                              ("aten::native_layer_norm", "NativeLayerNormBackward0")):
        recomputed = first_op(con, forward, node[0])
        grad = one(con, "select seq, fwd from op_view where name = ? and seq > ? order by seq limit 1", backward, node[0])
        check(grad[1] == recomputed[0],
              "%s in the checkpoint's backward differentiates the recomputed %s (seq %d): fwd %s"
              % (backward, forward, recomputed[0], grad[1]))


def case_exec_by_hand():
    # The hook LD_PRELOADed by hand loads torch into every program the environment reaches:
    # `nice`, which runs no op and execs the training script with the same pid, writes no
    # database; the script writes the only one, closed.
    work = work_dir()
    script = os.path.join(work, "tiny.py")
    with open(script, "w") as f:
        f.write("import torch\nprint(float(torch.ones(3).sum()))\n")
    r = run_command(["nice", "-n", "1", ARGS.python, script], cwd=work)
    names = sorted(os.listdir(r.dir))
    check(len(r.paths) == 1 and names == [os.path.basename(r.paths[0])],
          "one database, nothing else, after an exec: %s" % names)
    meta = _meta(r.paths[0])
    check("end_time_ns" in meta and meta.get("cmdline", "").endswith('tiny.py"]'),
          "the script's database, closed: %s" % {k: meta.get(k) for k in ("cmdline", "end_time_ns")})


def case_spawned_workers():
    # DataLoader workers started with spawn unpickle their dataset first (a TensorDataset:
    # ops) before they set their id: each is still named as the worker it is.
    r = run_python("""
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        if __name__ == "__main__":
            ds = TensorDataset(torch.arange(32.).view(16, 2), torch.arange(16))
            for x, y in DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context="spawn"):
                print(float(x.sum()))
    """, name="spawned.py")
    workers = sorted(_meta(p).get("worker", "") for p in r.paths)
    check(workers == ["", "0/2", "1/2"], "the spawned workers are named: %s" % workers)


def case_random():
    code = """
        import sys, torch
        torch.manual_seed(int(sys.argv[1]))
        a = torch.rand(3)
        b = torch.nn.functional.dropout(torch.ones(8), 0.5)
    """
    runs = [run_python(code, args=[s]) for s in ("1", "1", "2")]
    rngs = []
    for r in runs:
        con = r.db()
        rows = con.execute("select name, rng from op_view where flags & 2 order by seq").fetchall()
        check(rows and all(rng for _, rng in rows), "random ops have an rng hash: %s" % rows)
        rngs.append(rows)
    check(rngs[0] == rngs[1], "same seed, same generator states")
    check(rngs[0][0][1] != rngs[2][0][1], "another seed, another generator state")
    check(len(set(rng for _, rng in rngs[0])) == len(rngs[0]),
          "successive draws see advancing states")


def case_internal_ops():
    # Ops a kernel runs inside itself, below autograd (CPU bmm's per-batch select views when
    # the matrices are not tiny, CPU native_dropout's bernoulli_) are not recorded by default;
    # TDBG_INTERNAL_OPS=1 records them. The hook stops watching inside an op once its first
    # calls showed only such ops: later calls, and the ops after them, are still recorded, as
    # are ops nested at autograd's level (linear's addmm) and dropout's generator state.
    code = """
        import torch
        torch.manual_seed(0)
        a, b = torch.ones(4, 8, 8), torch.ones(4, 8, 8)
        for _ in range(6):
            c = torch.bmm(a, b)
        w = torch.ones(5, 8)
        for _ in range(6):
            y = torch.nn.functional.linear(torch.ones(3, 8), w)
            d, mask = torch.native_dropout(torch.ones(64), 0.5, True)
        z = c.sum()
        v, i = torch.sort(torch.tensor([3., 1., 2., 5., 4.]))
    """
    default = run_python(code).db()
    full = run_python(code, env={"TDBG_INTERNAL_OPS": "1"}).db()
    # The values an op returns are recorded alike: sort's kernel copies its input into the
    # output (an internal op) and sorts it in place after, unseen.
    sorted_hashes = [set(row[0] for row in con.execute(
        "select t.hash from op_view o join tensor_view t on t.op = o.seq "
        "where o.name = 'aten::sort' and t.role = 'output'")) for con in (default, full)]
    check(len(sorted_hashes[0]) == 2 and sorted_hashes[0] == sorted_hashes[1],
          "sort's outputs hash alike with and without TDBG_INTERNAL_OPS: %s" % sorted_hashes)

    def children(con, name):
        return [one(con, "select count(*) from op_view where parent = ?", seq)[0]
                for (seq,) in con.execute("select seq from op_view where name = ? order by seq",
                                          (name,))]

    check(children(default, "aten::bmm") == [0] * 6,
          "six bmm, nothing recorded inside: %s" % children(default, "aten::bmm"))
    inside = children(full, "aten::bmm")
    check(len(inside) == 6 and all(n >= 8 for n in inside),
          "TDBG_INTERNAL_OPS=1 records bmm's views: %s" % inside)
    check(one(full, "select count(*) from op_view where name = 'aten::select'")[0] > 0,
          "the views are aten::select")
    linears = children(default, "aten::linear")
    check(len(linears) == 6 and all(n >= 1 for n in linears),
          "every linear keeps its nested ops: %s" % linears)
    check(one(default, "select count(*) from op_view where name = 'aten::sum'")[0] == 1,
          "the op after them is recorded")
    drops = default.execute("select flags & 2, rng from op_view where name = 'aten::native_dropout' "
                            "order by seq").fetchall()
    check(len(drops) == 6 and all(f and rng for f, rng in drops),
          "native_dropout carries its generator state: %s" % drops)
    check(len(set(rng for _, rng in drops)) == 6, "each draw sees an advanced state")
    check(one(default, "select count(*) from op_view where name = 'aten::bernoulli_'")[0] == 0,
          "the bernoulli_ inside it is not recorded")
    meta = [dict(con.execute("select key, value from meta")).get("internal_ops")
            for con in (default, full)]
    check(meta == ["0", "1"], "meta internal_ops: %s" % meta)


def case_learning_rate():
    code = """
        import sys, torch
        torch.manual_seed(0)
        m = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(m.parameters(), lr=float(sys.argv[1]))
        m(torch.ones(2, 3)).sum().backward()
        opt.step()
    """
    for lr in ("0.05", "0.25"):
        con = run_python(code, args=[lr]).db()
        values = [row[0] for row in con.execute(
            "select a.value from arg_view a join op_view o on o.seq = a.op "
            "where o.step = 0 and o.name like 'aten::add%' and a.name = 'alpha'")]
        floats = [float(v) for v in values]
        check(any(abs(v + float(lr)) < 1e-12 for v in floats),
              "lr %s appears as the update's alpha: %s" % (lr, values))


def case_threads():
    r = run_python("""
        import threading, torch
        def work(k):
            x = torch.full((4,), float(k))
            for _ in range(50):
                x = x * 1.5 + 1
        ts = [threading.Thread(target=work, args=(k,), name="worker%d" % k) for k in range(2)]
        for t in ts: t.start()
        for t in ts: t.join()
        torch.ones(1).neg()
    """)
    con = r.db()
    per_thread = con.execute("select thread, count(*), min(tidx), max(tidx) from op_view "
                             "group by thread").fetchall()
    full = [row for row in per_thread if row[1] >= 100]
    check(len(full) >= 2, "both Python threads' ops are recorded: %s" % per_thread)
    for thread, count, lo, hi in per_thread:
        check(lo == 0 and hi == count - 1, "thread %d's order is complete" % thread)
        seqs = [row[0] for row in con.execute(
            "select seq from op_view where thread = ? order by tidx", (thread,))]
        check(seqs == sorted(seqs), "thread %d's order matches seq" % thread)
    names = [row[0] for row in con.execute("select name from threads")]
    check(len(names) >= 3, "threads are registered: %s" % names)


def case_dataloader_fork():
    r = run_command([ARGS.python, os.path.join(ARGS.examples, "train_lm.py"),
                     "--steps", "2", "--workers", "2"])
    check("loss" in r.stdout, "the example trained")
    metas = [_meta(p) for p in r.paths]
    parent = [m for m in metas if not any(o.get("pid") == m.get("ppid") for o in metas)]
    children = [m for m in metas if m not in parent]
    check(len(parent) == 1 and len(children) == 2,
          "one parent and two worker databases: %s" % [(m.get("pid"), m.get("ppid"))
                                                       for m in metas])
    for m in metas:
        check("end_time_ns" in m, "database of %s was closed" % m.get("pid"))
    con = r.db(pid=parent[0]["pid"])
    check(con.execute("pragma integrity_check").fetchone()[0] == "ok", "parent DB is intact")
    count, last_step = one(con, "select count(*), max(step) from op_view")
    check(count > 1000 and last_step == 2, "parent recorded the training: %d ops" % count)
    for m in children:
        c = r.db(pid=m["pid"])
        check(one(c, "select count(*) from op_view")[0] > 0, "worker %s recorded" % m["pid"])
        # A worker's ops are placed in the worker's own code: __getitem__'s slicing in the
        # script, collate's stack in torch, never the parent's loop line the fork copied.
        wheres = {(os.path.basename(f), fn) for f, fn in c.execute(
            "select f.file, f.function from op_view o join frame_view f "
            "on f.id = (case when o.user_frame then o.user_frame else o.stack end)")}
        check(("train_lm.py", "TokenWindows.__getitem__") in wheres and
              ("collate.py", "collate_tensor_fn") in wheres and
              all(fn in ("TokenWindows.__getitem__",) or f != "train_lm.py" for f, fn in wheres),
              "worker %s places its ops at %s" % (m["pid"], sorted(wheres)))


def case_fork_step():
    # A child forked after two optimizer steps counts its own steps from 0; its database says
    # the step its parent had reached, which tells one evaluation fork from another.
    r = run_python("""
        import os, sys, torch
        w = torch.nn.Parameter(torch.ones(3))
        opt = torch.optim.SGD([w], lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            (w * 2).sum().backward()
            opt.step()
        pid = os.fork()
        if pid == 0:
            (w * 3).sum()
            sys.exit(0)
        os.waitpid(pid, 0)
    """)
    metas = {m["pid"]: m for m in (_meta(p) for p in r.paths)}
    children = [m for m in metas.values() if m.get("ppid") in metas]
    check(len(metas) == 2 and len(children) == 1, "a parent and a child database: %s" % list(metas))
    parent = [m for m in metas.values() if m not in children][0]
    check(children[0].get("forked_at_step") == "2" and "forked_at_step" not in parent,
          "the child says it was forked at step 2: %s, parent %s"
          % (children[0].get("forked_at_step"), parent.get("forked_at_step")))
    # The parameter the parent's optimizer wrote keeps its hash in the child (the same
    # memory): known, not hashed again; the op that wrote it is the parent's, not the child's.
    parent_con, child_con = r.db(pid=parent["pid"]), r.db(pid=children[0]["pid"])
    last_write = one(parent_con, "select hash from tensor_view where op = (select max(seq) from "
                     "op_view where name = 'aten::add_') and role = 'output'")
    mul = first_op(child_con, "aten::mul")
    read = tensors(child_con, mul[0], "input")[0]
    check(read[1] == "known" and read[2] == last_write[0] and read[3] is None,
          "the child reads the parameter as known, made in the parent: %s (parent's %s)"
          % (read, last_write))


def _losses(args):
    plain = run_command([ARGS.python] + args, record=False).stdout
    traced = run_command([ARGS.python] + args)
    return plain, traced


def case_observer_effect():
    for example, extra in (("train_mlp.py", ["--steps", "6"]),
                           ("train_lm.py", ["--steps", "3", "--workers", "2"])):
        args = [os.path.join(ARGS.examples, example)] + extra
        plain, traced = _losses(args)
        check("loss" in plain and plain == traced.stdout,
              "%s prints the same losses with and without tdbg:\n%s\n---\n%s"
              % (example, plain, traced.stdout))


def case_chain_deterministic():
    args = [os.path.join(ARGS.examples, "train_mlp.py"), "--steps", "3"]
    a = run_command([ARGS.python] + args).db()
    b = run_command([ARGS.python] + args).db()
    ca = a.execute("select thread, tidx, name, chain from op_view order by seq").fetchall()
    cb = b.execute("select thread, tidx, name, chain from op_view order by seq").fetchall()
    check(len(ca) > 300 and ca == cb, "two identical runs have identical chains")
    c = run_command([ARGS.python] + args + ["--lr", "0.06"]).db()
    cc = c.execute("select thread, tidx, name, chain from op_view order by seq").fetchall()
    first = next(i for i, (x, y) in enumerate(zip(ca, cc)) if x != y)
    check(ca[first][2] == cc[first][2], "a changed lr changes the chain, not the op names")
    check(first > 0, "the chains agree up to the first difference")


def case_config():
    code = """
        import torch
        m = torch.nn.Linear(4, 4)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for i in range(4):
            opt.zero_grad(); m(torch.ones(2, 4)).sum().backward(); opt.step()
    """
    con = run_python(code, env={"TDBG_HASH": "none"}).db()
    statuses = set(row[0] for row in con.execute("select distinct status from tensor_view"))
    check("hashed" not in statuses and "skipped" in statuses, "hash=none: %s" % statuses)
    con = run_python(code, env={"TDBG_HASH": "outputs"}).db()
    inputs = set(row[0] for row in con.execute(
        "select distinct status from tensor_view where role = 'input'"))
    check("hashed" not in inputs, "hash=outputs hashes no input: %s" % inputs)
    con = run_python(code, env={"TDBG_OPS": "^aten::(addmm|mm)$"}).db()
    names = set(row[0] for row in con.execute("select distinct name from op_view"))
    check(names == {"aten::addmm", "aten::mm"}, "TDBG_OPS filters ops: %s" % names)
    con = run_python(code, env={"TDBG_STEPS": "1:3"}).db()
    steps = sorted(set(row[0] for row in con.execute("select distinct step from op_view")))
    check(steps == [1, 2], "TDBG_STEPS records steps 1 and 2 only: %s" % steps)
    r = run_python(code, env={"TDBG_RING": "50", "TDBG_FLUSH_MS": "5"})
    con = r.db()
    count = one(con, "select count(*) from op_view")[0]
    check(count <= 200, "the ring keeps about the last 50 ops: %d" % count)
    # Values that cannot be used: an error each (even quiet), the defaults used and recorded
    # as the settings (a diff then compares what was recorded, not the text that was set).
    r = run_python(code, env={"TDBG_HASH": "bogus", "TDBG_STEPS": "2", "TDBG_OPS": "["})
    con = r.db()
    meta = dict(con.execute("select key, value from meta"))
    check((meta.get("hash_mode"), meta.get("steps"), meta.get("ops")) == ("all", "", ""),
          "rejected settings are recorded as the defaults used: %s" % (
              [meta.get(k) for k in ("hash_mode", "steps", "ops")],))
    for said in ("error: TDBG_HASH=bogus", "error: TDBG_STEPS=2", "error: TDBG_OPS=["):
        check(said in r.stderr, "%r said with TDBG_QUIET=1: %r" % (said, r.stderr))
    count = one(con, "select count(*) from op_view where step >= 2")[0]
    check(count > 0, "all steps recorded")
    # The windows `tdbg record` refuses (empty, signed) are refused here alike, not recorded
    # as a window that holds no step.
    for window in ("3:3", "-1:3"):
        r = run_python(code, env={"TDBG_STEPS": window})
        check("error: TDBG_STEPS=" + window in r.stderr, "%s refused: %r" % (window, r.stderr))
        check(one(r.db(), "select count(*) from op_view where step >= 3")[0] > 0,
              "%s: all steps recorded" % window)


def case_window_matches_full():
    # A --steps window records its steps as a run of every step does: the same ops, nesting,
    # modules, lines, generator states, backward links and output hashes, though before the
    # window the hook sees no op (only the ranges that count the steps).
    args = [os.path.join(ARGS.examples, "train_lm.py"), "--steps", "5", "--layers", "1",
            "--workers", "1"]

    def window_ops(con):
        rows = con.execute(
            "select o.seq, o.name, o.step, o.depth, o.module, u.file, u.line, o.rng, f.name "
            "from op_view o left join op_view f on f.seq = o.fwd "
            "left join frame_view u on u.id = o.user_frame "
            "where o.step between 2 and 3 and o.thread = 0 order by o.seq").fetchall()
        outputs = {}
        for op, hash_ in con.execute("select op, hash from tensor_view where role = 'output' "
                                     "and status = 'hashed' order by op, idx"):
            outputs.setdefault(op, []).append(hash_)
        return [row[1:] + (tuple(outputs.get(row[0], ())),) for row in rows]

    full = window_ops(run_command([ARGS.python] + args).db())
    windowed = run_command([ARGS.python] + args, env={"TDBG_STEPS": "2:4"})
    con = windowed.db()
    check(one(con, "select count(*) from op_view where step not between 2 and 3")[0] == 0,
          "only steps 2 and 3 recorded")
    ops = window_ops(con)
    check(len(full) > 500 and sum(1 for op in full if op[-1]) > 200,
          "the full run's steps 2 and 3 hold ops with hashed outputs: %d" % len(full))
    first = next((i for i, (a, b) in enumerate(zip(full, ops)) if a != b), None)
    check(len(ops) == len(full) and first is None,
          "the window records what the full run does (%d ops, %d): first difference at %s: "
          "%s / %s" % (len(full), len(ops), first, full[first] if first is not None else None,
                       ops[first] if first is not None else None))


def case_metadata():
    con = run_python("""
        import torch
        torch.manual_seed(1234)
        torch.use_deterministic_algorithms(True)
        torch.ones(2).sum()
    """, env={"OMP_NUM_THREADS": "1"}).db()
    meta = dict(con.execute("select key, value from meta"))
    for key in ("pid", "ppid", "host", "cmdline", "cwd", "start_time_ns", "end_time_ns",
                "torch_version", "python_version", "cpu_model", "num_threads", "env"):
        check(meta.get(key), "meta %s is set: %s" % (key, meta.get(key)))
    check(meta["seed"] == "1234", "the seed the script set: %s" % meta["seed"])
    check(meta["deterministic_algorithms"] == "1", "determinism flag")
    check('"OMP_NUM_THREADS": "1"' in meta["env"], "relevant env: %s" % meta["env"])
    check("script.py" in meta["cmdline"], "cmdline: %s" % meta["cmdline"])
    # A thread count set after the first ops, with no optimizer step after it (a gradient
    # check, an evaluation): the count the program's ops ran with.
    late = dict(run_python("""
        import torch
        w = torch.randn(64, 64, requires_grad=True)
        torch.set_num_threads(2)
        for _ in range(8):
            (w @ w).relu().sum().backward()
    """, env={"OMP_NUM_THREADS": "1"}).db().execute("select key, value from meta"))
    check(late.get("num_threads") == "2", "num_threads set after the first ops: %s" % late.get("num_threads"))
    check(late.get("num_threads_history") == "1@0,2@0",
          "and each count with the step it was set at: %s" % late.get("num_threads_history"))


def case_collective():
    # Two ranks (gloo, on loopback) all-reduce a tensor, then use it. The collective's result
    # may still be in flight when the op returns, so it is not hashed there; the next op that
    # reads it hashes it (after the wait), and both ranks must see the same reduced value.
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = """
        import os, sys
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp

        def worker(rank, world, port):
            os.environ["MASTER_ADDR"] = "127.0.0.1"
            os.environ["MASTER_PORT"] = str(port)
            dist.init_process_group("gloo", rank=rank, world_size=world)
            x = torch.arange(6, dtype=torch.float32) * (rank + 1)
            work = dist.all_reduce(x, async_op=True)
            work.wait()
            y = x * 2
            os.write(1, ("%d %s\\n" % (rank, y.tolist())).encode())  # one atomic write
            dist.destroy_process_group()

        if __name__ == "__main__":
            mp.spawn(worker, args=(2, int(sys.argv[1])), nprocs=2)
    """
    plain = run_python(code, args=[str(port)], record=False)
    r = run_python(code, args=[str(port + 1 if port < 65535 else port - 1)])
    check(sorted(plain.stdout.splitlines()) == sorted(r.stdout.splitlines()),
          "the ranks print the same under the hook: %r vs %r" % (plain.stdout, r.stdout))
    reduced, ranks = [], []
    for path in r.paths:
        con = connect(path)
        row = con.execute("select seq, flags from op_view where name like 'c10d::allreduce%' "
                          "order by seq limit 1").fetchone()
        if row is None:
            continue  # the launcher process
        seq, flags = row
        check(flags & 8, "the all-reduce is flagged collective: %s" % flags)
        before = tensors(con, seq, "input")
        out = tensors(con, seq, "output")
        check(out and all(t[1] == "not_hashed" and "collective" in (t[4] or "") for t in out),
              "the in-flight result is not hashed at the collective: %s" % out)
        mul = first_op(con, "aten::mul", seq)
        use = tensors(con, mul[0], "input")
        check(use[0][1] == "hashed", "the next reader hashes the reduced tensor: %s" % use)
        check(use[0][3] == seq, "the reduced tensor's producer is the all-reduce: %s" % (use,))
        check(use[0][2] != before[0][2], "the reduced value differs from the rank's own input")
        reduced.append(use[0][2])
        ranks.append(dict(con.execute("select key, value from meta")).get("rank"))
    check(len(reduced) == 2, "both ranks recorded an all-reduce: %s" % r.paths)
    check(reduced[0] == reduced[1], "both ranks hash the same reduced value: %s" % reduced)
    check(sorted(ranks) == ["0/2", "1/2"], "each database names its rank: %s" % ranks)


def gnu_build_id(path):
    """The GNU build-id of an ELF file, as `readelf -n` prints it (read by hand without it)."""
    try:
        out = subprocess.run(["readelf", "-n", path], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True).stdout
        m = re.search(r"Build ID: ([0-9a-f]+)", out)
        return m.group(1) if m else ""
    except FileNotFoundError:
        pass
    with open(path, "rb") as f:
        data = f.read()
    # The note: name size 4, descriptor size, type 3 (NT_GNU_BUILD_ID), "GNU\0", descriptor.
    m = re.search(rb"\x04\x00\x00\x00(.)\x00\x00\x00\x03\x00\x00\x00GNU\x00", data, re.S)
    return data[m.end():m.end() + m.group(1)[0]].hex() if m else ""


def case_cpp():
    if not ARGS.cpp or not os.path.exists(ARGS.cpp):
        print("SKIP: the C++ example was not built")
        return
    # Started by a relative path, as a user in the build directory would.
    work = work_dir()
    r = run_command([os.path.relpath(ARGS.cpp, work)], cwd=work)
    con = r.db()
    count = one(con, "select count(*) from op_view")[0]
    check(count > 100, "the C++ program's ops are recorded: %d" % count)
    hashed = one(con, "select count(*) from tensor_view where status = 'hashed'")[0]
    check(hashed > 0, "with hashes")
    frames = con.execute("select distinct f.file, f.function from op_view o "
                         "join frame_view f on f.id = o.user_frame").fetchall()
    check(frames and all(f[0] == os.path.realpath(ARGS.cpp) for f in frames),
          "C++ ops carry their call site in the program, by its absolute path: %s" % frames[:5])
    # The program is linked without -rdynamic: its functions are named from its symbol table.
    # torch's templates instantiated in it (at::, c10::, torch::, std::) are never the call site.
    functions = [f[1] for f in frames]
    check(any(re.match(r"(\(anonymous namespace\)::)?(train|Net::forward)\(", f) for f in functions),
          "the call sites name the program's functions: %s" % functions)
    check(all(" +0x" in f for f in functions), "with their offsets: %s" % functions)
    stack = con.execute("select distinct function from frame_view").fetchall()
    library = [f[0] for f in stack if re.match(r"(\S+ )?(at|c10|torch|std)::", f[0])
               or f[0].startswith("_start")]
    check(not library, "no frame of torch's or std's namespaces, nor _start: %s" % library[:5])
    # Each binary with frames has its GNU build-id in the meta table, so that `tdbg` reads
    # source lines only from the very binary that ran.
    build_ids = dict(con.execute("select key, value from meta where key like 'build_id:%'").fetchall())
    binaries = {f[0] for f in con.execute("select distinct file from frame_view where line = 0")}
    program = os.path.realpath(ARGS.cpp)
    check(set(build_ids) == {"build_id:" + b for b in binaries},
          "a build_id:<binary> key for each binary of the frames: %s, binaries %s"
          % (sorted(build_ids), sorted(binaries)))
    expected = gnu_build_id(program)
    check(expected and build_ids.get("build_id:" + program) == expected,
          "the program's build_id is the one in its ELF notes (%s): %s" % (expected, build_ids))
    # A custom autograd Function's backward is the program's code: its ops have its call site.
    swish = run_command([ARGS.cpp, "--steps", "2", "--swish", "1"])
    con = swish.db()
    rows = con.execute("select o.name, f.function from op_view o "
                       "join op_view node on node.seq = o.parent "
                       "left join frame_view f on f.id = o.user_frame "
                       "where node.name like 'torch::autograd::CppNode<%Swish>'").fetchall()
    # Swish::backward itself, or torch's CppNode<Swish>::apply where it was inlined.
    check(rows and all(f and ("Swish::backward(" in f or "CppNode<(anonymous namespace)::Swish>" in f)
                       for _, f in rows),
          "the ops of Swish's backward are placed in Swish's backward: %s" % rows[:4])
    # A C++ factory (torch::ones_like) runs its op with autograd's keys excluded, as a
    # kernel's internal op would: in a backward it is still the backward's own op.
    check(any(name == "aten::ones_like" for name, _ in rows),
          "torch::ones_like in Swish's backward is recorded: %s" % [n for n, _ in rows])


def case_cpp_thread():
    # The thread count set on the main thread, training on a std::thread: the hook once asked
    # torch for the thread counts at exit, which deadlocked in torch's thread pool.
    if not ARGS.cpp or not os.path.exists(ARGS.cpp):
        print("SKIP: the C++ example was not built")
        return
    try:
        r = run_command([ARGS.cpp, "--threads", "2", "--in-thread", "1"], timeout=120)
    except subprocess.TimeoutExpired:
        raise AssertionError("the C++ program training on a std::thread did not exit in 120 s")
    check(r.stdout.count("loss") == 10, "its output is complete: %r" % r.stdout[-200:])
    con = r.db()
    check(one(con, "select count(*) from op_view")[0] > 100, "its ops are recorded")
    threads = one(con, "select value from meta where key = 'num_threads'")
    check(threads == ("2",), "meta num_threads is the count the program set: %s" % (threads,))


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--lib", required=True)
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--examples", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                      "examples"))
    p.add_argument("--cpp", default="")
    p.add_argument("--case", action="append")
    p.add_argument("--preload-first", default="",
                   help="a library to preload before the hook (the ASan runtime of a sanitizer build)")
    ARGS = p.parse_args()
    ARGS.lib = os.path.abspath(ARGS.lib)
    ARGS.examples = os.path.abspath(ARGS.examples)
    ARGS.cpp = os.path.abspath(ARGS.cpp) if ARGS.cpp else ""
    if not ARGS.case:
        print("\n".join(CASES))
        return 0
    for name in ARGS.case:
        try:
            CASES[name]()
        except AssertionError as e:
            print("FAIL %s: %s" % (name, e))
            print("work directories kept: %s" % " ".join(WORK_DIRS))
            return 1
        print("ok %s" % name)
        for work in WORK_DIRS:
            shutil.rmtree(work, ignore_errors=True)
        del WORK_DIRS[:]
    return 0


if __name__ == "__main__":
    sys.exit(main())
