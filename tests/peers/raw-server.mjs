#!/usr/bin/env node
// An MCP server written without any SDK, over stdio, whose answers carry fields no SDK models
// (vendor keys on a tool, its result, a resource and a prompt). The gateway tests check that
// agents receive them unchanged, a tool (`chatty`) that sends progress (with a vendor key), a log line and a
// tools/list_changed notification before its result, one (`params`) that answers with the
// params of the call as they arrived, one (`exit`, unlisted) that ends the process without
// answering, one (`deaf`, unlisted) that stops reading its stdin, one (`newer`, unlisted) whose
// result holds a content block of a kind no SDK models (NEWER), and one (`verbatim`) whose
// result is written by hand: numbers, escapes, spacing and key order no JSON library would
// write (VERBATIM). The subscriptions and the log level it is given are lines in
// $RAW_SERVER_LOG.
//
// With `--http` it serves the same answers over Streamable HTTP as plain JSON bodies (never
// SSE), prints its URL on stdout, and drops what it would send outside an answer; a GET opens
// a standalone stream that stays quiet. With `--sse` as well, every request is answered on an
// SSE stream that carries first what it sends outside an answer (`chatty`'s notifications,
// `ask_and_wait`'s question). Over HTTP, a tool `id` answers with the request's id as it
// arrived, and `forget` ends the session: the next request that names it gets 404 until the
// client opens another. Over SSE, `elsewhere` answers on the standalone stream while the
// call's own response stream stays open and quiet. `--no-get` refuses the standalone stream
// (405), and `--no-sessions` gives no session id: a server may do without either. `pretty`
// (unlisted) answers as some servers write: indented over several lines (over SSE, a `data:`
// line each, as the transport allows), with its progress written the same way.

