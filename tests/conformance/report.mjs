#!/usr/bin/env node
// Judges a conformance results directory against expected-failures.yml, prints the scenario
// table and a final `N passed, M failed` line, and (with --write FILE) regenerates
// docs/conformance.md from it.
//
//   node report.mjs RESULTS_DIR --expected expected-failures.yml [--revision 2026-07-28]
//        [--suite-version V] [--write docs/conformance.md]
//   node report.mjs RESULTS_DIR --initialize-era --expected expected-failures-initialize-era.yml
//        [--suite-version V] [--write docs/conformance-initialize-era.md]
//
// --initialize-era judges a run of the suite's 0.1.x line (the initialize-era revisions,
// 2025-06-18 and 2025-11-25), which has no requirements file: every scenario it ran is scored.
//
// RESULTS_DIR holds the suite's `server-<scenario>-<timestamp>/checks.json` folders, at any
// depth (run.sh writes requirements/ and by-name/). When a scenario ran more than once, its
// newest by-name run wins over the requirements run (the tasks-* scenarios run in both).
// A scenario fails when any check is FAILURE or WARNING (the suite's own baseline rule).
// Exit code: 0 when every failure is expected and no expected failure is stale, else 1.

import { readFileSync, readdirSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { join, dirname, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const flags = new Set(['--initialize-era']);
const resultsDir = args.find((a, i) => !a.startsWith('--') && (i === 0 || !args[i - 1].startsWith('--') || flags.has(args[i - 1])));
if (!resultsDir) {
  console.error('usage: report.mjs RESULTS_DIR --expected FILE [--revision R] [--suite-version V] [--write FILE]');
  process.exit(2);
}
const expectedFile = opt('--expected', join(here, 'expected-failures.yml'));
const revision = opt('--revision', '2026-07-28');
const suiteVersion = opt('--suite-version', 'unknown');
const writeTo = opt('--write');
const initializeEra = args.includes('--initialize-era');

// --- expected failures: `- scenario` or `- scenario:check-id`, reason in a trailing comment
// or in the comment block above the entry (which covers every entry up to the next comment).
function loadExpected(file) {
  const entries = [];
  if (!existsSync(file)) return entries;
  let section = null;
  let block = [];
  let afterItem = false;
  for (const raw of readFileSync(file, 'utf8').split(/\r?\n/)) {
    const line = raw.trimEnd();
    const sec = /^(server|client):\s*(#.*)?$/.exec(line);
    if (sec) {
      section = sec[1];
      block = [];
      afterItem = false;
      continue;
    }
    const comment = /^\s*#\s?(.*)$/.exec(line);
    if (comment) {
      if (afterItem) block = [];
      afterItem = false;
      if (section) block.push(comment[1].trim());
      continue;
    }
    const item = /^\s*-\s*([^\s#]+)\s*(?:#\s*(.*))?$/.exec(line);
    if (item && section === 'server') {
      const [scenario, ...rest] = item[1].split(':');
      const reason = [...block, item[2] ?? ''].filter(Boolean).join(' ');
      entries.push({ scenario, checkId: rest.length ? rest.join(':') : undefined, reason });
      afterItem = true;
    }
  }
  return entries;
}

// --- results
function findRuns(dir) {
  const runs = [];
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (!statSync(p).isDirectory()) continue;
      const m = /^server-(.+)-(\d{4}-\d{2}-\d{2}T[\d-]+Z)$/.exec(name);
      if (m && existsSync(join(p, 'checks.json'))) {
        runs.push({
          scenario: m[1],
          stamp: m[2],
          byName: relative(dir, p).split('/')[0] === 'by-name',
          checks: JSON.parse(readFileSync(join(p, 'checks.json'), 'utf8'))
        });
      } else {
        walk(p);
      }
    }
  };
  walk(dir);
  return runs;
}

const requirementsFile = join(here, 'node_modules/@modelcontextprotocol/conformance/requirements', `${revision}.yaml`);
const requirements = existsSync(requirementsFile) ? parseYaml(readFileSync(requirementsFile, 'utf8')) : { server: [], not_scored: [] };
const scored = new Set(requirements.server ?? []);
const notScored = new Map((requirements.not_scored ?? []).filter((e) => e.leg === 'server').map((e) => [e.scenario, e.reason]));

const expected = loadExpected(expectedFile);
const runs = findRuns(resultsDir);
const latest = new Map();
for (const r of runs) {
  const cur = latest.get(r.scenario);
  const better = !cur || (r.byName && !cur.byName) || (r.byName === cur.byName && r.stamp > cur.stamp);
  if (better) latest.set(r.scenario, r);
}

const isFailed = (c) => c.status === 'FAILURE' || c.status === 'WARNING';
const rows = [];
for (const [scenario, run] of [...latest.entries()].sort(([a], [b]) => a.localeCompare(b))) {
  const failing = run.checks.filter(isFailed);
  const count = (s) => run.checks.filter((c) => c.status === s).length;
  const whole = expected.find((e) => e.scenario === scenario && !e.checkId);
  const perCheck = expected.filter((e) => e.scenario === scenario && e.checkId);
  const kind = initializeEra || scored.has(scenario) ? 'scored' : notScored.has(scenario) ? notScored.get(scenario) : 'not in the set';
  let verdict;
  let reason = '';
  if (whole) {
    verdict = failing.length ? 'expected failure' : 'STALE (passes, remove from expected-failures.yml)';
    reason = whole.reason;
  } else {
    const unexpected = failing.filter((c) => !perCheck.some((e) => e.checkId === c.id));
    const stale = perCheck.filter((e) => run.checks.some((c) => c.id === e.checkId && c.status === 'SUCCESS') && !failing.some((c) => c.id === e.checkId));
    if (unexpected.length && kind === 'pending') {
      // Run and reported by the revision, never scored (its own exit code ignores them too).
      verdict = 'fails (pending: not scored)';
      reason = unexpected.map((c) => `${c.id}: ${(c.errorMessage ?? c.description ?? '').replace(/\s+/g, ' ').slice(0, 300)}`).join('; ');
    } else if (unexpected.length) {
      verdict = 'FAIL';
      reason = unexpected.map((c) => `${c.id}: ${(c.errorMessage ?? c.description ?? '').replace(/\s+/g, ' ').slice(0, 300)}`).join('; ');
    } else if (stale.length) {
      verdict = 'STALE (passes, remove from expected-failures.yml)';
      reason = stale.map((e) => e.checkId).join(', ');
    } else if (failing.length) {
      verdict = 'pass (expected check failures)';
      const failingIds = new Set(failing.map((c) => c.id));
      const hit = perCheck.filter((e) => failingIds.has(e.checkId));
      reason = `${hit.map((e) => e.checkId).join(', ')}: ${[...new Set(hit.map((e) => e.reason))].join(' ')}`;
    } else {
      verdict = 'pass';
    }
  }
  rows.push({ scenario, kind, verdict, reason, success: count('SUCCESS'), failure: count('FAILURE'), warning: count('WARNING'), skipped: count('SKIPPED') + count('INFO') });
}

// A scored scenario that did not run fails a full run; a run of named scenarios (run.sh NAME…,
// no requirements/ folder) judges only what it ran.
const fullRun = existsSync(join(resultsDir, 'requirements'));
const missing = fullRun ? [...scored].filter((s) => !latest.has(s)) : [];
const passed = rows.filter((r) => r.verdict.startsWith('pass')).length;
const expectedFail = rows.filter((r) => r.verdict === 'expected failure').length;
const pendingFail = rows.filter((r) => r.verdict.startsWith('fails (pending')).length;
const failed = rows.filter((r) => r.verdict === 'FAIL' || r.verdict.startsWith('STALE')).length + missing.length;

for (const r of rows) {
  const mark = r.verdict.startsWith('pass') ? 'ok  ' : r.verdict === 'expected failure' ? 'xfail' : r.verdict.startsWith('fails (pending') ? 'info' : 'FAIL';
  console.log(`${mark.padEnd(5)} ${r.scenario.padEnd(48)} ${r.kind.padEnd(10)} ${r.verdict}${r.reason ? ` — ${r.reason}` : ''}`);
}
for (const s of missing) console.log(`FAIL  ${s.padEnd(48)} scored     did not run`);

if (writeTo) {
  const esc = (s) => String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ');
  const notesFile = join(here, initializeEra ? 'notes-initialize-era.md' : 'notes.md');
  const notes = existsSync(notesFile) ? readFileSync(notesFile, 'utf8').trim() : '';
  const table = rows
    .map((r) => `| \`${r.scenario}\` | ${r.kind} | ${r.verdict} | ${r.success}/${r.failure}/${r.warning}/${r.skipped} | ${esc(r.reason)} |`)
    .join('\n');
  const intro = initializeEra
    ? `The official MCP conformance suite's initialize-era line \`@modelcontextprotocol/conformance@${suiteVersion}\`
(the scenarios of revisions 2025-06-18 and 2025-11-25, every one, pending included: \`--suite all\`)
against the same \`openwop-mcp-sidecar demo --anonymous\` endpoint as the 2026-07-28 run
([docs/conformance.md](conformance.md)): its client opens with \`initialize\`, and the mount serves
it on the same URL (README, "Clients of every era").`
    : `The official MCP conformance suite \`@modelcontextprotocol/conformance@${suiteVersion}\` against
\`openwop-mcp-sidecar demo --anonymous\` (the sidecar in front of the embedded demo host, whose
fixture workflows are named after the suite's tools): every scenario the ${revision} revision
requires (\`--requirements ${revision}\`, scored), the ones that revision runs without scoring
(\`extension\`: the Tasks scenarios; \`pending\`), and each \`tasks-*\` scenario run again by name.
The initialize-era revisions are judged in [docs/conformance-initialize-era.md](conformance-initialize-era.md).`;
  const title = initializeEra ? 'MCP conformance: the initialize-era revisions' : 'MCP conformance';
  const doc = `# ${title}

<!-- Generated by tests/conformance/report.mjs from a results directory of tests/conformance/run.sh
     (CONFORMANCE_WRITE_DOC=1 tests/conformance/run.sh). Edit tests/conformance/${initializeEra ? 'notes-initialize-era.md' : 'notes.md'} for the
     prose below the table, tests/conformance/${initializeEra ? 'expected-failures-initialize-era.yml' : 'expected-failures.yml'} for the reasons. -->

${intro}

**${passed} passed, ${failed} failed, ${expectedFail} expected failures, ${pendingFail} pending (not scored) failing** (scenarios).

| Scenario | Kind | Result | Checks ok/fail/warn/skip | Reason or failing checks |
| --- | --- | --- | --- | --- |
${table}

${notes}
`;
  writeFileSync(writeTo, doc);
  console.log(`wrote ${writeTo}`);
}

console.log(`expected failures: ${expectedFail}; pending (not scored) failing: ${pendingFail}`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
