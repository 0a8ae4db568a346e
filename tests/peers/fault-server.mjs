#!/usr/bin/env node
// A stdio MCP server (no SDK) that breaks on purpose, for the fault matrix
// (crates/core/tests/faults.rs). Its one tool, `fault`, asks the person a question and then,
// while the question is open, does what `arguments.kind` says:
//   exit          exits (code 1), the question still open
//   hang          stops answering anything, pings included
//   stop-reading  stops reading its stdin (and answering)
//   invalid-json  writes a line that is not JSON, then carries on
//   binary        writes a line of random bytes, then carries on
//   huge-line     writes one 64 MiB line (not JSON), then carries on
//   none, note    nothing breaks (note: the question asks for text, not a checkbox)
// Carrying on: the person's answer to the question ends the call with "answered: <action>".
// What it receives after the fault is appended to $FAULT_SERVER_LOG.
import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { randomBytes } from 'node:crypto';

const out = (m) => process.stdout.write(JSON.stringify(m) + '\n');
const log = (line) => { if (process.env.FAULT_SERVER_LOG) appendFileSync(process.env.FAULT_SERVER_LOG, line + '\n'); };
let silent = false;
const calls = new Map();
const rl = createInterface({ input: process.stdin });

rl.on('line', (line) => {
  let m;
  try { m = JSON.parse(line); } catch { return; }
  if (silent) { log(`ignored ${m.method ?? 'response'}`); return; }
  // The person's answer to our question.
  if (m.id !== undefined && !m.method && typeof m.id === 'string' && m.id.startsWith('q-')) {
    const call = calls.get(m.id);
    calls.delete(m.id);
    const action = m.result?.action ?? 'error';
    log(`answer ${action}`);
    out({ jsonrpc: '2.0', id: call, result: { content: [{ type: 'text', text: `answered: ${action}` }] } });
    return;
  }
  if (m.method === 'notifications/cancelled') { log(`cancelled ${m.params?.requestId}`); return; }
  if (m.id === undefined || !m.method) return;
  switch (m.method) {
    case 'initialize':
      return out({ jsonrpc: '2.0', id: m.id, result: {
        protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'fault-server', version: '1.0.0' },
      } });
    case 'ping':
      return out({ jsonrpc: '2.0', id: m.id, result: {} });
    case 'tools/list':
      return out({ jsonrpc: '2.0', id: m.id, result: { tools: [{
        name: 'fault', description: 'Asks, then breaks', inputSchema: { type: 'object', properties: { kind: { type: 'string' } } },
      }] } });
    case 'tools/call': {
      const q = `q-${m.id}`;
      calls.set(q, m.id);
      // `note` asks for text instead: an answer longer than a page of the disk.
      const properties = m.params?.arguments?.kind === 'note'
        ? { note: { type: 'string', title: 'Note' } } : { ok: { type: 'boolean' } };
      out({ jsonrpc: '2.0', id: q, method: 'elicitation/create', params: {
        message: 'Go on?', requestedSchema: { type: 'object', properties },
      } });
      // Break once the question is surely out.
      setTimeout(() => breakNow(m.params?.arguments?.kind), 200);
      return;
    }
    default:
      return out({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: `no ${m.method}` } });
  }
});

function breakNow(kind) {
  log(`fault ${kind}`);
  switch (kind) {
    case 'exit': process.exit(1);
    case 'hang': silent = true; return;
    // The interval keeps the process alive once nothing is read.
    case 'stop-reading': rl.pause(); process.stdin.pause(); silent = true; setInterval(() => {}, 1000); return;
    case 'invalid-json': process.stdout.write('{"jsonrpc": "2.0", "id": \n'); return;
    case 'binary': process.stdout.write(Buffer.concat([randomBytes(512).map((b) => (b === 10 ? 11 : b)), Buffer.from('\n')])); return;
    case 'huge-line': process.stdout.write('x'.repeat(64 * 1024 * 1024) + '\n'); return;
  }
}