import { appendFileSync, existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { createInterface } from 'node:readline';

// With $RAW_SERVER_STARTS set, each start is a line in that file, and every start after the
// first fails at once: a server that crashed and now cannot come back.
if (process.env.RAW_SERVER_STARTS) {
  const started = existsSync(process.env.RAW_SERVER_STARTS);
  appendFileSync(process.env.RAW_SERVER_STARTS, 'start\n');
  if (started) process.exit(1);
}
const sse = process.argv.includes('--sse');
const http = sse || process.argv.includes('--http');
const noGet = process.argv.includes('--no-get');
const noSessions = process.argv.includes('--no-sessions');
// The reader of stdin (not over HTTP).
let lines;
// A string is a message already written.
const text = (m) => (typeof m === 'string' ? m : JSON.stringify(m));
// Over SSE, the response stream of the request being answered.
let stream = null;
// One message as an SSE event: each of its lines a `data:` line.
const event = (m) => `${text(m).split('\n').map((l) => `data: ${l}`).join('\n')}\n\n`;
const out = (m) => {
  if (!http) process.stdout.write(text(m) + '\n');
  else if (stream) stream.write(event(m));
};
const pretty = (m) => JSON.stringify(m, null, 2);
const vendor = { 'x-vendor': { kept: true, n: 7 } };
const VERBATIM = String.raw`{"content": [{"type":"text","text":"caf\u00e9 \ud83d\ude00"}], "x-exact": {"big": 123456789012345678901234567890, "e": 1E2, "neg0": -0.0, "order": {"z": 1, "a": 2}}}`;
const NEWER = String.raw`{"content": [{"type":"hologram","frames":[1, 2.50]}], "isError": false}`;
const results = {
  initialize: (p) => ({
    protocolVersion: p.protocolVersion === '2025-06-18' ? '2025-06-18' : '2025-11-25',
    capabilities: { tools: { listChanged: true }, resources: { subscribe: true }, prompts: {}, logging: {} },
    serverInfo: { name: 'raw-server', version: '1.0.0' },
  }),
  'tools/list': () => ({
    tools: [{
      name: 'echo', description: 'Echoes', inputSchema: { type: 'object' },
      annotations: { readOnlyHint: true }, ...vendor,
    }, {
      name: 'ask_and_wait', description: 'Asks, then waits until cancelled', inputSchema: { type: 'object' },
    }, {
      name: 'chatty', description: 'Reports progress, logs and changes its tool list',
      inputSchema: { type: 'object' }, annotations: { readOnlyHint: true },
    }, {
      name: 'params', description: 'Answers with the params of the call as it received them',
      inputSchema: { type: 'object' }, annotations: { readOnlyHint: true },
    }, {
      name: 'verbatim', description: 'Answers with a result written by hand',
      inputSchema: { type: 'object' }, annotations: { readOnlyHint: true },
    }, ...(http ? [{
      name: 'id', description: 'Answers with the id of the request as it arrived',
      inputSchema: { type: 'object' }, annotations: { readOnlyHint: true },
    }, {
      name: 'forget', description: 'Ends the session', inputSchema: { type: 'object' },
    }, {
      name: 'elsewhere', description: 'Answers on the standalone stream (over SSE)',
      inputSchema: { type: 'object' }, annotations: { readOnlyHint: true },
    }] : [])],
  }),
  'tools/call': (p) => {
    if (p.name === 'chatty') {
      // Progress for this call, a log line, and a changed tool list, before the result.
      const token = p._meta?.progressToken;
      if (token !== undefined) {
        out({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: 1, total: 2, message: 'half way', 'x-vendor': { kept: true } } });
      }
      out({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', logger: 'raw', data: 'chatty ran' } });
      out({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    }
    if (p.name === 'params') return { content: [{ type: 'text', text: JSON.stringify(p) }] };
    return { content: [{ type: 'text', text: JSON.stringify(p.arguments ?? {}) }], ...vendor };
  },
  'resources/list': () => ({ resources: [{ uri: 'raw://a', name: 'a', ...vendor }] }),
  'resources/read': (p) => ({ contents: [{ uri: p.uri, text: 'hello', ...vendor }] }),
  'prompts/list': () => ({ prompts: [{ name: 'p', ...vendor }] }),
  'prompts/get': () => ({ messages: [{ role: 'user', content: { type: 'text', text: 'hi' } }], ...vendor }),
  'resources/subscribe': (p) => { note(`subscribe ${p.uri}`); return {}; },
  'resources/unsubscribe': (p) => { note(`unsubscribe ${p.uri}`); return {}; },
  'logging/setLevel': (p) => { note(`level ${p.level}`); return {}; },
  ping: () => ({}),
};

// A line in $RAW_SERVER_LOG, when set: what the server was asked to do.
const note = (line) => { if (process.env.RAW_SERVER_LOG) appendFileSync(process.env.RAW_SERVER_LOG, `${line}\n`); };

// `ask_and_wait` asks the client a question and never answers the call; a cancellation of
// the call is written to $RAW_SERVER_LOG, so a test can see that it arrived.
const waiting = new Set();
function askAndWait(m) {
  waiting.add(m.id);
  out({ jsonrpc: '2.0', id: `q-${m.id}`, method: 'elicitation/create', params: {
    message: 'Really?', requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } } },
  } });
}

// The answer to one message, or undefined when it gets none (now).
function answer(m) {
  if (m.method === 'notifications/cancelled' && waiting.has(m.params?.requestId)) {
    waiting.delete(m.params.requestId);
    if (process.env.RAW_SERVER_LOG) appendFileSync(process.env.RAW_SERVER_LOG, `cancelled ${m.params.requestId}\n`);
    return undefined;
  }
  if (m.id === undefined || !m.method) return undefined;
  if (m.method === 'tools/call' && m.params?.name === 'ask_and_wait' && (sse || !http)) return askAndWait(m);
  if (m.method === 'tools/call' && m.params?.name === 'id' && http) {
    return { jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: JSON.stringify(m.id) }] } };
  }
  if (m.method === 'tools/call' && m.params?.name === 'elsewhere' && sse) {
    const reply = { jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: 'answered elsewhere' }] } };
    for (const open of standalone) open.write(event(reply));
    return undefined;
  }
  if (m.method === 'tools/call' && m.params?.name === 'forget' && http) {
    session = null;
    return { jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: 'forgotten' }] } };
  }
  // `exit` (not listed) ends the server without an answer.
  if (m.method === 'tools/call' && m.params?.name === 'exit') process.exit(3);
  // `deaf` (not listed) stops reading stdin, never answering: the pipe fills behind it.
  // (A timer keeps the process alive, which a paused stdin alone would not.)
  if (m.method === 'tools/call' && m.params?.name === 'deaf') {
    lines?.pause();
    setInterval(() => {}, 60_000);
    return undefined;
  }
  if (m.method === 'tools/call' && m.params?.name === 'verbatim') {
    return `{"jsonrpc":"2.0","id":${JSON.stringify(m.id)},"result":${VERBATIM}}`;
  }
  if (m.method === 'tools/call' && m.params?.name === 'pretty' && http) {
    const token = m.params._meta?.progressToken;
    if (token !== undefined) {
      out(pretty({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: 1, 'x-vendor': { kept: true } } }));
    }
    return pretty({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: 'indented' }], ...vendor } });
  }
  if (m.method === 'tools/call' && m.params?.name === 'newer') {
    return `{"jsonrpc":"2.0","id":${JSON.stringify(m.id)},"result":${NEWER}}`;
  }
  const make = results[m.method];
  if (make) return { jsonrpc: '2.0', id: m.id, result: make(m.params ?? {}) };
  return { jsonrpc: '2.0', id: m.id, error: { code: -32601, message: `no ${m.method}` } };
}

