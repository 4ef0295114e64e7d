#!/usr/bin/env bash
# End-to-end test of `tdbg report`, `export`, `view` and `bundle` as a user runs them:
# cli_test.sh TDBG FIXTURE WORKDIR. Fails with a message naming the broken check.
set -euo pipefail
tdbg=$1 fixture=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$fixture" runs --ops 2000 --diverge-at 1102

# report: one self-contained page, the divergence in it, nothing fetched from the network.
"$tdbg" report runs/a runs/b -o rep >/dev/null || fail "tdbg report exited $?"
[ -s rep/index.html ] || fail "no rep/index.html"
grep -q 'aten::addmm' rep/index.html || fail "report lacks the divergent op"
if grep -Eq '(src|href)="(https?:)?//' rep/index.html; then fail "report references the network"; fi
[ "$(grep -o '<script' rep/index.html | wc -l)" -eq 2 ] || fail "unexpected script elements"

# Bad input: one line on stderr, exit 2.
set +e
"$tdbg" report no/such/run -o x 2>err.txt; rc=$?
set -e
[ $rc -eq 2 ] || fail "report of a missing run exited $rc"
[ "$(wc -l <err.txt)" -eq 1 ] || fail "error is not one line: $(cat err.txt)"

# show --op past the last op, and bundle --inspect of a missing file: say which, exit 2.
set +e
"$tdbg" show runs/a --op 99999999 >/dev/null 2>err.txt; rc=$?
set -e
[ $rc -eq 2 ] || fail "show --op past the end exited $rc"
grep -q 'no op 99999999 or later' err.txt || fail "show --op past the end: $(cat err.txt)"
set +e
"$tdbg" bundle --inspect no-such.tar.gz 2>err.txt; rc=$?
set -e
[ $rc -eq 2 ] || fail "bundle --inspect of a missing file exited $rc"
grep -q 'No such file' err.txt || fail "bundle --inspect of a missing file: $(cat err.txt)"

# diff --scan-limit: a negative limit is a usage error naming the option (exit 2), not a full
# scan; 0 is a limit like any other.
set +e
"$tdbg" diff --scan-limit -5 runs/a runs/b >/dev/null 2>err.txt; rc=$?
set -e
[ $rc -eq 2 ] || fail "diff --scan-limit -5 exited $rc"
head -1 err.txt | grep -q -- '--scan-limit.*negative' || fail "diff --scan-limit -5: $(cat err.txt)"
set +e
"$tdbg" diff --scan-limit 0 runs/a runs/b >/dev/null; rc=$?
set -e
[ $rc -eq 1 ] || fail "diff --scan-limit 0 exited $rc"
# --full is no limit: with one, a usage error naming both, not one silently ignored.
set +e
"$tdbg" diff --full --scan-limit 5 runs/a runs/b >/dev/null 2>err.txt; rc=$?
set -e
[ $rc -eq 2 ] || fail "diff --full --scan-limit 5 exited $rc"
[ "$(wc -l < err.txt)" -le 2 ] && grep -q -- '--full.*--scan-limit\|--scan-limit.*--full' err.txt ||
  fail "diff --full --scan-limit 5: $(cat err.txt)"
# A structural divergence is still named with a limit of 0 (the limit is on what follows).
"$fixture" ins --ops 600 --insert-at 300
set +e
"$tdbg" diff --scan-limit 0 ins/a ins/b >out.txt; rc=$?
set -e
[ $rc -eq 1 ] || fail "diff --scan-limit 0 of an insertion exited $rc"
head -1 out.txt | grep -q 'inserted in B' || fail "diff --scan-limit 0 of an insertion: $(head -3 out.txt)"

# export: valid Chrome trace JSON with divergent ops marked.
"$tdbg" export --chrome-trace runs/a runs/b -o trace.json || fail "export exited $?"
python3 - <<'PY' || fail "trace.json is not the expected Chrome trace"
import json
t = json.load(open("trace.json"))
ev = t["traceEvents"]
ops = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("op", "backward")]
assert len(ops) == 4000, len(ops)
first = [e for e in ops if e.get("cname") == "terrible"]
assert len(first) == 2 and all(e["args"]["seq"] == 1102 for e in first), first
assert any(e.get("ph") == "M" and e["name"] == "thread_name" for e in ev)
PY

