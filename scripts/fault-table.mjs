#!/usr/bin/env node
// The fault matrix as one table: the rows the core's matrix (crates/core/tests/faults.rs) and
// the real app's fault tests (tests/e2e) appended to a JSON Lines file as they ran
// (COUNTERSIGN_FAULT_ROWS). Usage: node scripts/fault-table.mjs <rows.jsonl>
// Exits non-zero when a row failed or there are no rows.
import { readFileSync } from 'node:fs';

const file = process.argv[2];
let lines = [];
try { lines = readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== ''); } catch { /* none */ }
const rows = lines.map((l) => JSON.parse(l));
// Markdown: a pipe inside a cell would end it.
const cell = (v) => String(v).replaceAll('|', '\\|').replaceAll('\n', ' ');
console.log('| fault | what the person sees | what the server or agent receives | the audit log | |');
console.log('|---|---|---|---|---|');
for (const r of rows) {
  console.log(`| ${[r.fault, r.person, r.server, r.audit, r.pass ? 'pass' : 'FAIL'].map(cell).join(' | ')} |`);
}
const failed = rows.filter((r) => !r.pass).length;
console.log(`\n${rows.length} rows, ${failed} failed.`);
process.exit(rows.length === 0 || failed > 0 ? 1 : 0);
