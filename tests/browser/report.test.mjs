// Browser tests of the tdbg report and `tdbg view`: headless Chromium (Debian's) driven by
// playwright-core, checking what a user sees. Run by CTest (tests/browser/CMakeLists.txt) with
// TDBG, TDBG_FIXTURE and TDBG_BROWSER_OUT set.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch (e) {
  throw new Error('playwright-core is not installed in tests/browser: run scripts/deps (npm ci there)');
}

const tdbg = process.env.TDBG;
const fixture = process.env.TDBG_FIXTURE;
const out = process.env.TDBG_BROWSER_OUT || tmpdir();
assert.ok(tdbg && fixture, 'TDBG and TDBG_FIXTURE must name the built binaries');
mkdirSync(out, { recursive: true });

const work = mkdtempSync(join(tmpdir(), 'tdbg-browser-'));
let browser;

function makeRuns(name, ...args) {
  const dir = join(work, name);
  mkdirSync(dir);
  execFileSync(fixture, [dir, ...args]);
  return dir;
}
function makeReport(dir, ...runs) {
  const rep = join(dir, 'report');
  execFileSync(tdbg, ['report', ...runs, '-o', rep]);
  return pathToFileURL(join(rep, 'index.html')).href;
}
// A page that records dialogs, errors and any request leaving the file system.
async function openPage(url) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const seen = { dialogs: [], errors: [], requests: [] };
  page.on('dialog', d => { seen.dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  page.on('pageerror', e => seen.errors.push(String(e)));
  page.on('console', m => { if (m.type() === 'error') seen.errors.push(m.text()); });
  page.on('request', r => { if (!r.url().startsWith('file:') && !r.url().startsWith('data:') && !r.url().startsWith('http://127.0.0.1')) seen.requests.push(r.url()); });
  await page.goto(url);
  await page.waitForFunction(() => window.tdbgViewer && window.tdbgViewer.ready);
  return { page, seen };
}

before(async () => {
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
});
after(async () => {
  if (browser) await browser.close();
  rmSync(work, { recursive: true, force: true });
});

test('the static report shows the divergence, filters, scrolls virtually and links backward to forward', async () => {
  const dir = makeRuns('diverged', '--ops', '2000', '--diverge-at', '1102');
  const { page, seen } = await openPage(makeReport(dir, join(dir, 'a'), join(dir, 'b')));

  const status = await page.textContent('#status');
  assert.match(status, /Diverged at op #1102/);
  assert.match(status, /aten::addmm/);
  assert.match(status, /train\.py:21/);
  const cardA = page.locator('#divergence .card[data-side="A"]');
  assert.equal(await cardA.locator('.op-name').textContent(), 'aten::addmm');
  assert.match(await cardA.locator('.source').textContent(), /train\.py:21 in train_step$/);
  assert.equal(await page.locator('#divergence .card[data-side="B"] .op-name').textContent(), 'aten::addmm');
  // Why, in the diff's words, as `tdbg diff` prints it.
  const diffed = spawnSync(tdbg, ['diff', '--json', join(dir, 'a'), join(dir, 'b')], { encoding: 'utf8' });
  assert.equal(diffed.status, 1);
  const why = JSON.parse(diffed.stdout).first_divergence.detail;
  assert.ok(why && why.length > 10, `the diff has a detail: ${why}`);
  assert.equal(await page.textContent('#cause-detail'), why);
  assert.ok(await page.locator('#summaries').isVisible());
  // The relative differences are the diff's own figures (sum against the larger abs_sum), not
  // another formula.
  const rel = JSON.parse(diffed.stdout).first_divergence.tensor.rel_diff;
  for (const k of ['min', 'max', 'sum', 'abs_sum']) {
    const cells = await page.locator('#summaries tr').filter({ has: page.locator('th', { hasText: new RegExp(`^${k}$`) }) }).locator('td').allTextContents();
    assert.equal(Number(cells[2]).toPrecision(4), Number(rel[k]).toPrecision(4), `${k}: page ${cells[2]}, diff ${rel[k]}`);
  }
  assert.equal(await page.locator('#context tr.first').count(), 1);

  // The difference curve: a split marker and differing points.
  assert.equal(await page.locator('#curve line.split').count(), 1);
  assert.ok(await page.locator('#curve circle.dot').count() > 0);
  assert.match(await page.textContent('#curve-note'), /differ/);

  // Virtual scrolling: 1000 ops in the window, a few dozen rows in the DOM.
  assert.match(await page.textContent('#op-count'), /^1000 ops/);
  const rows = await page.locator('#op-table .vt-row').count();
  assert.ok(rows > 10 && rows < 80, `rows in the DOM: ${rows}`);
  await page.locator('#op-table').evaluate(el => { el.scrollTop = el.scrollHeight; });
  await page.waitForFunction(() => [...document.querySelectorAll('#op-table .vt-row')].some(r => Number(r.dataset.seq) > 1550));
  assert.ok(await page.locator('#op-table .vt-row').count() < 80);

  // Filtering narrows the table: mse_loss is one op per 22-op step.
  await page.fill('#filter-name', 'mse_loss');
  const filtered = Number((await page.textContent('#op-count')).split(' ')[0]);
  assert.ok(filtered > 40 && filtered < 50, `mse_loss rows: ${filtered}`);
  const names = await page.locator('#op-table .vt-row .name').allTextContents();
  assert.ok(names.length > 0 && names.every(n => n.includes('aten::mse_loss')));
  await page.fill('#filter-name', '');
  await page.fill('#filter-step', '50');
  assert.match(await page.textContent('#op-count'), /^22 ops/);
  await page.fill('#filter-module', 'layers.2');

  // A backward op links to its forward op.
  await page.fill('#filter-step', '');
  await page.fill('#filter-module', '');
  await page.fill('#filter-name', 'AddmmBackward0');
  await page.locator('#op-table .vt-row').first().click();
  // It has no stack of its own (autograd's thread): the forward op's line and stack, said so.
  assert.match(await page.textContent('#op-detail'), /train\.py:21 in train_step \(the forward op's line\)/);
  assert.match(await page.textContent('#op-detail'), /Stack of the forward op/);
  const fwdText = await page.textContent('#fwd-link');
  assert.match(fwdText, /^#\d+$/);
  await page.locator('#fwd-link').click();
  assert.equal(await page.textContent('#detail-name'), 'aten::addmm');
  assert.match(await page.textContent('#op-detail h3'), new RegExp(`^Op ${fwdText} `));
  assert.equal(await page.locator('#fwd-link').count(), 0);
  assert.equal(await page.locator('#kernels tr').count(), 2);  // header + one kernel

  // Arguments of an optimizer update, as a table of text.
  await page.fill('#filter-name', 'aten::add_');
  await page.locator('#op-table .vt-row').first().click();
  const detailText = await page.textContent('#op-detail');
  assert.match(detailText, /alpha-0\.01/);
  assert.doesNotMatch(detailText, /\[object|null/);

  await page.screenshot({ path: join(out, 'report.png'), fullPage: true });
  assert.deepEqual(seen.dialogs, []);
  assert.deepEqual(seen.errors, []);
  assert.deepEqual(seen.requests, []);
});

test('a first difference that healed is said to have changed nothing after it', async () => {
  const dir = makeRuns('healed', '--ops', '600', '--diverge-at', '300', '--heal');
  const diffed = spawnSync(tdbg, ['diff', '--json', join(dir, 'a'), join(dir, 'b')], { encoding: 'utf8' });
  assert.equal(diffed.status, 1);
  const healed = JSON.parse(diffed.stdout).first_divergence.healed;
  assert.ok(healed && healed.to_end === true, `the diff says healed: ${JSON.stringify(healed)}`);
  const { page, seen } = await openPage(makeReport(dir, join(dir, 'a'), join(dir, 'b')));
  const text = await page.textContent('#healed');
  assert.match(text, new RegExp(`^Healed: from seq ${healed.seq_a} \\(step \\d+\\) to the end, all ${healed.ops_same} op\\(s\\)`));
  // The headline says it too, as `tdbg diff`'s first line does.
  // With the op that overwrote the difference, as the diff names it.
  assert.ok(healed.by && healed.by.op, `the diff names what healed it: ${JSON.stringify(healed)}`);
  const by = ` by ${healed.by.op}${healed.by.source ? " at " + healed.by.source : ""} (seq ${healed.by.seq})`;
  assert.equal(await page.textContent('#status-healed'), `; healed${by}: the same again from seq ${healed.seq_a} to the end`);
  assert.ok(text.includes(`the last${by}`), text);
  assert.deepEqual(seen.errors, []);
});

test('switching the table to run B shows B\'s op in the panel, labelled', async () => {
  const dir = makeRuns('switch', '--ops', '600', '--diverge-at', '300');
  const fd = JSON.parse(spawnSync(tdbg, ['diff', '--json', join(dir, 'a'), join(dir, 'b')], { encoding: 'utf8' }).stdout).first_divergence;
  const { page, seen } = await openPage(makeReport(dir, join(dir, 'a'), join(dir, 'b')));
  assert.equal(await page.textContent('#detail-run'), ' · run A');
  const hashA = fd.tensor.hash_a, hashB = fd.tensor.hash_b;
  assert.ok((await page.textContent('#tensors')).includes(hashA));
  await page.selectOption('#run-picker', '1');
  await page.waitForFunction(() => document.querySelector('#detail-run') && document.querySelector('#detail-run').textContent === ' · run B');
  const tensors = await page.textContent('#tensors');
  assert.ok(tensors.includes(hashB) && !tensors.includes(hashA), `B's tensors: ${tensors}`);
  assert.equal(await page.textContent('#detail-name'), fd.b.op);
  assert.deepEqual(seen.errors, []);
});

test('a divergence where B inserts ops names B\'s op in the headline', async () => {
  const dir = makeRuns('inserted', '--ops', '600', '--insert-at', '300');
  const diffed = spawnSync(tdbg, ['diff', '--json', join(dir, 'a'), join(dir, 'b')], { encoding: 'utf8' });
  const fd = JSON.parse(diffed.stdout).first_divergence;
  assert.ok(fd && fd.a === null && fd.b, `precondition: no A side: ${JSON.stringify(fd && fd.a)}`);
  const { page, seen } = await openPage(makeReport(dir, join(dir, 'a'), join(dir, 'b')));
  const status = await page.textContent('#status');
  assert.ok(status.includes(`at op #${fd.b.seq} of B`) && status.includes(fd.b.op), status);
  assert.ok(!status.includes('?') && !status.includes('—,'), status);
  // The inserted ops change no result, and the banner says so as the diff's headline does.
  assert.ok(fd.values_same, 'precondition: the values stay the same');
  assert.equal(await page.textContent('#status-work'), '; the values stay the same to the end (work, not results)');
  // The page opens on B's op, the one only B ran, not A's op with that number, and the run
  // picker says B.
  assert.equal(await page.textContent('#detail-name'), fd.b.op);
  assert.equal(await page.inputValue('#run-picker'), '1');
  assert.match(await page.textContent('#op-detail h3'), new RegExp(`^Op #${fd.b.seq} `));
  // The context shows each side's own source line.
  const header = await page.locator('#context tr').first().locator('th').allTextContents();
  assert.deepEqual(header.slice(-2), ['A source', 'B source']);
  const first = await page.locator('#context tr.first td').allTextContents();
  const bSource = fd.b.source ? `${fd.b.source.file.split('/').pop()}:${fd.b.source.line}` : '';
  assert.ok(bSource && first[5].includes(bSource), `B's row shows B's line ${bSource}: ${first}`);
  // The op table (on B) marks the inserted op, and not the ops after it, which the diff pairs
  // with A's (the same values) although their numbers moved.
  const rows = await page.locator('#op-table .vt-row').evaluateAll(rs =>
    rs.map(r => ({ seq: Number(r.dataset.seq), differs: r.classList.contains('differs') })));
  const range = fd.structural_changes[0].b_range, count = range[1] - range[0];
  const inserted = rows.filter(r => r.seq >= fd.b.seq && r.seq < fd.b.seq + count);
  assert.ok(inserted.length === count && inserted.every(r => r.differs),
    `B's ${count} inserted ops from #${fd.b.seq} are marked: ${JSON.stringify(rows.slice(0, 8))}`);
  const later = rows.filter(r => r.seq >= fd.b.seq + count);
  assert.ok(later.length > 5 && later.every(r => !r.differs),
    `the ops after it, paired as the diff pairs them, are not: ${JSON.stringify(later.filter(r => r.differs).slice(0, 8))}`);
  // Rows below an insertion are not paired ops: none is painted as differing, and a note says why.
  assert.equal(await page.locator('#context tr.differs').count(), 0);
  assert.match(await page.textContent('#context-note'), /not paired ops/);
  // What the diff found after the change, as `tdbg diff` prints it.
  const after = fd.value_after_structure;
  if (after && after.a) {
    assert.match(await page.textContent('#value-after'), new RegExp(`^First value difference after the change: ${after.a.op} \\(seq A ${after.a.seq}, B ${after.b.seq}`));
  }
  // After an insertion the curve pairs ops as the diff aligns them, and says so.
  if (await page.locator('#curve-note').count()) assert.match(await page.textContent('#curve-aligned'), /as tdbg diff aligns them/);
  // Steps held: the first and the last the run holds.
  assert.match(await page.textContent('#overview table'), /steps held0–\d+/);
  assert.deepEqual(seen.errors, []);
});

test('an argument divergence names the argument and both values; a killed run says how it ended', async () => {
  const dir = makeRuns('argument', '--ops', '2000', '--lr-from', '1100', '--killed');
  const diffed = spawnSync(tdbg, ['diff', '--json', join(dir, 'a'), join(dir, 'b')], { encoding: 'utf8' });
  const fd = JSON.parse(diffed.stdout).first_divergence;
  assert.equal(fd.cause, 'arguments');
  const { page, seen } = await openPage(makeReport(dir, join(dir, 'a'), join(dir, 'b')));
  // With what tdbg diff adds of an argument inside optimizer.step(): what it is made of.
  assert.ok(fd.argument.in_optimizer_step, 'precondition: the learning rate, inside optimizer.step()');
  assert.equal(await page.textContent('#argument'),
    `Argument ${fd.argument.name}: A ${fd.argument.value_a}, B ${fd.argument.value_b} (inside optimizer.step(): ` +
    'a scalar made of its hyperparameters, so lr, momentum, betas, eps or weight decay differs, or the scheduler that sets lr)');
  // One run ended by a signal: the page says so where it names the run.
  const single = await openPage(makeReport(dir, join(dir, 'a')));
  assert.match(await single.page.textContent('#ending'), /the process was ended by signal 15 \(SIGTERM\)/);
  assert.deepEqual(seen.errors, []);
  assert.deepEqual(single.seen.errors, []);
});

// Real recordings of a small torch program (the report of several processes, of a run that
// ended early): the page says what `tdbg diff` says, where in the run and which processes.
function recordTorch(dir, name, script, args) {
  const run = join(dir, name);
  spawnSync(tdbg, ['record', '--quiet', '-o', run, '--', '/usr/bin/python3', script, ...args], { encoding: 'utf8' });
  return run;
}

test('the report of several processes names them, and a run that ended early says so', async () => {
  const dir = join(work, 'torch');
  mkdirSync(dir);
  const script = join(dir, 'loader.py');
  writeFileSync(script, [
    'import sys, torch',
    'from torch.utils.data import DataLoader, Dataset',
    'class DS(Dataset):',
    '    def __len__(self): return 8',
    '    def __getitem__(self, i): return torch.randn(4)',
    'if __name__ == "__main__":',
    '    torch.manual_seed(int(sys.argv[1]))',
    '    w = torch.randn(4, requires_grad=True)',
    '    opt = torch.optim.SGD([w], lr=0.1)',
    '    for step, x in enumerate(DataLoader(DS(), batch_size=4, num_workers=2)):',
    '        if step == int(sys.argv[2]): raise RuntimeError("stop")',
    '        opt.zero_grad(); (x @ w).sum().backward(); opt.step()',
    ''].join('\n'));
  const a = recordTorch(dir, 'a', script, ['0', '9']);
  const b = recordTorch(dir, 'b', script, ['1', '9']);
  const diffed = JSON.parse(spawnSync(tdbg, ['diff', '--json', a, b], { encoding: 'utf8' }).stdout);
  const fd = diffed.first_divergence;
  assert.ok(fd && fd.process_a && Array.isArray(fd.other_processes) && fd.other_processes.length > 0,
    `the seed makes every process differ: ${JSON.stringify(fd && fd.other_processes)}`);
  const head = spawnSync(tdbg, ['diff', a, b], { encoding: 'utf8' }).stdout.split('\n')[0];
  const where = head.match(/\(seq \d+, ([^)]*)\)/)[1];
  let { page, seen } = await openPage(makeReport(dir, a, b));
  assert.ok((await page.textContent('#status')).includes(where), `banner says "${where}" as the CLI: ${head}`);
  const listed = await page.textContent('#processes');
  assert.ok(listed.includes('process: ' + fd.process_a.text), listed);
  assert.equal(await page.locator('#processes li.also').count(), fd.other_processes.length);
  assert.match(await page.textContent('#overview table'), / in all; \d+ in process \d+, shown/);
  assert.deepEqual(seen.errors, []);
  // B stops with an error at step 1: it ended early there, not "diverged" a step later.
  const c = recordTorch(dir, 'c', script, ['0', '1']);
  const ended = JSON.parse(spawnSync(tdbg, ['diff', '--json', a, c], { encoding: 'utf8' }).stdout).first_divergence;
  assert.equal(ended.cause, 'ended');
  ({ page, seen } = await openPage(makeReport(dir, a, c)));
  const status = await page.textContent('#status');
  assert.match(status, /^Ended early/);
  assert.ok(status.includes('step ' + ended.ended_step), status);
  assert.deepEqual(seen.errors, []);
});

test('the settings that differ and the argument that explains a value after a change are in sight', async () => {
  // A BatchNorm left in eval mode: a structural change (no running-stats update), then the
  // first value difference, whose argument `training` is the answer.
  const dir = join(work, 'bn');
  mkdirSync(dir);
  const script = join(dir, 'bn.py');
  writeFileSync(script, [
    'import sys, torch',
    'torch.manual_seed(0)',
    'm = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))',
    'if sys.argv[1] == "eval": m.eval()',
    'm(torch.randn(8, 4)).sum().backward()',
    ''].join('\n'));
  const a = recordTorch(dir, 'a', script, ['train']);
  const b = recordTorch(dir, 'b', script, ['eval']);
  const diffed = JSON.parse(spawnSync(tdbg, ['diff', '--json', a, b], { encoding: 'utf8' }).stdout);
  const arg = diffed.first_divergence.value_after_structure.argument;
  assert.equal(arg.name, 'training');
  const { page, seen } = await openPage(makeReport(dir, a, b));
  assert.ok((await page.textContent('#value-after')).includes(`Argument training: A ${arg.value_a}, B ${arg.value_b}`),
    await page.textContent('#value-after'));
  // The command lines differ: said in the divergence section, not only in the metadata.
  const settings = await page.textContent('#settings');
  assert.match(settings, /^Settings that differ: cmdline A /);
  assert.ok(settings.includes('"eval"'), settings);
  assert.deepEqual(seen.errors, []);
});

test('the first non-finite value says why and shows the inputs, as tdbg nan does', async () => {
  const dir = makeRuns('nonfinite', '--ops', '600', '--nonfinite-at', '300', '--single');
  const nan = spawnSync(tdbg, ['nan', join(dir, 'a')], { encoding: 'utf8' });
  assert.equal(nan.status, 1);
  const cause = nan.stdout.split('\n').find(l => l.startsWith('  cause:'));
  assert.ok(cause, `tdbg nan gives a cause: ${nan.stdout}`);
  const { page, seen } = await openPage(makeReport(dir, join(dir, 'a')));
  assert.equal(await page.textContent('#nonfinite .nan-cause'), cause.replace(/^  cause:\s*/, ''));
  const inputs = nan.stdout.split('\n').filter(l => /^  input \d+:/.test(l)).map(l => l.trim());
  if (inputs.length) assert.ok((await page.textContent('#nonfinite .nan-inputs')).includes(inputs[0]));
  // Its module and the ops it ran inside, as tdbg nan names them.
  const f = JSON.parse(spawnSync(tdbg, ['nan', '--json', join(dir, 'a')], { encoding: 'utf8' }).stdout).first_nonfinite;
  const card = await page.textContent('#nonfinite');
  assert.ok(f.module && card.includes(f.module), `the module ${f.module} is on the card: ${card}`);
  for (const e of f.enclosing || []) assert.ok(card.includes(e.op), `the enclosing ${e.op} is on the card`);
  assert.deepEqual(seen.errors, []);
});

test('a NaN the program masks is reported as tdbg nan reports it, not as all finite', async () => {
  const dir = join(work, 'masked');
  mkdirSync(dir);
  const script = join(dir, 'masked.py');
  // log: NaN masked by where, with a finite gradient (no start). sqrt: the same mask, but
  // backward multiplies the masked NaN derivative by 0 (NaN in the weights).
  writeFileSync(script, [
    'import sys, torch',
    'torch.manual_seed(0)',
    'm = torch.nn.Linear(8, 8)',
    'h = m(torch.randn(16, 8))',
    'f = torch.log if sys.argv[1] == "log" else torch.sqrt',
    'torch.where(h > 0, f(h), torch.zeros_like(h)).mean().backward()',
    ''].join('\n'));
  for (const [fn, status] of [['log', 0], ['sqrt', 1]]) {
    const run = recordTorch(dir, fn, script, [fn]);
    const nan = spawnSync(tdbg, ['nan', run], { encoding: 'utf8' });
    assert.equal(nan.status, status, nan.stdout + nan.stderr);
    const masked = nan.stdout.split('\n').filter(l => l.startsWith('  masked:')).map(l => l.replace(/^  masked:\s*/, ''));
    assert.ok(masked.length > 0, `tdbg nan lists what was masked: ${nan.stdout}`);
    const { page, seen } = await openPage(makeReport(dir, run));
    const card = await page.textContent('#nonfinite');
    assert.ok(!card.includes('Every recorded value is finite'), card);
    for (const line of masked) assert.ok(card.includes(line), `the report says "${line}": ${card}`);
    if (fn === 'log') {
      assert.match(await page.textContent('#nonfinite .nan-finite'), /^No NaN or Inf starts in .* masked/);
    } else {
      assert.match(await page.textContent('#nonfinite .nan-masked'), /backward then made NaN/);
    }
    // Its verdict on top, as tdbg nan's first line.
    assert.equal(await page.textContent('#status-nonfinite'), nan.stdout.split('\n')[0]);
    // A report of one run links no divergence section.
    assert.equal(await page.locator('#nav a[href="#divergence"]').count(), 0);
    assert.equal(await page.locator('#nav a[href="#nonfinite"]').count(), 1);
    assert.deepEqual(seen.errors, []);
  }
});

test('work added, then B raised: the banner says the values agree only up to where B ended', async () => {
  const dir = join(work, 'ended');
  mkdirSync(dir);
  const script = join(dir, 'ended.py');
  writeFileSync(script, [
    'import sys, torch',
    'torch.manual_seed(0)',
    'x, y = torch.randn(32, 6), torch.randn(32, 1)',
    'w = torch.randn(6, 1, requires_grad=True)',
    'opt = torch.optim.SGD([w], lr=0.05)',
    'for step in range(8):',
    '    h = x @ w',
    '    if len(sys.argv) > 1:',
    '        h = h * 1.0',
    '    loss = ((h - y) ** 2).mean()',
    '    opt.zero_grad()',
    '    loss.backward()',
    '    opt.step()',
    '    if len(sys.argv) > 1 and step == 3:',
    '        raise RuntimeError("out of memory (simulated)")',
    ''].join('\n'));
  const a = recordTorch(dir, 'a', script, []);
  const b = recordTorch(dir, 'b', script, ['refactor']);
  const headline = spawnSync(tdbg, ['diff', a, b], { encoding: 'utf8' }).stdout.split('\n')[0];
  const said = headline.match(/; the values stay the same up to where B ended: .*$/);
  assert.ok(said && !headline.includes('not results'), headline);
  const { page, seen } = await openPage(makeReport(dir, a, b));
  assert.equal(await page.textContent('#status-work'), said[0]);
  const values = await page.textContent('#values-same');
  assert.ok(values.includes('pairs, up to where B ended)') && !values.includes('not results'), values);
  assert.deepEqual(seen.errors, []);
});

test('a weight decay first applied to zeros: the banner names one cause, as tdbg diff does', async () => {
  const dir = join(work, 'decay');
  mkdirSync(dir);
  const script = join(dir, 'decay.py');
  writeFileSync(script, [
    'import sys, torch',
    'torch.manual_seed(0)',
    'pos = torch.nn.Parameter(torch.zeros(4, 3))',
    'w = torch.nn.Parameter(torch.randn(3, 1))',
    'opt = torch.optim.AdamW([pos, w], lr=0.01, weight_decay=float(sys.argv[1]))',
    'x, y = torch.randn(4, 3), torch.randn(4, 1)',
    'for step in range(2):',
    '    opt.zero_grad()',
    '    torch.nn.functional.mse_loss((x + pos) @ w, y).backward()',
    '    opt.step()',
    ''].join('\n'));
  const a = recordTorch(dir, 'a', script, ['0.01']);
  const b = recordTorch(dir, 'b', script, ['0.1']);
  const headline = spawnSync(tdbg, ['diff', a, b], { encoding: 'utf8' }).stdout.split('\n')[0];
  const said = headline.match(/; it changed no value there, and the same argument changes values from aten::mul_ \(seq \d+/);
  assert.ok(said, headline);
  const { page, seen } = await openPage(makeReport(dir, a, b));
  assert.ok((await page.textContent('#status-healed')).startsWith(said[0]), await page.textContent('#status-healed'));
  assert.deepEqual(seen.errors, []);
});

test('a recording that stopped (its descriptors taken by the program) reads as stopped, not ended', async () => {
  const dir = join(work, 'stopped');
  mkdirSync(dir);
  const script = join(dir, 'stopped.py');
  writeFileSync(script, [
    'import ctypes, os, sys, time, torch',
    'torch.manual_seed(0)',
    'w = torch.randn(4, 1, requires_grad=True)',
    'opt = torch.optim.SGD([w], lr=0.1)',
    'x, y = torch.randn(8, 4), torch.randn(8, 1)',
    'for step in range(6):',
    '    xs = x * 1.0 if "change" in sys.argv else x',
    '    opt.zero_grad(); ((xs @ w - y) ** 2).mean().backward(); opt.step()',
    '    if step == 2 and "close" in sys.argv:',
    '        time.sleep(0.3)',
    '        for name in os.listdir("/proc/self/fd"):',
    '            try: target = os.readlink("/proc/self/fd/" + name)',
    '            except OSError: continue',
    '            if ".sqlite" in target: ctypes.CDLL(None).syscall(3, int(name))',
    ''].join('\n'));
  const a = recordTorch(dir, 'a', script, []);
  const b = recordTorch(dir, 'b', script, ['close']);
  const fd = JSON.parse(spawnSync(tdbg, ['diff', '--json', a, b], { encoding: 'utf8' }).stdout).first_divergence;
  assert.equal(fd.recording_stopped, 'B', JSON.stringify(fd));
  const { page, seen } = await openPage(makeReport(dir, a, b));
  const status = await page.textContent('#status');
  assert.match(status, /^Recording stopped/);
  assert.ok(status.includes("B's recording stopped after"), status);
  assert.deepEqual(seen.errors, []);
  // After a change that only added work, the values line says where B's recording stopped,
  // as the CLI does, not that B has no results after it.
  const changed = recordTorch(dir, 'c', script, ['change', 'close']);
  const text = spawnSync(tdbg, ['diff', a, changed], { encoding: 'utf8' }).stdout;
  assert.ok(text.includes("pairs, up to where B's recording stopped): the change added or moved work up to " +
    "there; B's recording holds nothing after it"), text);
  const second = await openPage(makeReport(dir, a, changed));
  const values = await second.page.textContent('#values-same');
  assert.ok(values.includes("up to where B's recording stopped): the change added or moved work up to there; " +
    "B's recording holds nothing after it."), values);
  assert.deepEqual(second.seen.errors, []);
});

test('a batch split into micro-batches: the headline says the updates agree, as tdbg diff does', async () => {
  const dir = join(work, 'micro');
  mkdirSync(dir);
  const script = join(dir, 'micro.py');
  writeFileSync(script, [
    'import sys, torch',
    'torch.manual_seed(0)',
    'm = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 2))',
    'opt = torch.optim.SGD(m.parameters(), lr=0.1)',
    'x, y = torch.randn(3, 8, 6), torch.randn(3, 8, 2)',
    'parts = int(sys.argv[1])',
    'for step in range(3):',
    '    opt.zero_grad()',
    '    for k in range(parts):',
    '        xs, ys = x[step].chunk(parts), y[step].chunk(parts)',
    '        (torch.nn.functional.mse_loss(m(xs[k]), ys[k]) / parts).backward()',
    '    opt.step()',
    ''].join('\n'));
  const a = recordTorch(dir, 'a', script, ['1']);
  const b = recordTorch(dir, 'b', script, ['2']);
  const headline = spawnSync(tdbg, ['diff', a, b], { encoding: 'utf8' }).stdout.split('\n')[0];
  const said = headline.match(/; the optimizer's updates agree at rounding level in every step \([^)]*\)/);
  assert.ok(said, headline);
  const { page, seen } = await openPage(makeReport(dir, a, b));
  assert.equal(await page.textContent('#status-updates'), said[0]);
  // The op table's source column: the file's base name and the line, whole.
  const sources = await page.locator('#op-table .vt-row').evaluateAll(rs => rs.map(r => r.children[5].textContent));
  assert.ok(sources.length > 0 && sources.every(t => /^micro\.py:\d+$/.test(t)), sources.slice(0, 5).join(' '));
  assert.deepEqual(seen.errors, []);
});

test('the context of a resumed run is centred where the diff compared, on each side', async () => {
  const dir = join(work, 'resumed');
  mkdirSync(dir);
  const script = join(dir, 'resume.py');
  writeFileSync(script, [
    'import sys, torch',
    'torch.manual_seed(0)',
    'w = torch.nn.Parameter(torch.randn(4))',
    'opt = torch.optim.SGD([w], lr=0.1)',
    'x = torch.randn(4)',
    'steps = range(2) if sys.argv[1] == "full" else range(1, 2)',
    'if sys.argv[1] != "full":',
    '    start = torch.zeros(3) + 1  # its own start-up: ops only B runs',
    'for k in steps:',
    '    opt.zero_grad()',
    '    (w * x * (k + 1)).sum().backward()',
    '    opt.step()',
    ''].join('\n'));
  const a = recordTorch(dir, 'a', script, ['full']);
  const b = recordTorch(dir, 'b', script, ['resume']);
  const diffed = JSON.parse(spawnSync(tdbg, ['diff', '--json', '--align-steps', '1:0', a, b], { encoding: 'utf8' }).stdout);
  const fd = diffed.first_divergence;
  const here = diffed.aligned_start.a;
  assert.ok(fd.a === null && here.seq > 0 && fd.b.seq === diffed.aligned_start.b.seq,
    `precondition: B's start-up inserted where A's step 1 begins, op ${here.seq}`);
  const rep = join(dir, 'report');
  execFileSync(tdbg, ['report', '--align-steps', '1:0', a, b, '-o', rep]);
  const { page, seen } = await openPage(pathToFileURL(join(rep, 'index.html')).href);
  const first = await page.locator('#context tr.first td').allTextContents();
  assert.equal(first[0], String(here.seq), `A's side of the marked row: where A's step 1 began: ${first}`);
  assert.equal(first[2], String(fd.b.seq), `B's side of the marked row: ${first}`);
  assert.deepEqual(seen.errors, []);
});

test('a report of one recording named twice says the runs are identical and warns why', async () => {
  const dir = makeRuns('twice', '--ops', '200');
  const { page, seen } = await openPage(makeReport(dir, join(dir, 'a'), join(dir, 'a')));
  assert.match(await page.textContent('#status'), /^The runs are identical/);
  assert.match(await page.textContent('#identical-warnings'), /A and B are the same recording/);
  assert.deepEqual(seen.errors, []);
});

test('a run full of HTML and script payloads executes nothing and shows them as text', async () => {
  const dir = makeRuns('hostile', '--ops', '600', '--diverge-at', '300', '--hostile');
  const { page, seen } = await openPage(makeReport(dir, join(dir, 'a'), join(dir, 'b')));
  await page.fill('#filter-name', 'script');
  const names = await page.locator('#op-table .vt-row .name').allTextContents();
  assert.ok(names.length > 0);
  assert.ok(names.every(n => n.includes('<script>window.__pwned=1;alert(1)</script>')), names[0]);
  await page.locator('#op-table .vt-row').first().click();
  await page.locator('#meta summary').click();
  await page.fill('#filter-name', '');
  await page.fill('#filter-module', 'img');
  await page.locator('#op-table .vt-row').first().click();
  await page.waitForTimeout(300);  // give any injected handler (onerror, onload) its chance
  assert.equal(await page.evaluate(() => typeof window.__pwned), 'undefined');
  assert.equal(await page.locator('img, iframe, object, embed').count(), 0);
  assert.equal(await page.locator('script').count(), 2);
  assert.deepEqual(seen.dialogs, []);
  assert.ok(await page.getByText('<svg onload="window.__pwned=1">', { exact: false }).count() > 0);
  await page.screenshot({ path: join(out, 'hostile.png'), fullPage: true });
});

test('tdbg view serves the viewer from 127.0.0.1 and pages through the whole run', async () => {
  const dir = makeRuns('view', '--ops', '5000', '--diverge-at', '4000');
  const server = spawn(tdbg, ['view', join(dir, 'a'), join(dir, 'b'), '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const url = await new Promise((resolve, reject) => {
      let text = '';
      server.stdout.on('data', d => { text += d; const m = text.match(/http:\/\/127\.0\.0\.1:\d+\//); if (m) resolve(m[0]); });
      server.on('exit', code => reject(new Error(`tdbg view exited ${code}`)));
    });
    const { page, seen } = await openPage(url);
    assert.match(await page.textContent('#status'), /Diverged at op #4000/);
    // Every op of the run, not a window.
    await page.waitForFunction(() => /^5000 ops/.test(document.getElementById('op-count').textContent));
    // The Runs table says so too, not a static report's window.
    assert.match(await page.textContent('#overview table'), /ops to page through5,?000 \(all of them\)/);
    await page.locator('#op-table').evaluate(el => { el.scrollTop = el.scrollHeight; });
    await page.waitForFunction(() => [...document.querySelectorAll('#op-table .vt-row')].some(r => r.dataset.seq === '4999'));
    assert.ok(await page.locator('#op-table .vt-row').count() < 80);
    await page.fill('#filter-name', 'mse_loss');
    await page.waitForFunction(() => /^227 ops/.test(document.getElementById('op-count').textContent));
    await page.locator('#op-table .vt-row').first().click();
    await page.waitForFunction(() => document.getElementById('detail-name') && document.getElementById('detail-name').textContent === 'aten::mse_loss');
    await page.screenshot({ path: join(out, 'view.png'), fullPage: true });
    assert.deepEqual(seen.dialogs, []);
    assert.deepEqual(seen.errors, []);
  } finally {
    server.kill('SIGINT');
    const code = await new Promise(r => server.exitCode !== null ? r(server.exitCode) : server.on('exit', c => r(c)));
    assert.equal(code, 0, 'tdbg view stops cleanly on SIGINT');
  }
});

test('a divergence reached from another line in each run names both lines, as tdbg diff does', async () => {
  const dir = join(work, 'two-lines');
  mkdirSync(dir);
  const script = join(dir, 'path.py');
  writeFileSync(script, [
    'import sys, torch',
    'x = torch.ones(3)',
    'if len(sys.argv) > 1:',
    '    y = x * 3',
    'else:',
    '    y = x * 2',
    'print(y.sum().item())',
    ''].join('\n'));
  const a = recordTorch(dir, 'a', script, []);
  const b = recordTorch(dir, 'b', script, ['other']);
  const diff = spawnSync(tdbg, ['diff', a, b], { encoding: 'utf8' }).stdout;
  assert.match(diff, /where: +A .*path\.py:6[^\n]*\n +B .*path\.py:4/, diff);
  const { page, seen } = await openPage(makeReport(dir, a, b));
  assert.match(await page.textContent('#status-sources'), /^A \S*path\.py:6 in <module>, B \S*path\.py:4 in <module>$/);
  assert.deepEqual(seen.errors, []);
  // And the bundle's README.
  const bundle = join(dir, 'bug.tar.gz');
  execFileSync(tdbg, ['bundle', a, b, '-o', bundle]);
  const readme = execFileSync('tar', ['-xzf', bundle, '-O', '--wildcards', '*/README.md'], { encoding: 'utf8' });
  assert.match(readme, /\*\*First divergence\*\*: op #\d+ `aten::mul` at step 0, \S*path\.py:6 \(in B from \S*path\.py:4\)/, readme);
});

test('a change that cuts parameters off from their gradient: the status says the optimizer leaves them', async () => {
  const dir = join(work, 'never-updated');
  mkdirSync(dir);
  const script = join(dir, 'cut.py');
  writeFileSync(script, [
    'import sys, torch',
    'from torch.utils.checkpoint import checkpoint',
    'torch.manual_seed(0)',
    'block, head = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)',
    'opt = torch.optim.SGD(list(block.parameters()) + list(head.parameters()), lr=0.1)',
    'x, y = torch.randn(8, 4), torch.randn(8, 1)',
    'for step in range(3):',
    '    h = checkpoint(block, x) if len(sys.argv) > 1 else block(x)',
    '    opt.zero_grad(); ((head(h) - y) ** 2).mean().backward(); opt.step()',
    ''].join('\n'));
  const a = recordTorch(dir, 'a', script, []);
  const b = recordTorch(dir, 'b', script, ['cut']);
  const headline = spawnSync(tdbg, ['diff', a, b], { encoding: 'utf8' }).stdout.split('\n')[0];
  const said = headline.match(/; B's optimizer leaves 2 parameter\(s\) the other's updates \(in Linear\(block\)\): no gradient reaches them in B/);
  assert.ok(said, headline);
  const { page, seen } = await openPage(makeReport(dir, a, b));
  assert.equal(await page.textContent('#status-not-updated'), said[0]);
  assert.deepEqual(seen.errors, []);
});
