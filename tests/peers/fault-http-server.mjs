#!/usr/bin/env node
// A Streamable HTTP MCP server (no SDK) that breaks on purpose, for the fault matrix
// (crates/core/tests/faults.rs). It prints its URL on stdout. Its one tool, `fault`, asks the
// person a question on the call's SSE stream and then, while the question is open, does what
// `arguments.kind` says:
//   hang         answers nothing more: the stream stays open, every later request waits
//   reset        resets the call's connection
//   500          answers every later request with HTTP 500
//   endless-sse  sends a log notification on the call's stream every millisecond, for ever
// What it receives after the fault is appended to $FAULT_SERVER_LOG.
import { appendFileSync } from 'node:fs';
import { createServer } from 'node:http';

const log = (line) => { if (process.env.FAULT_SERVER_LOG) appendFileSync(process.env.FAULT_SERVER_LOG, line + '\n'); };
let mode = 'ok';
const calls = new Map(); // question id -> { res, id }

function json(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(body === undefined ? undefined : JSON.stringify(body));
}

const server = createServer((req, res) => {
  if (req.method !== 'POST') { res.writeHead(405).end(); return; }
  let body = '';
  req.on('data', (c) => { body += c; });
  req.on('end', () => {
    let m;
    try { m = JSON.parse(body); } catch { json(res, 400, { error: 'not JSON' }); return; }
    if (mode !== 'ok') {
      log(`${mode}: ${m.method ?? `answer ${m.result?.action ?? 'error'}`}`);
      if (mode === 'hang' || mode === 'endless-sse') return; // never answered
      if (mode === '500') { json(res, 500, { error: 'broken' }); return; }
    }
    if (m.id !== undefined && !m.method) {
      // The person's answer to our question: the call's result goes on the call's stream.
      const call = calls.get(m.id);
      calls.delete(m.id);
      json(res, 202);
      if (call) {
        const action = m.result?.action ?? 'error';
        log(`answer ${action}`);
        call.res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', id: call.id, result: { content: [{ type: 'text', text: `answered: ${action}` }] } })}\n\n`);
        call.res.end();
      }
      return;
    }
    if (m.id === undefined) { json(res, 202); return; }
    switch (m.method) {
      case 'initialize':
        return json(res, 200, { jsonrpc: '2.0', id: m.id, result: {
          protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'fault-http-server', version: '1.0.0' },
        } });
      case 'ping':
        return json(res, 200, { jsonrpc: '2.0', id: m.id, result: {} });
      case 'tools/list':
        return json(res, 200, { jsonrpc: '2.0', id: m.id, result: { tools: [{
          name: 'fault', description: 'Asks, then breaks', inputSchema: { type: 'object', properties: { kind: { type: 'string' } } },
        }] } });
      case 'tools/call': {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        const q = `q-${m.id}`;
        calls.set(q, { res, id: m.id });
        res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', id: q, method: 'elicitation/create', params: {
          message: 'Go on?', requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } } },
        } })}\n\n`);
        setTimeout(() => breakNow(m.params?.arguments?.kind, res), 200);
        return;
      }
      default:
        return json(res, 200, { jsonrpc: '2.0', id: m.id, error: { code: -32601, message: `no ${m.method}` } });
    }
  });
});

function breakNow(kind, res) {
  log(`fault ${kind}`);
  switch (kind) {
    case 'hang': mode = 'hang'; return;
    case 'reset': res.socket?.destroy(); return;
    case '500': mode = '500'; return;
    case 'endless-sse': {
      mode = 'endless-sse';
      const note = `data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x'.repeat(100) } })}\n\n`;
      const timer = setInterval(() => { if (!res.write(note)) { /* back-pressure: wait */ } }, 1);
      res.on('close', () => clearInterval(timer));
      return;
    }
  }
}

server.listen(0, '127.0.0.1', () => {
  console.log(`http://127.0.0.1:${server.address().port}/mcp`);
});
