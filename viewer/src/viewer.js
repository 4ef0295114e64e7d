// The tdbg viewer: renders the report data model (embedded JSON, see docs/cli.md) as overview,
// divergence, charts and a virtual-scrolling op table. Every string that comes from a run is
// inserted with text nodes / textContent, never parsed as HTML.
'use strict';
(function () {
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const ROW_HEIGHT = 22;
  const data = JSON.parse(document.getElementById('tdbg-data').textContent);
  const runs = data.runs || [];
  const server = data.mode === 'server';

  // ---- DOM helpers: the only way this file creates elements. Children that are strings or
  // numbers become text nodes; props are limited to a known set (no innerHTML anywhere).
  function h(tag, props, ...children) {
    const el = document.createElement(tag);
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (v === undefined || v === null || v === false) continue;
        if (k === 'class') el.className = v;
        else if (k === 'id') el.id = v;
        else if (k === 'title') el.title = String(v);
        else if (k === 'onclick') el.addEventListener('click', v);
        else if (k === 'oninput') el.addEventListener('input', v);
        else if (k === 'onchange') el.addEventListener('change', v);
        else if (k === 'type' || k === 'placeholder' || k === 'value' || k === 'colspan' || k === 'href')
          el.setAttribute(k, String(v));
        else if (k.startsWith('data-')) el.setAttribute(k, String(v));
        else throw new Error('h(): unexpected prop ' + k);
      }
    }
    append(el, children);
    return el;
  }
  function append(el, children) {
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      if (Array.isArray(c)) append(el, c);
      else if (c instanceof Node) el.appendChild(c);
      else el.appendChild(document.createTextNode(String(c)));
    }
  }
  function s(tag, attrs, ...children) {
    const el = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    for (const c of children) {
      if (c === null || c === undefined) continue;
      if (c instanceof Node) el.appendChild(c);
      else el.appendChild(document.createTextNode(String(c)));
    }
    return el;
  }
  function fmt(x) {
    if (x === null || x === undefined) return '—';
    if (typeof x !== 'number') return String(x);
    if (Number.isInteger(x) && Math.abs(x) < 1e15) return String(x);
    if (x === 0) return '0';
    const a = Math.abs(x);
    return a >= 1e-3 && a < 1e6 ? x.toPrecision(6) : x.toExponential(4);
  }
  function srcText(src) {
    if (!src || typeof src !== 'object') return src ? String(src) : '—';
    // A native frame of a C++ program has no line (0): its binary and "function +0xOFFSET".
    const where = (src.file || '?') + (src.line === 0 ? '' : ':' + (src.line ?? '?'));
    return src.function ? where + ' in ' + src.function : where;
  }
  // A source line in a narrow column: the file's base name and the line, which an ellipsis
  // would otherwise cut (the whole path and function are its title).
  function srcBrief(src) {
    if (!src || typeof src !== 'object') return srcText(src);
    return (src.file || '?').split('/').pop() + (src.line === 0 ? '' : ':' + (src.line ?? '?'));
  }
  function kv(rows) {
    return h('table', { class: 'kv' }, rows.filter(Boolean).map(([k, v]) =>
      h('tr', null, h('th', null, k), h('td', { class: 'mono' }, v))));
  }
  function section(id, title, ...body) {
    return h('section', { id }, h('h2', null, title), body);
  }
  const firstDivergence = data.diff && data.diff.first_divergence ? data.diff.first_divergence : null;
  const splitSeq = firstDivergence && firstDivergence.a && Number.isInteger(firstDivergence.a.seq)
    ? firstDivergence.a.seq
    : (data.curve && data.curve.first_differing_seq >= 0 ? data.curve.first_differing_seq : null);

  // Ops of each run's window by seq, and which ones differ from the other run.
  const opBySeq = runs.map(r => new Map((r.ops || []).map(o => [o.seq, o])));
  function outputsDiffer(x, y) {
    if (!x || !y) return false;
    if (x.name !== y.name) return true;
    for (const t of x.tensors || []) {
      if (t.role !== 'output' || !t.hash) continue;
      const u = (y.tensors || []).find(v => v.role === 'output' && v.index === t.index);
      if (u && u.hash && u.hash !== t.hash) return true;
    }
    return false;
  }
  // By seq before the diff's walk (the runs agree up to there); from it on as the walk paired
  // the ops (data.aligned: the ops whose outputs differ, and the ranges of changed structure
  // by thread), so that an inserted op is marked and does not shift every later pair.
  const differing = runs.map((r, i) => {
    const set = new Set();
    if (runs.length < 2) return set;
    const other = opBySeq[1 - i];
    const walk = data.aligned ? data.aligned[i] : null;
    const walkFrom = walk && Number.isInteger(walk.from_seq) ? walk.from_seq : Infinity;
    const marked = new Set(walk ? walk.seqs : []);
    const inRange = o => walk && walk.ranges.some(([thread, first, last]) =>
      o.thread === thread && o.seq >= first && o.seq <= last);
    for (const o of r.ops || []) {
      if (o.seq < walkFrom ? outputsDiffer(o, other.get(o.seq)) : marked.has(o.seq) || inRange(o)) set.add(o.seq);
    }
    return set;
  });

  // Where in the run a divergence is, as `tdbg diff` words it (tlparse/diff/render.cc,
  // where_in_run): the DataLoader worker (whose step says nothing), the step a run ended in,
  // both steps where they differ, and the thread where it is not the first.
  function whereInRun(fd, side) {
    const proc = fd.process_a || {};
    let where;
    if (proc.worker !== undefined && proc.worker !== null && proc.worker !== '') {
      where = 'in DataLoader worker ' + proc.worker;
    } else {
      where = 'step ' + fmt(fd.ended_step !== undefined ? fd.ended_step : (side || {}).step);
      if (fd.a && fd.b && fd.a.step !== fd.b.step) where = 'step A ' + fmt(fd.a.step) + ', B ' + fmt(fd.b.step);
    }
    const th = fd.threads;
    if (th && (th.a !== 0 || th.b !== 0))
      where += th.a === th.b ? ', thread ' + th.a : ', thread A ' + th.a + ', B ' + th.b;
    return where;
  }
  // The process that differs, and the others that differ later ("also:" on the command line).
  function processLines(fd) {
    const pa = fd.process_a, pb = fd.process_b;
    const lines = [];
    if (pa && pa.text) {
      lines.push(h('li', { class: 'process' }, h('strong', null, 'process: '),
        pb && pb.text && pb.index !== pa.index ? 'A ' + pa.text + '; B ' + pb.text : pa.text));
    }
    for (const x of Array.isArray(fd.other_processes) ? fd.other_processes : []) {
      const who = x.worker !== undefined && x.worker !== null && x.worker !== '' ? ' (DataLoader worker ' + x.worker + ')'
        : x.rank !== undefined && x.rank !== null && x.rank !== '' ? ' (rank ' + x.rank + ')' : '';
      lines.push(h('li', { class: 'also' }, h('strong', null, 'also: '), 'process ' + fmt(x.process) + who + ' differs later, ' +
        (x.kind === 'structure' ? 'structurally ' : '') + 'from ', h('code', null, x.op || '?'),
        ' (seq ' + fmt(x.seq) + ', step ' + fmt(x.step) + ')'));
    }
    return lines.length ? h('ul', { id: 'processes' }, lines) : null;
  }

  // ---- Overview: status and metadata side by side.
  function overview() {
    let banner;
    if (runs.length < 2) {
      // With tdbg nan's first line: where the first NaN or Inf started, or that none did.
      const nanHead = String((data.nonfinite_text || [])[0] || '').split('\n')[0];
      banner = h('div', { class: 'banner' + (nanHead.startsWith('non-finite') ? ' nonfinite' : ''), id: 'status' },
        'One run: ', runs[0] ? runs[0].path : '?',
        runs[0] && runs[0].ending ? h('span', { id: 'ending' }, ' — the process ' + runs[0].ending) : null,
        nanHead ? h('div', { id: 'status-nonfinite' }, nanHead) : null);
    } else if (!data.diff) {
      banner = h('div', { class: 'banner', id: 'status' }, 'Two runs (the diff engine was not run).');
    } else if (data.diff.status === 'identical') {
      // With what the diff warns of (the same recording named twice, runs recorded otherwise).
      const warned = (Array.isArray(data.diff.warnings) ? data.diff.warnings : []).filter(x => typeof x === 'string');
      banner = h('div', { class: 'banner identical', id: 'status' }, 'The runs are identical: every compared op has the same inputs and outputs.',
        warned.length ? h('ul', { id: 'identical-warnings' }, warned.map(w => h('li', null, h('strong', null, 'warning: '), w))) : null);
    } else {
      const fd = firstDivergence || {};
      // Ops only B runs (an insertion) have no A side: name B's op, said so.
      const onlyB = !fd.a && fd.b;
      const a = fd.a || fd.b || {};
      // A run that stopped (a crash, an error exit) ended early; it is no other program.
      const ended = fd.cause === 'ended';
      banner = h('div', { class: 'banner diverged', id: 'status' },
        h('strong', null, fd.recording_stopped ? 'Recording stopped' : ended ? 'Ended early' : 'Diverged'), onlyB ? ' at op #' + fmt(a.seq) + ' of B ' : ' at op #' + fmt(a.seq) + ' ',
        h('code', null, a.op || '?'), ', ', whereInRun(fd, a), ', ',
        // Reached from another line in each run (another code path, an edit): both, as the
        // diff prints them.
        fd.a && fd.b && srcText(fd.b.source) !== srcText(fd.a.source)
          ? h('span', { id: 'status-sources' }, 'A ', h('code', null, srcText(fd.a.source)), ', B ', h('code', null, srcText(fd.b.source)))
          : h('code', null, srcText(a.source)),
        a.source_note ? ' (' + a.source_note + ')' : null,
        fd.kind === 'structure' && fd.detail ? [' (', fd.detail, ')'] : null,
        fd.cause ? [' — cause: ', h('span', { class: 'tag' }, fd.cause)] : null,
        fd.kind && fd.kind !== fd.cause ? [' (', fd.kind, ' difference)'] : null,
        fd.healed && fd.healed.to_end ? h('span', { id: 'status-healed' }, fd.kind !== 'structure' && !fd.tensor
          ? '; it changes no value: every tensor is the same in both runs to the end'
          : '; healed' + healedBy(fd.healed) + ': the same again from seq ' + fmt(fd.healed.seq_a) + ' to the end')
          : fd.healed && fd.next && (fd.next.a || fd.next.b) ? h('span', { id: 'status-healed' },
            (sameArgument(fd, fd.next) ? '; it changed no value there, and the same argument changes values from '
              : '; healed, then diverged again at ') +
            (fd.next.a || fd.next.b).op + ' (seq ' + fmt((fd.next.a || fd.next.b).seq) + ')') : null,
        // Whether the change touches results at all, as the diff's headline says it.
        workWords(fd) ? h('span', { id: 'status-work' }, workWords(fd)) : null,
        // After a structural change, whether the optimizer's updates still agree.
        updatesWords(fd) ? h('span', { id: 'status-updates' }, '; ' + updatesWords(fd)) : null,
        // And whether the change cut parameters off from their gradient.
        notUpdatedWords(fd) ? h('span', { id: 'status-not-updated' }, notUpdatedWords(fd)) : null);
    }
    const keys = new Set();
    for (const r of runs) for (const k of Object.keys(r.meta || {})) keys.add(k);
    const metaRows = [...keys].sort().map(k => {
      const va = runs[0] && runs[0].meta ? runs[0].meta[k] : undefined;
      const vb = runs[1] && runs[1].meta ? runs[1].meta[k] : undefined;
      const differs = runs.length > 1 && va !== vb;
      return h('tr', { class: differs ? 'differs' : null }, h('th', null, k),
        h('td', { class: 'mono' }, va ?? '—'), runs.length > 1 ? h('td', { class: 'mono' }, vb ?? '—') : null);
    });
    const summary = h('table', null,
      h('tr', null, h('th', null, ''), runs.map(r => h('th', null, 'Run ' + r.label))),
      h('tr', null, h('th', null, 'path'), runs.map(r => h('td', { class: 'mono' }, r.path))),
      h('tr', null, h('th', null, 'processes'), runs.map(r => h('td', { class: 'num' }, (r.processes || []).length))),
      // Several processes: the run's total, and the shown process's (whose ops the page lists).
      h('tr', null, h('th', null, 'ops'), runs.map(r => {
        const ps = r.processes || [];
        if (ps.length < 2) return h('td', { class: 'num' }, fmt(r.op_count));
        const total = ps.reduce((n, p) => n + (typeof p.op_count === 'number' ? p.op_count : 0), 0);
        return h('td', { class: 'num' }, fmt(total) + ' in all; ' + fmt(r.op_count) + ' in process ' + fmt(r.process) + ', shown');
      })),
      // The steps the database holds (a ring or a trimmed bundle holds only the last ones).
      h('tr', null, h('th', null, 'steps held'), runs.map(r => h('td', { class: 'num' }, (r.steps || []).length
        ? fmt(r.steps[0].step) + '–' + fmt(r.steps[r.steps.length - 1].last_step) : 'none'))),
      h('tr', null, h('th', null, 'threads'), runs.map(r => h('td', { class: 'num' }, ((r.processes || [])[r.process || 0] || {}).threads ? r.processes[r.process || 0].threads.length : 0))),
      // Served by tdbg view, the table pages through every op: no window to speak of.
      h('tr', null, h('th', null, server ? 'ops to page through' : 'ops in this report'), runs.map(r => h('td', { class: 'num' },
        server ? fmt(r.op_count) + ' (all of them)'
          : r.window ? fmt(r.window.ops) + ' (#' + fmt(r.window.from_seq) + '…#' + fmt(r.window.to_seq) + ')' : '—'))));
    return section('overview', 'Overview', banner, h('h3', null, 'Runs'), summary,
      h('details', { id: 'meta' }, h('summary', null, 'Run metadata (', keys.size, ' keys)'),
        h('table', null, h('tr', null, h('th', null, 'key'), runs.map(r => h('th', null, r.label))), metaRows)));
  }

  // ---- Divergence panel: both sides of the first divergence with context and summaries.
  function stackList(frames, userSource) {
    if (!Array.isArray(frames) || frames.length === 0) return h('p', { class: 'muted' }, 'No stack recorded.');
    return h('ol', { class: 'stack' }, frames.map(f => {
      const text = typeof f === 'string' ? f : srcText(f);
      const user = userSource && typeof f === 'object' && f.file === userSource.file && f.line === userSource.line;
      return h('li', { class: user ? 'user' : null }, text);
    }));
  }
  // The relative difference of two summary values as `tdbg diff` measures it (tlparse/diff/ops.cc
  // relative_difference): against the larger of |x|, |y| and `scale`, at most 2.
  function relativeDifference(x, y, scale) {
    if (x === y) return 0;
    const m = Math.max(Math.abs(x), Math.abs(y), Number.isFinite(scale) ? Math.abs(scale) : 0);
    if (!(m > 0) || !Number.isFinite(m)) return 2;
    return Math.min(2, Math.abs(x - y) / m);
  }
  // Each summary's relative difference, as `tdbg diff` prints it (ops.cc summary_differences):
  // min and max against the largest magnitude of either tensor, sum against the larger abs_sum,
  // so that a value near 0 moving by a rounding error is no large difference. `given`: the diff's
  // own figures (`tensor.rel_diff`), used where present.
  function summaryDifferences(sa, sb, given) {
    const num = v => (typeof v === 'number' ? v : NaN);
    const magnitude = Math.max(Math.abs(num(sa.min)), Math.abs(num(sa.max)), Math.abs(num(sb.min)), Math.abs(num(sb.max)));
    const out = {
      min: relativeDifference(num(sa.min), num(sb.min), magnitude),
      max: relativeDifference(num(sa.max), num(sb.max), magnitude),
      sum: relativeDifference(num(sa.sum), num(sb.sum), Math.max(num(sa.abs_sum), num(sb.abs_sum))),
      abs_sum: relativeDifference(num(sa.abs_sum), num(sb.abs_sum), 0),
    };
    for (const k of Object.keys(out)) if (given && typeof given[k] === 'number') out[k] = given[k];
    return out;
  }
  function summariesTable(opA, opB, role, index, given) {
    const find = o => o && (o.tensors || []).find(t => t.role === role && t.index === index);
    const ta = find(opA), tb = find(opB);
    if (!ta && !tb) return null;
    const keys = ['min', 'max', 'sum', 'abs_sum', 'nan', 'inf'];
    const sa = (ta && ta.summary) || {}, sb = (tb && tb.summary) || {};
    const rels = summaryDifferences(sa, sb, given);
    return h('table', { id: 'summaries' },
      h('tr', null, h('th', null, role + ' ' + index), h('th', null, 'A'), h('th', null, 'B'), h('th', null, 'relative difference')),
      h('tr', null, h('th', null, 'hash'), h('td', { class: 'mono' }, ta ? ta.hash : '—'), h('td', { class: 'mono' }, tb ? tb.hash : '—'), h('td', null, ta && tb && ta.hash !== tb.hash ? h('span', { class: 'bad' }, 'differs') : 'same')),
      keys.map(k => {
        const x = sa[k], y = sb[k];
        let rel = '—';
        if (typeof x === 'number' && typeof y === 'number')
          rel = k in rels ? fmt(rels[k]) : x === y ? 'same' : h('span', { class: 'bad' }, 'differs');
        return h('tr', null, h('th', null, k), h('td', { class: 'num' }, fmt(x)), h('td', { class: 'num' }, fmt(y)), h('td', { class: 'num' }, rel));
      }));
  }
  // The op of side `to` to show beside `op` of side `from`, for a change only `from` ran: the
  // same number, unless the steps were paired (--align-steps, a resumption found) and the
  // change is where the comparison began (a resumed run's start-up): there, where `to` began.
  function alignedOther(op, from, to) {
    const start = data.diff && data.diff.aligned_start;
    if (start && start[from] && start[to] && op && op.seq === start[from].seq && Number.isInteger(start[to].seq))
      return start[to].seq;
    return op ? op.seq : 0;
  }
  function contextTable(seqA, seqB, structural) {
    const rows = [];
    const n = 5;
    for (let d = -n; d <= n; d++) {
      const oa = opBySeq[0].get(seqA + d), ob = runs[1] ? opBySeq[1].get(seqB + d) : null;
      if (!oa && !ob) continue;
      // Side by side by number: after ops one run inserted or removed, the rows below the change
      // are other ops, whose values are not compared here (the diff's alignment compares them).
      const cls = d === 0 ? 'first' : (!(structural && d > 0) && outputsDiffer(oa, ob) ? 'differs' : null);
      rows.push(h('tr', { class: cls },
        h('td', { class: 'num' }, oa ? oa.seq : ''), h('td', { class: 'mono' }, oa ? oa.name : '—'),
        h('td', { class: 'num' }, ob ? ob.seq : ''), h('td', { class: 'mono' }, ob ? ob.name : '—'),
        h('td', { class: 'mono' }, oa ? srcText(oa.source) : ''),
        runs[1] ? h('td', { class: 'mono' }, ob ? srcText(ob.source) : '') : null));
    }
    return h('table', { id: 'context' }, h('tr', null, h('th', null, 'A #'), h('th', null, 'A op'), h('th', null, 'B #'), h('th', null, 'B op'),
      h('th', null, runs[1] ? 'A source' : 'source'), runs[1] ? h('th', null, 'B source') : null), rows);
  }
  function sideCard(label, side, run) {
    if (!side) return h('div', { class: 'card ' + label.toLowerCase() }, h('h3', null, 'Run ' + label), h('p', { class: 'muted' }, 'No such op on this side.'));
    const op = run ? opBySeq[runs.indexOf(run)].get(side.seq) : null;
    const frames = Array.isArray(side.stack) ? side.stack : (op && op.stack && run.stacks ? run.stacks[op.stack] : null);
    return h('div', { class: 'card ' + label.toLowerCase(), 'data-side': label },
      h('h3', null, 'Run ' + label),
      kv([['op', h('code', { class: 'op-name' }, side.op ?? (op ? op.name : '?'))],
          ['seq', fmt(side.seq)], ['step', fmt(side.step)],
          ['source', h('code', { class: 'source' }, srcText(side.source || (op && op.source)))],
          op && op.module ? ['module', op.module] : null]),
      h('h3', null, 'Stack (most recent call last)'), stackList(frames, side.source));
  }
  // A first difference that healed (what it made was overwritten), and the new divergence
  // after it, as `tdbg diff` words them.
  // " by OP at SOURCE (seq N)": the op that overwrote the last differing tensor, as the diff says.
  function healedBy(healed) {
    const by = healed && healed.by;
    if (!by || typeof by !== 'object') return '';
    return ' by ' + by.op + (by.source ? ' at ' + srcText(by.source) : '') + ' (seq ' + fmt(by.seq) + ')';
  }
  // A number as C's "%.2g" writes it (how tdbg diff prints relative differences): two
  // significant digits, no trailing zeros, a two-digit exponent.
  function printfG2(x) {
    const e = Number(x).toExponential(1);  // "1.5e-5": the exponent after rounding
    const exponent = parseInt(e.split('e')[1], 10);
    if (exponent < -4 || exponent >= 2) {
      return e.replace(/\.?0+e/, 'e').replace(/e([+-])(\d)$/, 'e$10$2');
    }
    const t = Number(x).toPrecision(2);
    return t.includes('.') ? t.replace(/0+$/, '').replace(/\.$/, '') : t;
  }
  // The diff's word on the optimizer's updates after a structural change (`updates`), as its
  // headline says it.
  // The run whose process ended early where the other's did not ('A', 'B' or ''), as the
  // diff names it: the divergence is that end, the change ended there, or it came later.
  function runThatEnded(fd) {
    if (fd.run_ended && typeof fd.run_ended === 'object') return String(fd.run_ended.run);
    if (fd.ended_in_change) return String(fd.ended_in_change);
    if (fd.cause === 'ended') return fd.a ? 'B' : 'A';
    return '';
  }
  function updatesWords(fd) {
    const u = fd && fd.updates;
    if (!u || typeof u !== 'object') return null;
    const scope = u.unpaired_step !== null && u.unpaired_step !== undefined
      ? ' in the steps before step ' + fmt(u.unpaired_step) + ' (from there the optimizer runs other ops)'
      : runThatEnded(fd) ? ' in every step both ran' : ' in every step';
    if (u.rounding) {
      return u.largest === 0 ? 'the optimizer\'s updates are the same' + scope
        : 'the optimizer\'s updates agree at rounding level' + scope + ' (largest relative difference ' +
          printfG2(u.largest) + ')';
    }
    return 'the optimizer\'s updates differ beyond rounding from step ' + fmt(u.beyond && u.beyond.step);
  }
  // After a structural change, parameters one run's optimizer leaves that the other's updates
  // (`not_updated`), as the diff's headline says it.
  function notUpdatedWords(fd) {
    const n = fd && fd.not_updated;
    if (!n || typeof n !== 'object') return null;
    const params = Array.isArray(n.params) ? n.params : [];
    const modules = [];
    for (const p of params) if (p && p.module && !modules.includes(p.module)) modules.push(p.module);
    const more = n.missing > params.length;
    return '; ' + n.run + '\'s optimizer leaves ' + fmt(n.missing) + ' parameter(s) the other\'s updates' +
      (modules.length ? ' (in ' + modules.join(', ') + (more ? ', ...)' : ')') : '') +
      (n.skipped_by_optimizer
        ? ': backward ran the same ops in both runs, so ' + n.run +
          '\'s optimizer was not given them (or their .grad was None at its step)'
        : ': no gradient reaches them in ' + n.run);
  }
  // Whether two divergences are the same argument difference (a weight decay first applied to a
  // tensor of zeros), as the diff's headline tells it.
  function sameArgument(first, next) {
    const a = first.argument, b = next.argument;
    return first.cause === 'arguments' && next.cause === 'arguments' && a && b && typeof a === 'object' &&
      typeof b === 'object' && a.name === b.name && a.value_a === b.value_a && a.value_b === b.value_b;
  }
  // Whether the change touches results at all, as the diff's headline says it: up to where a
  // run ended early (`run_ended`), which has no results past its end.
  // "up to where B ended", or "... B's recording stopped" where the process went on unrecorded.
  function upToWhereEnded(ended) {
    return 'up to where ' + ended.run + (ended.recording_stopped ? "'s recording stopped" : ' ended');
  }
  function workWords(fd) {
    const ended = fd.run_ended && typeof fd.run_ended === 'object' ? fd.run_ended : null;
    // (Where it ended in the change, the detail already said how.)
    const said = Boolean(fd.ended_in_change);
    const until = !ended ? ' (work, not results)' : ' ' + upToWhereEnded(ended) + (said ? '' : ': ' + ended.text);
    if (fd.contained && typeof fd.contained === 'object') return "; it reaches no other op's output" + until;
    if (fd.values_same && typeof fd.values_same === 'object') return ended ? '; the values stay the same' + until
      : '; the values stay the same to the end' + until;
    return ended && !said ? '; then ' + ended.text : null;
  }
  function healing(fd) {
    if (fd.values_same && typeof fd.values_same === 'object') {
      const ended = fd.run_ended && typeof fd.run_ended === 'object' ? fd.run_ended : null;
      return h('p', { id: 'values-same' }, h('strong', null, 'Values: '),
        'every op paired outside the changes has the same values in both runs (' + fmt(fd.values_same.pairs) +
        (ended ? ' pairs, ' + upToWhereEnded(ended) + '): the change added or moved work up to there; ' +
          ended.run + (ended.recording_stopped ? "'s recording holds nothing after it." : ' has no results after it.')
          : ' pairs, to the end): the change added or moved work, not results.'));
    }
    const left = fd.values_left_differ;
    if (left && typeof left === 'object') {
      const which = (op) => (op && op.op) + ' (seq ' + fmt(op && op.seq) + ')';
      return h('p', { id: 'values-left-differ' }, h('strong', null, 'Values: '),
        'every op paired outside the changes has the same values in both runs (' + fmt(left.pairs) +
        ' pairs, to the end), but the changed ops leave other values, which no later op compared ' +
        'reads (state kept to the end or saved, such as an EMA of the weights): A\'s ' + which(left.a) +
        ', B\'s ' + which(left.b) + '.');
    }
    const healed = fd.healed;
    if (!healed || typeof healed !== 'object') return null;
    if (healed.to_end) {
      return h('p', { id: 'healed' }, h('strong', null, 'Healed: '),
        'from seq ' + fmt(healed.seq_a) + ' (step ' + fmt(healed.step) + ') to the end, all ' + fmt(healed.ops_same) +
        ' op(s) compared are the same in both runs: ' + (fd.kind !== 'structure' && !fd.tensor
          ? 'the op\'s tensors are the same in both runs, so what differs changed no value.'
          : 'every tensor that differed was overwritten with the same values' + (healed.by ? ', the last' + healedBy(healed) : '') +
            ', and it changed nothing after.'));
    }
    const next = fd.next;
    if (!next || !(next.a || next.b)) return null;
    const side = next.a || next.b;
    return h('div', { id: 'healed' },
      h('p', null, h('strong', null, 'Healed, then a new divergence: '),
        fmt(healed.ops_same) + ' op(s) from seq ' + fmt(healed.seq_a) + ' were the same in both runs' +
          (fd.kind !== 'structure' && !fd.tensor ? ' (the op\'s tensors were the same: what differs changed no value)' : '') + '; then ',
        h('code', null, side.op), ' (seq ' + fmt(side.seq) + (next.a ? '' : ' of B') + ', step ' + fmt(side.step) + ') differs by itself: ',
        h('span', { class: 'tag', id: 'next-cause' }, next.cause || '?'), ' at ', h('code', { class: 'source' }, srcText(side.source))),
      next.detail ? h('p', { id: 'next-detail' }, next.detail +
        (next.argument ? ' (' + next.argument.name + ': A ' + next.argument.value_a + ', B ' + next.argument.value_b + ')' : '')) : null);
  }
  // A number's text as `tdbg diff` prints it: the shortest that reads back the same double
  // (0.05, not 0.050000000000000003), which is what JavaScript's Number gives.
  function numText(v) {
    const text = String(v);
    if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text) || !/[.eE]/.test(text)) return text;
    const n = Number(text);
    return Number.isFinite(n) ? String(n) : text;
  }
  // After a structural change: the first op whose values differ, as `tdbg diff` names it.
  function valueAfter(v) {
    if (!v || typeof v !== 'object' || !v.a) return null;
    const stepA = fmt(v.a.step), stepB = v.b ? fmt(v.b.step) : stepA;
    return h('p', { id: 'value-after' },
      h('strong', null, 'First value difference after the change' + (v.moved ? ', in an op that moved' : '') + ': '),
      h('code', null, v.a.op || '?'), ' (seq A ' + fmt(v.a.seq) + ', B ' + fmt(v.b ? v.b.seq : null) +
        (stepA === stepB ? ', step ' + stepA : ', step A ' + stepA + ', B ' + stepB) + ') at ',
      h('code', { class: 'source' }, srcText(v.a.source)),
      v.b && srcText(v.b.source) !== srcText(v.a.source) ? [' (B: ', h('code', { class: 'source' }, srcText(v.b.source)), ')'] : null,
      ' — cause: ', h('span', { class: 'tag' }, v.cause || '?'),
      v.detail ? [': ', v.detail] : null,
      v.argument ? [h('br'), 'Argument ', h('code', { id: 'value-after-argument' }, v.argument.name || '#' + v.argument.index),
        ': A ', h('code', null, numText(v.argument.value_a)), ', B ', h('code', null, numText(v.argument.value_b))] : null);
  }
  // The settings that differ between the runs (seed, thread counts, command line, environment),
  // often the cause itself: one line, as `tdbg diff` prints them.
  function settingsLine() {
    const settings = data.diff && Array.isArray(data.diff.settings) ? data.diff.settings.filter(s => s && s.key) : [];
    if (!settings.length) return null;
    const value = v => (v === undefined || v === null || v === '' ? '(unset)' : String(v));
    return h('p', { id: 'settings' }, h('strong', null, 'Settings that differ: '),
      settings.map((s, i) => [i ? '; ' : '', h('code', null, s.key), ' A ', h('code', null, value(s.a)), ', B ',
        h('code', null, value(s.b)), s.note ? ' (' + s.note + ')' : '']));
  }
  // Compared from a later op than the thread's first (a ring, a trimmed bundle): the runs may
  // have differed before.
  function comparedFrom(fd) {
    const from = fd.compared_from;
    if (!from || typeof from !== 'object') return null;
    if (from.bundle_window)
      return h('p', { id: 'compared-from' }, h('strong', null, 'Compared: '),
        "from A's op " + fmt(from.tidx) + ' of the thread (step ' + fmt(from.step) + ') on: a bundle holds this window ' +
        'of the runs, cut around the divergence found when they were compared whole (its diff.json).');
    return h('p', { id: 'compared-from' }, h('strong', null, 'Compared: '),
      "from A's op " + fmt(from.tidx) + ' of the thread (step ' + fmt(from.step) + ') on: a --ring or a trimmed bundle ' +
      'dropped the earlier ones, and the runs may have differed before' +
      (from.in_first_step ? '; this difference is in the first step held, so they likely did: record again with a longer ' +
        '--ring, or with --steps from an earlier step' : '') + '.');
  }
  function divergence() {
    if (runs.length < 2) return null;
    if (!firstDivergence) {
      return section('divergence', 'First divergence', h('p', null, data.diff ? 'None: the runs agree on every compared op.' : 'Not computed.'));
    }
    const fd = firstDivergence;
    const t = fd.tensor || null;
    const opA = fd.a ? opBySeq[0].get(fd.a.seq) : null, opB = fd.b ? opBySeq[1].get(fd.b.seq) : null;
    // Why, in the diff's own words (as `tdbg diff` prints them): the detail, then what the
    // reader must keep in mind (warnings on how the runs were recorded, notes on how they ended).
    const said = (list) => (Array.isArray(list) ? list : []).filter(x => typeof x === 'string');
    const warnings = said(data.diff && data.diff.warnings), notes = said(data.diff && data.diff.notes);
    return section('divergence', 'First divergence',
      h('p', null, 'Kind ', h('span', { class: 'tag' }, fd.kind || '?'), ', cause ', h('span', { class: 'tag', id: 'cause' }, fd.cause || '?'),
        t ? [', tensor: ', h('code', null, t.role + ' ' + t.index + ' ' + (t.dtype || '') + '[' + (t.shape || '') + ']')] : null),
      fd.detail ? h('p', { id: 'cause-detail' }, fd.detail) : null,
      settingsLine(),
      comparedFrom(fd),
      processLines(fd),
      fd.argument ? h('p', { id: 'argument' }, 'Argument ', h('code', null, fd.argument.name || '#' + fd.argument.index),
        ': A ', h('code', null, numText(fd.argument.value_a)), ', B ', h('code', null, numText(fd.argument.value_b)),
        // What such a number is made of, as tdbg diff says it.
        fd.argument.optimizer && fd.argument.optimizer.text ? ' (' + fd.argument.optimizer.text + ')'
          : fd.argument.in_optimizer_step ? ' (inside optimizer.step(): a scalar made of its hyperparameters, so lr, momentum, ' +
            'betas, eps or weight decay differs, or the scheduler that sets lr)' : null) : null,
      // What differs in the optimizer's settings where its ops change (nesterov, a class).
      fd.optimizer_settings && fd.optimizer_settings.text ? h('p', { id: 'optimizer-settings' }, 'Optimizer: from step ' +
        fmt(fd.optimizer_settings.step) + ', ' + fd.optimizer_settings.text) : null,
      valueAfter(fd.value_after_structure),
      healing(fd),
      warnings.length || notes.length ? h('ul', { id: 'diff-notes' },
        warnings.map(w => h('li', null, h('strong', null, 'warning: '), w)),
        notes.map(n => h('li', null, 'note: ', n))) : null,
      h('div', { class: 'sides' }, sideCard('A', fd.a, runs[0]), sideCard('B', fd.b, runs[1])),
      t ? [h('h3', null, 'Summaries of the differing tensor'), summariesTable(opA, opB, t.role, t.index, t.rel_diff) ||
        h('p', { class: 'muted' }, 'The op is outside the window of this report.')] : null,
      h('h3', null, 'Context'), contextTable(fd.a ? fd.a.seq : alignedOther(fd.b, 'b', 'a'),
        fd.b ? fd.b.seq : alignedOther(fd.a, 'a', 'b'), fd.kind === 'structure'),
      fd.kind === 'structure' ? h('p', { class: 'muted', id: 'context-note' }, 'Rows side by side by number: below the change they are not paired ops, and are not coloured.') : null,
      data.diff_text ? h('details', { id: 'diff-text' }, h('summary', null, 'As tdbg diff prints it'), h('pre', null, data.diff_text)) : null);
  }

  function nonfinite() {
    const items = (data.nonfinite || []).map((n, i) => {
      const r = runs[i] || { label: '?' };
      // What `tdbg nan` prints for this run: the report says what the command line says.
      const said = String((data.nonfinite_text || [])[i] || '').split('\n');
      const labelled = (label) => said.filter(l => l.startsWith('  ' + label + ':')).map(l => l.replace(/^  [a-z]+:\s*/, ''));
      if (n && n.status === 'unchecked') {
        return h('div', { class: 'card ' + (r.label || '').toLowerCase() }, h('h3', null, 'Run ' + r.label),
          h('p', null, 'Not checked: ' + n.reason + '.'));
      }
      if (n && n.status === 'carried') {
        const step = n.options ? n.options.from_step : '?';
        return h('div', { class: 'card ' + (r.label || '').toLowerCase() }, h('h3', null, 'Run ' + r.label),
          h('p', null, 'Non-finite from before step ' + step + ': ' + fmt(n.carried) + ' op(s) from step ' + step +
            ' on hold NaN or Inf that ' + fmt(n.skipped) + ' start(s) before it passed on, and none starts there.'));
      }
      if (n && n.status === 'finite' && said[0].startsWith('finite: ')) {
        // The starts the program masked or an op cleaned, listed as `tdbg nan` lists them.
        const listed = said.slice(1).filter(l => /^  ([a-z]+:|\()/.test(l)).map(l => l.trim());
        const head = said[0].replace(/^finite: /, '');
        return h('div', { class: 'card ' + (r.label || '').toLowerCase() }, h('h3', null, 'Run ' + r.label),
          h('p', { class: 'nan-finite' }, head.charAt(0).toUpperCase() + head.slice(1)),
          listed.length ? h('pre', { class: 'nan-listed' }, listed.join('\n')) : null);
      }
      if (!n || n.status !== 'nonfinite' || !n.first_nonfinite) {
        // Each op passed over counted once, as what it is (as `tdbg nan` words it).
        const passed = n ? [
          n.contained > 0 ? fmt(n.contained) + ' NaN/Inf start(s) cleaned inside the op that ran them (' +
            (n.contained_starts || []).map(c => c.op + ' at ' + srcText(c.source) + ', step ' + fmt(c.step)).join('; ') + ')' : null,
          n.ignored > 0 ? fmt(n.ignored) + ' Inf start(s) ignored by --nan-only (Inf made from finite values)' : null,
          n.skipped > 0 ? fmt(n.skipped) + ' start(s) before the first step asked for skipped' : null,
          n.explained > 0 ? fmt(n.explained) + ' op(s) whose NaN/Inf came from their inputs or an Inf/NaN argument (such as attention masks)' : null,
        ].filter(Boolean) : [];
        const held = passed.length > 0
          ? 'No NaN or Inf starts in this run; ' + passed.join('; ') + '.'
          : 'Every recorded value is finite.';
        return h('div', { class: 'card ' + (r.label || '').toLowerCase() }, h('h3', null, 'Run ' + r.label), h('p', null, held));
      }
      const f = n.first_nonfinite;
      // The cause and the inputs as `tdbg nan` words them.
      const causeLine = said.find(l => l.startsWith('  cause:'));
      const inputLines = said.filter(l => /^  (input \d+|output \d+|args):/.test(l)).map(l => l.trim());
      return h('div', { class: 'card ' + (r.label || '').toLowerCase() }, h('h3', null, 'Run ' + r.label),
        kv([['op', h('code', null, f.op ?? '?')], ['seq', fmt(f.seq)],
            // A worker counts no optimizer step of its own: its step is where it was forked.
            ['step', fmt(f.step) + (f.process_info && f.process_info.worker
              ? ' (a DataLoader worker runs no optimizer step: the step it was forked in' +
                ((f.other_starts || []).length ? '; the step of the process that read the batch is under "also")' : ')')
              : '')],
            f.process_info ? ['process', f.process_info.text] : null,
            ['source', [h('code', null, srcText(f.source)), f.source_from_forward ? ' (the forward op\'s line)' : null,
            f.source_note ? ' (' + f.source_note + ')' : null]],
            f.module ? ['module', h('code', null, f.module)] : null,
            // The ops it ran inside, innermost first, as `tdbg nan` prints them.
            (f.enclosing || []).length ? ['inside', (f.backward ? 'backward: ' : '') + f.enclosing.map(e => e.op).reverse().join(' < ')]
              : f.backward ? ['in', 'backward'] : null,
            // The cause as `tdbg nan` words it, with its advice; the words below where it has none.
            causeLine ? ['why', h('span', { class: 'nan-cause' }, causeLine.replace(/^  cause:\s*/, ''))] :
            f.entered === 'uninitialized' ? ['cause', 'NaN entered here from uninitialized memory: an input read memory that an op of the empty family returned and no recorded op wrote (torch.empty where zeros were meant), unless the program filled it outside torch\'s ops'] :
            f.entered === 'dropped' ? ['cause', 'NaN entered the recording here: an input holds NaN made before the first op the recording holds (a --ring kept the last ops); it started earlier'] :
            f.entered ? ['cause', 'NaN entered here through ' + (f.entered === 'input' ? 'an input that no recorded op produced' : 'a NaN argument' + (f.argument ? ' (' + f.argument.name + ' = ' + f.argument.value + ')' : '')) + '; no op made it from finite values'] : null,
            (f.other_starts || []).length > 0 ? ['also', f.other_starts.map((s) => s.op + ' (seq ' + s.seq + ', step ' + fmt(s.step) +
              (s.source ? ', ' + srcText(s.source) : '') + ') in process ' + (s.process ? s.process.index : '?')).join('; ')] : null,
            f.tensor ? ['tensor', (f.tensor.role || '') + ' ' + (f.tensor.index ?? '') + ' ' + (f.tensor.dtype || '') + '[' + (f.tensor.shape || '') + ']' +
              (f.tensor.summary ? ': ' + fmt(f.tensor.summary.nan) + ' NaN, ' + fmt(f.tensor.summary.inf) + ' Inf' : '')] : null,
            // A mask in the forward that backward undid, and what to try (`hint:`).
            ...['masked', 'hint'].flatMap(label => labelled(label).map(text => [label, h('span', { class: 'nan-' + label }, text)]))]),
        inputLines.length ? h('pre', { class: 'nan-inputs' }, inputLines.join('\n')) : null,
        // What the search notes (ops a ring dropped before the first held: re-record with --steps).
        (n.notes || []).length ? h('ul', { class: 'nan-notes' }, n.notes.map(x => h('li', null, 'note: ', x))) : null,
        h('h3', null, 'Stack'), stackList(f.stack, f.source));
    });
    if (items.length === 0) return null;
    return section('nonfinite', 'First non-finite value', h('div', { class: 'sides' }, items));
  }

  // ---- Pictures: the difference curve (log scale) and ops per step.
  function curveChart() {
    const c = data.curve;
    if (!c || !c.points || c.points.length === 0) return null;
    const W = 960, H = 280, L = 60, R = 20, T = 20, B = 40;
    const floor = 1e-17;
    const maxRel = Math.max(1, ...c.points.map(p => p.rel || 0));
    const y0 = Math.log10(floor), y1 = Math.log10(maxRel);
    const x0 = c.points[0].seq, x1 = Math.max(c.points[c.points.length - 1].seq, x0 + 1);
    const X = v => L + (v - x0) / (x1 - x0) * (W - L - R);
    const Y = v => T + (1 - (Math.log10(Math.max(v || 0, floor)) - y0) / (y1 - y0)) * (H - T - B);
    const g = s('svg', { class: 'chart', id: 'curve', viewBox: `0 0 ${W} ${H}`, role: 'img' },
      s('title', null, 'Relative difference of output sums between run A and run B, per op'));
    for (let e = -16; e <= Math.floor(y1); e += 4) {
      g.appendChild(s('line', { class: 'grid', x1: L, x2: W - R, y1: Y(10 ** e), y2: Y(10 ** e) }));
      g.appendChild(s('text', { x: L - 6, y: Y(10 ** e) + 4, 'text-anchor': 'end' }, '1e' + e));
    }
    g.appendChild(s('text', { x: L, y: H - 12 }, '#' + x0));
    g.appendChild(s('text', { x: W - R, y: H - 12, 'text-anchor': 'end' }, '#' + x1));
    g.appendChild(s('text', { x: (L + W) / 2, y: H - 8, 'text-anchor': 'middle' }, 'op sequence (' + fmt(c.ops_per_point) + ' ops per point)'));
    const pts = c.points.map(p => `${X(p.seq).toFixed(1)},${Y(p.rel).toFixed(1)}`).join(' ');
    g.appendChild(s('polyline', { class: 'curve', points: pts }));
    for (const p of c.points) {
      if (!p.differing) continue;
      g.appendChild(s('circle', { class: 'dot', cx: X(p.seq).toFixed(1), cy: Y(p.rel).toFixed(1), r: 2.5 },
        s('title', null, `#${p.seq}–#${p.last_seq}: ${p.differing} of ${p.ops} ops differ, max rel. difference ${fmt(p.rel)}`)));
    }
    if (splitSeq !== null && splitSeq >= x0 && splitSeq <= x1) {
      g.appendChild(s('line', { class: 'split', x1: X(splitSeq), x2: X(splitSeq), y1: T, y2: H - B }));
      g.appendChild(s('text', { x: X(splitSeq) + 4, y: T + 10 }, 'split at #' + splitSeq));
    }
    const diffOps = c.points.reduce((n, p) => n + (p.differing || 0), 0);
    return h('div', null, h('h3', null, 'How far apart the runs are (relative difference of output sums, log scale)'), g,
      h('p', { class: 'muted', id: 'curve-note' }, fmt(diffOps), ' of ', fmt(c.points.reduce((n, p) => n + p.ops, 0)),
        ' compared ops differ from #', fmt(c.from_seq), ' to #', fmt(c.to_seq), '. Measure: ', c.measure || '',
        // From the first divergence on, the curve follows the diff's alignment (in the thread
        // where the runs diverged); without it (no diff computed), ops are paired by number,
        // which after ops one run inserted or removed pairs other ops.
        typeof c.aligned_from_seq === 'number'
          ? h('span', { id: 'curve-aligned' }, '. From #' + fmt(c.aligned_from_seq) + ' on, ops are paired as tdbg diff aligns them, ' +
              'in the thread where the runs diverged (ops only one run holds count as differing); before it, ' +
              (c.aligned_steps ? 'the ops tdbg diff compared and found the same' : 'by number'))
          : null,
        c.aligned_steps
          ? h('span', { id: 'curve-align-steps' }, '. With --align-steps ' + c.aligned_steps.a + ':' + c.aligned_steps.b +
              ', the curve starts at A\'s step ' + c.aligned_steps.a + ': the ops before it were not compared')
          : typeof c.aligned_from_seq !== 'number' && firstDivergence && firstDivergence.kind === 'structure'
          ? h('span', { id: 'curve-shifted' }, '. Ops are paired here by number: from the structural change at #' +
              fmt((firstDivergence.a || firstDivergence.b || {}).seq) + ' on, one run\'s ops are shifted against the other\'s, so the curve ' +
              'and the red rows there compare other ops; the first divergence above (and its first value difference after the change) is what the aligned comparison found')
          : null));
  }
  function stepsChart() {
    const sets = runs.map(r => r.steps || []);
    const n = Math.max(0, ...sets.map(x => x.length));
    if (n === 0) return null;
    const W = 960, H = 200, L = 60, R = 20, T = 14, B = 30;
    const maxOps = Math.max(1, ...sets.flat().map(x => x.ops));
    const bw = (W - L - R) / n;
    const g = s('svg', { class: 'chart', id: 'steps-chart', viewBox: `0 0 ${W} ${H}`, role: 'img' },
      s('title', null, 'Ops per step'));
    g.appendChild(s('text', { x: L - 6, y: T + 8, 'text-anchor': 'end' }, fmt(maxOps)));
    g.appendChild(s('text', { x: L - 6, y: H - B, 'text-anchor': 'end' }, '0'));
    sets.forEach((rows, k) => rows.forEach((row, i) => {
      const hgt = row.ops / maxOps * (H - T - B);
      const w = bw / sets.length;
      g.appendChild(s('rect', { class: k === 0 ? 'bar-a' : 'bar-b', x: L + i * bw + k * w, y: H - B - hgt, width: Math.max(w - 0.5, 0.5), height: hgt },
        s('title', null, `run ${runs[k].label}, step ${row.step}${row.last_step !== row.step ? '–' + row.last_step : ''}: ${row.ops} ops (${row.backward_ops} backward)`)));
    }));
    g.appendChild(s('text', { x: (L + W) / 2, y: H - 8, 'text-anchor': 'middle' }, 'step (' + runs.map(r => r.label).join(' / ') + ')'));
    return h('div', null, h('h3', null, 'Ops per step'), g);
  }
  function topOps() {
    return h('details', null, h('summary', null, 'Most frequent ops'),
      h('div', { class: 'sides' }, runs.map(r => h('table', null, h('tr', null, h('th', null, 'op (' + r.label + ')'), h('th', null, 'count')),
        (r.top_ops || []).map(t => h('tr', null, h('td', { class: 'mono' }, t.name), h('td', { class: 'num' }, fmt(t.count))))))));
  }

  // ---- Op table with filters and virtual scrolling (only the visible rows are in the DOM).
  class StaticSource {
    constructor(run) { this.all = run.ops || []; this.rows = this.all; }
    setFilter(f, done) {
      this.rows = this.all.filter(o => matches(o, f));
      done();
    }
    count() { return this.rows.length; }
    get(i) { return this.rows[i]; }
    ensure() {}
    indexOf(seq) { return this.rows.findIndex(o => o.seq === seq); }
  }
  function matches(o, f) {
    if (f.name && !(o.name || '').toLowerCase().includes(f.name)) return false;
    if (f.module && !(o.module || '').toLowerCase().includes(f.module)) return false;
    if (f.step !== null && o.step !== f.step) return false;
    return true;
  }
  const PAGE = 200;
  class RemoteSource {
    constructor(runIndex, onData) { this.run = runIndex; this.onData = onData; this.total = 0; this.pages = new Map(); this.pending = new Set(); this.filter = { name: '', module: '', step: null }; this.gen = 0; }
    query(from) {
      const p = new URLSearchParams({ run: this.run, from, limit: PAGE });
      if (this.filter.name) p.set('name', this.filter.name);
      if (this.filter.module) p.set('module', this.filter.module);
      if (this.filter.step !== null) p.set('step', this.filter.step);
      return 'api/ops?' + p.toString();
    }
    load(page, done) {
      if (this.pages.has(page) || this.pending.has(page)) return;
      this.pending.add(page);
      const gen = this.gen;
      fetch(this.query(page * PAGE)).then(r => r.json()).then(j => {
        if (gen !== this.gen) return;
        this.pending.delete(page);
        this.total = j.total;
        this.pages.set(page, j.ops || []);
        (done || this.onData)();
      }).catch(() => { this.pending.delete(page); });
    }
    setFilter(f, done) { this.filter = f; this.gen++; this.pages.clear(); this.pending.clear(); this.total = 0; this.load(0, done); }
    count() { return this.total; }
    get(i) { const p = this.pages.get(Math.floor(i / PAGE)); return p ? p[i % PAGE] : undefined; }
    ensure(from, to) { for (let p = Math.floor(from / PAGE); p <= Math.floor(Math.max(from, to - 1) / PAGE); p++) this.load(p); }
    indexOf(seq) { return this.filter.name || this.filter.module || this.filter.step !== null ? -1 : seq; }
  }

  let current = 0;
  let source = null;
  let selected = null;
  const vt = h('div', { class: 'vt', id: 'op-table' });
  const spacer = h('div', { class: 'vt-spacer' });
  const rowsLayer = h('div', { class: 'vt-rows' });
  vt.appendChild(spacer);
  vt.appendChild(rowsLayer);
  const countLabel = h('span', { class: 'muted', id: 'op-count' });
  const detailHint = 'Select an op to see its tensors, arguments, stack and kernels.';
  const detail = h('div', { class: 'card', id: 'op-detail' }, h('p', { class: 'muted' }, detailHint));
  const filter = { name: '', module: '', step: null };

  function renderRows() {
    const n = source.count();
    spacer.style.height = (n * ROW_HEIGHT) + 'px';
    const first = Math.max(0, Math.floor(vt.scrollTop / ROW_HEIGHT) - 5);
    const last = Math.min(n, first + Math.ceil((vt.clientHeight || 520) / ROW_HEIGHT) + 10);
    source.ensure(first, last);
    rowsLayer.replaceChildren();
    const diffSet = differing[current] || new Set();
    const firstSeq = current === 0 ? splitSeq : (firstDivergence && firstDivergence.b ? firstDivergence.b.seq : null);
    for (let i = first; i < last; i++) {
      const o = source.get(i);
      const row = h('div', { class: 'vt-row' + (o && o.backward ? ' bwd' : '') + (o && diffSet.has(o.seq) ? ' differs' : '') +
        (o && o.seq === firstSeq ? ' first' : '') + (o && selected === o.seq ? ' selected' : ''), 'data-seq': o ? o.seq : '' },
        o ? [h('span', { class: 'num' }, o.seq), h('span', null, o.step), h('span', null, o.thread),
          h('span', { class: 'name', title: o.name }, '\u00a0'.repeat(Math.min(o.depth || 0, 8) * 2), o.name),
          h('span', { title: o.module }, o.module || ''), h('span', { title: srcText(o.source) }, srcBrief(o.source))]
          : h('span', { class: 'muted' }, '…'));
      row.style.top = (i * ROW_HEIGHT) + 'px';
      if (o) row.addEventListener('click', () => select(o.seq));
      rowsLayer.appendChild(row);
    }
    countLabel.textContent = n + (server ? ' ops' : ' ops in this report\'s window');
  }
  // Another run in the table: the op panel follows, to this run's op with the same seq (or
  // back to its hint), never left on the other run's op.
  function setRun(i) {
    const was = selected;
    current = i;
    selected = null;
    // The picker says which run the table shows, however it was switched.
    const picker = document.getElementById('run-picker');
    if (picker) picker.value = String(i);
    source = server ? new RemoteSource(i, renderRows) : new StaticSource(runs[i]);
    source.setFilter({ ...filter }, () => {
      vt.scrollTop = 0;
      renderRows();
      if (was !== null) goTo(was);
    });
    if (was === null) detail.replaceChildren(h('p', { class: 'muted' }, detailHint));
  }
  function applyFilter() {
    source.setFilter({ ...filter }, () => { vt.scrollTop = 0; renderRows(); });
  }
  function scrollToSeq(seq) {
    const i = source.indexOf(seq);
    if (i >= 0) vt.scrollTop = Math.max(0, i * ROW_HEIGHT - vt.clientHeight / 2);
  }
  function select(seq) {
    selected = seq;
    renderRows();
    if (server) {
      fetch('api/op?run=' + current + '&seq=' + encodeURIComponent(seq)).then(r => r.ok ? r.json() : null)
        .then(o => showDetail(o, seq)).catch(() => showDetail(null, seq));
    } else {
      showDetail(opBySeq[current].get(seq) || null, seq);
    }
  }
  function goTo(seq) {
    select(seq);
    scrollToSeq(seq);
  }
  function showDetail(o, seq) {
    if (!o) {
      detail.replaceChildren(h('p', null, 'Op #', seq, ' is outside this report\'s window; ', h('code', null, 'tdbg view'), ' pages through the whole run.'));
      return;
    }
    const run = runs[current];
    const frames = o.stack_frames || (o.stack && run.stacks ? run.stacks[o.stack] : null);
    const other = runs.length > 1 && !server ? opBySeq[1 - current].get(o.seq) : null;
    detail.replaceChildren();  // then `append`, which flattens arrays and skips nulls
    append(detail, [
      h('h3', null, 'Op #', o.seq, ' ', h('code', { id: 'detail-name' }, o.name),
        runs.length > 1 ? h('span', { class: 'muted', id: 'detail-run' }, ' · run ' + run.label) : null),
      kv([['step', o.step], ['thread / index', o.thread + ' / ' + o.tidx], ['module', o.module || '—'],
          ['source', [h('code', null, srcText(o.source)), o.source_from_forward ? ' (the forward op\'s line)' : null,
            o.source_note ? ' (' + o.source_note + ')' : null]],
          ['parent', o.parent >= 0 ? h('button', { class: 'link', onclick: () => goTo(o.parent) }, '#' + o.parent) : '—'],
          o.backward ? ['forward op', o.fwd >= 0 ? h('button', { class: 'link', id: 'fwd-link', onclick: () => goTo(o.fwd) }, '#' + o.fwd) : 'unknown'] : null,
          o.rng ? ['generator state', o.rng] : null,
          (o.flags & 32) ? ['unfinished', 'the process ended (a crash or an abort) inside this op: it has no outputs' +
            ((o.flags & 128) ? ', and it ended as tdbg read its inputs (memory behind a tensor that cannot be read, such as a truncated mmap): later inputs are missing' : '')] : null,
          (o.flags & 64) ? ['raised', 'an error (an exception) ended this op: it has no outputs'] : null,
          ['chain hash', o.chain]]),
      h('h3', null, 'Tensors'),
      h('div', { class: 'scroll' }, h('table', { id: 'tensors' }, h('tr', null, ['role', 'dtype', 'shape', 'device', 'status', 'NaN', 'Inf', 'hash', 'min', 'max', 'sum', 'abs sum', 'producer'].map(k => h('th', null, k))),
        (o.tensors || []).map(t => {
          const u = other ? (other.tensors || []).find(v => v.role === t.role && v.index === t.index) : null;
          const sm = t.summary || {};
          return h('tr', { class: u && u.hash && t.hash && u.hash !== t.hash ? 'differs' : null },
            h('td', null, t.role + ' ' + t.index), h('td', null, t.dtype), h('td', { class: 'mono' }, t.shape), h('td', null, t.device),
            h('td', null, t.status + (t.reason ? ' (' + t.reason + ')' : '')),
            // NaN and Inf first: in a narrow panel the columns past the hash scroll out of view.
            ['nan', 'inf'].map(k => h('td', { class: 'num' }, fmt(sm[k]))), h('td', { class: 'mono' }, t.hash || '—'),
            ['min', 'max', 'sum', 'abs_sum'].map(k => h('td', { class: 'num' }, fmt(sm[k]))),
            h('td', null, t.producer >= 0 ? h('button', { class: 'link', onclick: () => goTo(t.producer) }, '#' + t.producer) : '—'));
        }))),
      (o.args || []).length ? [h('h3', null, 'Arguments'), kv(o.args.map(a => [a.name || String(a.index), numText(a.value)]))] : null,
      h('h3', null, 'Kernels'),
      (o.kernels || []).length ? h('table', { id: 'kernels' }, h('tr', null, ['kernel', 'grid', 'block', 'stream', 'µs'].map(k => h('th', null, k))),
        o.kernels.map(k => h('tr', null, h('td', { class: 'mono' }, k.name), h('td', null, k.grid), h('td', null, k.block), h('td', null, k.stream),
          h('td', { class: 'num' }, fmt((k.end_ns - k.start_ns) / 1000))))) : h('p', { class: 'muted' }, 'None recorded.'),
      h('h3', null, o.source_from_forward ? 'Stack of the forward op (most recent call last)' : 'Stack (most recent call last)'),
      stackList(frames, o.source)]);
  }
  function opsSection() {
    const runPicker = runs.length > 1 ? h('select', { id: 'run-picker', onchange: e => setRun(Number(e.target.value)) },
      runs.map((r, i) => { const opt = h('option', { value: i }, 'Run ' + r.label); return opt; })) : null;
    const stepInput = h('input', { id: 'filter-step', type: 'number', placeholder: 'step' });
    stepInput.addEventListener('input', () => { filter.step = stepInput.value === '' ? null : Number(stepInput.value); applyFilter(); });
    vt.addEventListener('scroll', () => renderRows());
    return section('ops', 'Ops',
      h('div', { class: 'filters' }, runPicker,
        h('input', { id: 'filter-name', placeholder: 'op name contains…', oninput: e => { filter.name = e.target.value.toLowerCase(); applyFilter(); } }),
        h('input', { id: 'filter-module', placeholder: 'module contains…', oninput: e => { filter.module = e.target.value.toLowerCase(); applyFilter(); } }),
        stepInput, countLabel),
      h('div', { class: 'opsview' },
        h('div', null, h('div', { class: 'vt-head' }, ['#', 'step', 'thr', 'op', 'module', 'source'].map(k => h('span', null, k))), vt),
        detail));
  }

  function modulesSection() {
    const rows = [];
    runs.forEach(r => (r.processes || []).forEach(p => (p.modules || []).forEach(m => rows.push([r.label, m]))));
    const kernels = [];
    runs.forEach(r => (r.ops || []).forEach(o => (o.kernels || []).forEach(k => kernels.push([r.label, o, k]))));
    return section('modules', 'Compiled modules and kernels',
      rows.length ? h('table', { id: 'modules-table' }, h('tr', null, ['run', 'kind', 'name', 'hash', 'bytes'].map(k => h('th', null, k))),
        rows.map(([l, m]) => h('tr', null, h('td', null, l), h('td', null, m.kind), h('td', { class: 'mono' }, m.name), h('td', { class: 'mono' }, m.hash), h('td', { class: 'num' }, fmt(m.size)))))
        : h('p', { class: 'muted' }, 'No compiled GPU modules were recorded.'),
      kernels.length ? h('details', null, h('summary', null, 'Kernels launched by the ops in this report (', kernels.length, ')'), h('table', null, h('tr', null, ['run', 'op', 'kernel', 'grid', 'block'].map(k => h('th', null, k))),
        kernels.slice(0, 500).map(([l, o, k]) => h('tr', null, h('td', null, l),
          h('td', null, h('button', { class: 'link', onclick: () => { if (runs[current].label !== l) { setRun(runs.findIndex(r => r.label === l)); } goTo(o.seq); } }, '#' + o.seq + ' ' + o.name)),
          h('td', { class: 'mono' }, k.name), h('td', null, k.grid), h('td', null, k.block)))))
        : h('p', { class: 'muted' }, 'No kernels were recorded for these ops.'));
  }

  function render() {
    document.title = 'tdbg: ' + runs.map(r => r.path).join(' vs ');
    document.getElementById('title').textContent = runs.map(r => r.path).join('  vs  ');
    const nav = document.getElementById('nav');
    const app = document.getElementById('app');
    app.replaceChildren();  // then `append`, which skips the sections that are null
    append(app, [overview(), divergence(), nonfinite(),
      section('charts', 'Pictures', curveChart(), stepsChart(), topOps()),
      opsSection(), modulesSection(),
      h('p', { class: 'muted', id: 'bound' }, 'This report holds at most ', fmt((data.bound || {}).window_ops), ' ops per run around the point of interest, per-step aggregates and a ',
        fmt((data.bound || {}).curve_points), '-point difference curve. ', server ? 'Served by tdbg view.' : 'Use tdbg view RUN to page through every op.')]);
    // Links to the sections this page has (a report of one run has no divergence).
    for (const [id, label] of [['overview', 'Overview'], ['divergence', 'Divergence'], ['nonfinite', 'Non-finite'], ['charts', 'Charts'], ['ops', 'Ops'], ['modules', 'Kernels']]) {
      if (document.getElementById(id)) nav.appendChild(h('a', { href: '#' + id }, label));
    }
    setRun(0);
    // Open on the point of interest: the divergence, else run A's first non-finite value.
    const nf = (data.nonfinite || [])[0];
    const nfSeq = nf && nf.first_nonfinite && Number.isInteger(nf.first_nonfinite.seq) ? nf.first_nonfinite.seq : null;
    // An op only B ran (an insertion) is B's: open run B on it.
    if (firstDivergence && !firstDivergence.a && firstDivergence.b && Number.isInteger(firstDivergence.b.seq) && runs[1]) {
      setRun(1);
      goTo(firstDivergence.b.seq);
    } else if (splitSeq !== null) goTo(splitSeq);
    else if (nfSeq !== null) goTo(nfSeq);
    window.tdbgViewer = { ready: true, goTo, setRun };
  }
  render();
})();