# bundle: secrets absent from every byte, inspect lists it, a hostile archive is refused.
"$tdbg" bundle runs/a runs/b -o bug.tar.gz >/dev/null || fail "bundle exited $?"
"$tdbg" bundle --inspect bug.tar.gz >inspect.txt || fail "inspect exited $?"
grep -q 'bug/report/index.html' inspect.txt || fail "inspect does not list the report"
grep -q 'AWS_SECRET_ACCESS_KEY' inspect.txt || fail "README does not list the redacted names"
if gzip -dc bug.tar.gz | grep -aq 'FAKEawsSecretKey'; then fail "a secret is in the bundle"; fi
# The report page leaves them out too.
if grep -q 'FAKEawsSecretKey' rep/index.html; then fail "a secret is in the report"; fi
grep -q 'REDACTED' rep/index.html || fail "the report does not mark what it left out"
mkdir -p evil/sub && echo x >evil/sub/f
tar -czf evil.tar.gz -C evil --transform 's,^sub/f,../../escaped,' sub/f
set +e
"$tdbg" bundle --inspect evil.tar.gz 2>err.txt; rc=$?
set -e
[ $rc -eq 2 ] || fail "hostile archive: exit $rc"
grep -q 'unsafe entry' err.txt || fail "hostile archive: $(cat err.txt)"
head -c 1000 bug.tar.gz >cut.tar.gz
set +e
"$tdbg" bundle --inspect cut.tar.gz 2>err.txt; rc=$?
set -e
[ $rc -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] || fail "truncated archive: exit $rc, $(cat err.txt)"
# A word given beside --inspect is named, not ignored.
set +e
"$tdbg" bundle --inspect bug.tar.gz extra >/dev/null 2>err.txt; rc=$?
set -e
[ $rc -eq 2 ] && grep -q "unexpected 'extra'" err.txt || fail "--inspect with a stray word: exit $rc, $(cat err.txt)"