// The session the client holds (over HTTP), and how many it was given.
let session = null;
let sessions = 0;
// Over SSE, the open response streams of `ask_and_wait` and `elsewhere` calls, by request id.
const held = new Map();
// The open standalone (GET) streams.
const standalone = new Set();

if (http) {
  const server = createServer((req, res) => {
    const named = req.headers['mcp-session-id'];
    if (named !== undefined && named !== session) { res.writeHead(404).end(); return; }
    if (req.method === 'GET' && noGet) { res.writeHead(405, { allow: 'POST' }).end(); return; }
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': open\n\n');
      standalone.add(res);
      res.on('close', () => standalone.delete(res));
      return;
    }
    if (req.method !== 'POST') { res.writeHead(405).end(); return; }
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      let m;
      try { m = JSON.parse(body); } catch { res.writeHead(400).end(); return; }
      const headers = {};
      if (m.method === 'initialize' && !noSessions) {
        session = `raw-session-${++sessions}`;
        headers['mcp-session-id'] = session;
      }
      const requestId = m.params?.requestId;
      if (sse && m.id !== undefined && m.method) {
        res.writeHead(200, { ...headers, 'content-type': 'text/event-stream' });
        res.flushHeaders();
        stream = res;
        const reply = answer(m);
        stream = null;
        if (reply !== undefined) res.end(event(reply));
        else held.set(m.id, res);
        return;
      }
      const reply = answer(m);
      if (m.method === 'notifications/cancelled' && held.has(requestId)) {
        held.get(requestId).end();
        held.delete(requestId);
      }
      if (reply === undefined) { res.writeHead(202).end(); return; }
      res.writeHead(200, { ...headers, 'content-type': 'application/json' }).end(text(reply));
    });
  });
  server.listen(0, '127.0.0.1', () => console.log(`http://127.0.0.1:${server.address().port}/mcp`));
} else {
  lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    let m;
    try { m = JSON.parse(line); } catch { return; }
    const reply = answer(m);
    if (reply !== undefined) out(reply);
  });
}