# -o that would replace a recording or a file that is no output of the command: refused, exit 2,
# nothing changed. An earlier bundle or trace is replaced.
db=$(ls runs/a/*.sqlite | head -1)
before=$(sha256sum "$db" runs/b/*.sqlite)
echo 'print("train")' >train.py
tar -czf mine.tar.gz train.py  # the user's own archive, no bundle
echo '{"lr": 0.1}' >config.json
for target in "$db" runs/a/new.tar.gz train.py mine.tar.gz elsewhere/tdbg-run.json; do
  set +e
  "$tdbg" bundle runs/a runs/b -o "$target" >/dev/null 2>err.txt; rc=$?
  set -e
  [ $rc -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -q 'not written' err.txt ||
    fail "bundle -o $target: exit $rc, $(cat err.txt)"
  set +e
  "$tdbg" export --chrome-trace runs/a -o "$target" >/dev/null 2>err.txt; rc=$?
  set -e
  [ $rc -eq 2 ] && grep -q 'not written' err.txt || fail "export -o $target: exit $rc, $(cat err.txt)"
done
# A report written into a run folder it reads, or over a database, into another run's folder,
# or over a page of the user's own: refused the same way. An earlier report is replaced.
mkdir -p other_run site && touch other_run/tdbg-run.json && echo '<h1>mine</h1>' >site/index.html
for target in runs/a runs/b/html "$db" other_run other_run/html site; do
  set +e
  "$tdbg" report runs/a runs/b -o "$target" >/dev/null 2>err.txt; rc=$?
  set -e
  [ $rc -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -q 'not written' err.txt ||
    fail "report -o $target: exit $rc, $(cat err.txt)"
  # (A report is a folder: the advice names one.)
  if [ "$target" = runs/a ]; then
    grep -q 'name a folder outside it' err.txt || fail "report -o runs/a: $(cat err.txt)"
  fi
done
[ ! -e runs/a/index.html ] && [ ! -e runs/b/html ] && [ ! -e other_run/index.html ] ||
  fail "a refused report -o wrote"
[ "$(cat site/index.html)" = '<h1>mine</h1>' ] || fail "report -o replaced the user's index.html"
"$tdbg" report runs/a runs/b -o rep >/dev/null || fail "report over an earlier report exited $?"
# A write that fails part way (a full disk; here a file size limit) leaves the earlier page
# whole, and says why.
page=$(sha256sum rep/index.html)
set +e
(trap '' XFSZ; ulimit -f 64; "$tdbg" report runs/a runs/b -o rep >/dev/null 2>err.txt); rc=$?
set -e
[ $rc -eq 2 ] && [ "$(sha256sum rep/index.html)" = "$page" ] && [ ! -e rep/index.html.partial ] &&
  grep -q "cannot write: File too large" err.txt || fail "report cut short: exit $rc, $(cat err.txt)"
# Into a new folder: the folder made for the page is taken away again.
set +e
(trap '' XFSZ; ulimit -f 64; "$tdbg" report runs/a runs/b -o fresh_rep >/dev/null 2>err.txt); rc=$?
set -e
[ $rc -eq 2 ] && [ ! -e fresh_rep ] || fail "a failed report into a new folder left it: exit $rc"
[ "$before" = "$(sha256sum "$db" runs/b/*.sqlite)" ] || fail "a refused -o changed a recording"
[ "$(cat train.py)" = 'print("train")' ] && [ ! -e runs/a/new.tar.gz ] || fail "a refused -o wrote"
tar -tzf mine.tar.gz >mine_list.txt
grep -qx train.py mine_list.txt || fail "the user's archive was replaced"
set +e
"$tdbg" export --chrome-trace runs/a -o config.json >/dev/null 2>err.txt; rc=$?
set -e
[ $rc -eq 2 ] && grep -q '{"lr": 0.1}' config.json || fail "export over a JSON file that is no trace: exit $rc"
# One database of a run folder given: the folder is protected all the same.
touch runs/a/tdbg-run.json
set +e
"$tdbg" export --chrome-trace "$db" -o runs/a/trace.json >/dev/null 2>err.txt; rc=$?
set -e
rm runs/a/tdbg-run.json
[ $rc -eq 2 ] && [ ! -e runs/a/trace.json ] || fail "export of a run's database into its folder: exit $rc"
# A pipe (or a device: `-o /dev/stdout`) is not replaced by the file written aside.
mkfifo pipe.out
for cmd in "bundle runs/a" "export --chrome-trace runs/a"; do
  set +e
  "$tdbg" $cmd -o pipe.out >/dev/null 2>err.txt; rc=$?
  set -e
  [ $rc -eq 2 ] && [ -p pipe.out ] && grep -q "not a regular file" err.txt ||
    fail "$cmd -o a pipe: exit $rc, $(cat err.txt), $(ls -l pipe.out)"
done
rm pipe.out
# A symbolic link, even a dangling one, is not renamed over; nor is a file written into
# another run's folder.
ln -s nowhere.tar.gz dangling.tar.gz
mkdir -p other_run && touch other_run/tdbg-run.json
for target in dangling.tar.gz other_run/b.tar.gz; do
  set +e
  "$tdbg" bundle runs/a -o "$target" >/dev/null 2>err.txt; rc=$?
  set -e
  [ $rc -eq 2 ] && [ ! -e other_run/b.tar.gz ] && [ -L dangling.tar.gz ] ||
    fail "bundle -o $target: exit $rc, $(cat err.txt)"
done
rm -rf dangling.tar.gz other_run
"$tdbg" bundle runs/a runs/b -o bug.tar.gz >/dev/null || fail "bundle over an earlier bundle exited $?"
"$tdbg" export --chrome-trace runs/a -o t.json >/dev/null && "$tdbg" export --chrome-trace runs/a -o t.json >/dev/null ||
  fail "export over an earlier trace exited $?"

# view: loopback only, JSON pages, stops on SIGINT with status 0.
"$tdbg" view runs/a runs/b --port 0 >view.txt 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q 'serving' view.txt && break; sleep 0.1; done
url=$(grep -o 'http://127.0.0.1:[0-9]*/' view.txt) || fail "view did not start: $(cat view.txt)"
python3 - "$url" <<'PY' || fail "view API"
import json, sys, urllib.request, http.client, urllib.parse
url = sys.argv[1]
page = json.load(urllib.request.urlopen(url + "api/ops?run=1&from=1990&limit=50"))
assert page["total"] == 2000 and [o["seq"] for o in page["ops"]] == list(range(1990, 2000)), page["total"]
f = json.load(urllib.request.urlopen(url + "api/ops?run=0&name=mse_loss&limit=5"))
assert f["total"] == 91 and all(o["name"] == "aten::mse_loss" for o in f["ops"]), f
op = json.load(urllib.request.urlopen(url + "api/op?run=1&seq=1102"))
assert op["name"] == "aten::addmm" and op["tensors"] and op["stack_frames"], op
# The secrets the report and the bundle leave out, left out of the served page too.
html = urllib.request.urlopen(url).read().decode()
assert "FAKEawsSecretKey" not in html and "REDACTED" in html, "a secret is in the view page"
u = urllib.parse.urlparse(url)
c = http.client.HTTPConnection(u.hostname, u.port)
c.request("GET", "/api/info", headers={"Host": "evil.example:80"})
assert c.getresponse().status == 403
c = http.client.HTTPConnection(u.hostname, u.port)
c.request("GET", "/../../etc/passwd")
assert c.getresponse().status == 404
PY
kill -INT $pid
wait $pid || fail "view exited $? after SIGINT"
# A bundle whose window (around the divergence) leaves out a later NaN: tdbg nan on the
# bundled run cannot call it finite; it says the window cut the ops after it, exit 2.
"$fixture" late --ops 3000 --diverge-at 300 --nonfinite-at 2600
"$tdbg" bundle late/a late/b --window 500 -o late.tar.gz >/dev/null || fail "bundle late exited $?"
"$tdbg" bundle --extract late.tar.gz -o late_x >/dev/null || fail "extract late exited $?"
set +e
"$tdbg" nan "$(dirname "$(find late_x -path '*runs/b/*.sqlite' | head -1)")" >nan.txt; rc=$?
set -e
[ $rc -eq 2 ] || fail "nan on a bundle that cut the NaN away exited $rc: $(cat nan.txt)"
grep -q "holds a bundle's window of ops #" nan.txt || fail "nan does not say the window cut later ops: $(cat nan.txt)"
# One whose window holds the NaN: one note, on the ops before the window (a start found in it
# comes before any after it), naming the bundle, not a ring.
"$fixture" early --ops 3000 --diverge-at 300 --nonfinite-at 400
"$tdbg" bundle early/a early/b --window 500 -o early.tar.gz >/dev/null || fail "bundle early exited $?"
"$tdbg" bundle --extract early.tar.gz -o early_x >/dev/null || fail "extract early exited $?"
set +e
"$tdbg" nan "$(dirname "$(find early_x -path '*runs/b/*.sqlite' | head -1)")" >nan.txt; rc=$?
set -e
[ $rc -eq 1 ] || fail "nan on a bundle that holds the NaN exited $rc: $(cat nan.txt)"
[ "$(grep -c "holds a bundle's window of ops #.*in the ops before it" nan.txt)" -eq 1 ] ||
  fail "nan does not say once that the window left out the ops before it: $(cat nan.txt)"
! grep -q "in the ops after it\|a ring kept" nan.txt || fail "nan hedges on ops after the start, or a ring: $(cat nan.txt)"
# A window around a divergence near the end: it ends at the run's last op, not past it.
"$fixture" tail_end --ops 600 --diverge-at 560
"$tdbg" bundle tail_end/a tail_end/b --window 400 -o tail_end.tar.gz >/dev/null || fail "bundle tail_end exited $?"
"$tdbg" bundle --extract tail_end.tar.gz -o tail_end_x >/dev/null || fail "extract tail_end exited $?"
set +e
"$tdbg" nan "$(dirname "$(find tail_end_x -path '*runs/a/*.sqlite' | head -1)")" >nan.txt
set -e
grep -q "holds a bundle's window of ops #[0-9]* to #599 of the 600 " nan.txt ||
  fail "the window's end is not the run's last op: $(cat nan.txt)"
# The same recording named twice: identical, and the bundle's README says why.
"$tdbg" bundle early/a early/a -o twice.tar.gz >/dev/null || fail "bundle twice exited $?"
# (Into a file, not a pipe: grep -q stops reading at its match, and under pipefail the tar it
# leaves writing dies of SIGPIPE, a failure that depends on timing.)
tar -xzf twice.tar.gz -O --wildcards '*/README.md' >twice_readme.md
grep -q "Warning: A and B are the same recording" twice_readme.md ||
  fail "the README of a bundle of one recording twice does not warn"
# --extract refuses a run folder as its destination (the recording would gain another run's
# files), and a failed extraction leaves no folder it made: a bundle whose third member's name
# is too long for the file system, after two members that extract.
# (And one without a manifest, as LD_PRELOAD and TDBG_OUT record: its databases say what it is.)
mkdir -p preloaded && cp runs/a/*.sqlite preloaded/
set +e
"$tdbg" bundle --extract twice.tar.gz -o preloaded >out.txt 2>err.txt; rc=$?
set -e
[ $rc -eq 2 ] && grep -q "not extracted there: it holds run databases" err.txt ||
  fail "extract into a folder of run databases: exit $rc, $(cat err.txt)"
mkdir -p runcopy && cp twice.tar.gz runcopy/ && echo '{}' >runcopy/tdbg-run.json
set +e
"$tdbg" bundle --extract twice.tar.gz -o runcopy >out.txt 2>err.txt; rc=$?
set -e
[ $rc -eq 2 ] && grep -q "not extracted there: it is the run folder" err.txt && [ "$(ls runcopy | wc -l)" -eq 2 ] ||
  fail "extract into a run folder: exit $rc, $(cat err.txt), $(ls runcopy)"
python3 - <<'PY'
import io, tarfile
with tarfile.open("twice.tar.gz") as src, tarfile.open("long.tar.gz", "w:gz", format=tarfile.PAX_FORMAT) as out:
    top = src.getmembers()[0].name.split("/")[0]
    for m in src.getmembers():
        out.addfile(m, src.extractfile(m) if m.isfile() else None)
    data = b"x"
    info = tarfile.TarInfo(top + "/" + "n" * 300 + "/f")
    info.size = len(data)
    out.addfile(info, io.BytesIO(data))
PY
set +e
"$tdbg" bundle --extract long.tar.gz -o long_x >out.txt 2>err.txt; rc=$?
set -e
[ $rc -eq 2 ] && [ ! -e long_x ] || fail "a failed extraction: exit $rc, $(cat err.txt), left $(ls -R long_x 2>&1 | head -5)"
echo "report_cli: all checks passed"
