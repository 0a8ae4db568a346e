#!/usr/bin/env node
// A 2026-07-28 MCP server written without any SDK, over stdio, that asks with multi round-trip
// input requests exactly as a real server may send them, so Countersign's handling is judged
// against the wire rather than against an SDK's model of it:
//
//   pattern_code   one form whose schema has a `pattern` (which rmcp's typed model drops)
//   two_at_once    two form questions in one result, answered together
//   two_rounds     a form, then (with the first answer in requestState) a second form
//   state_only     a round with no questions at all, only requestState, then the result
//   with_sampling  a form and a sampling request in one result
//   pattern_beside a form, and beside it one whose schema has a `pattern`, in one result
//   asks_forever   a form in every round, never a result
//
// and the same beyond tools: prompts/get `greeting` asks for a name first, resources/read
// `note://private` asks for a confirmation first, and resources/read `note://linked` answers
// its first read with URLElicitationRequiredError (-32042), an address to open, and the
// ones after it with the note; `note://formed` answers every read with -32042 whose item is a
// form (a password), not an address. Two tools ask the way a 2026-07-28 server
// still may, with a request of its own while the call is in flight (SEP-2260):
//
//   asks_by_request      sends elicitation/create and answers with the reply it got
//   asks_roots           sends roots/list and answers with the reply it got
//   asks_then_withdraws  sends elicitation/create, withdraws it (notifications/cancelled)
//                        300 ms later, and answers `withdrawn`
//   asks_and_waits       sends elicitation/create and never answers the call, whatever
//                        the reply: it ends only when the client gives the call up
//
// As rmcp's servers do, it refuses a request (but server/discover) whose _meta lacks the
// 2026-07-28 lifecycle keys: the protocol version and the client's capabilities.
//
// With `--http` it serves the same over Streamable HTTP as 2026-07-28 has it: no sessions
// and no standalone stream (a GET is refused), each request answered on an SSE stream of its
// own that carries the server's requests and notifications for it, and the client's replies
// to those POSTed back. It refuses, as rmcp's servers do, a request whose SEP-2243 headers
// do not match its body: `Mcp-Method`, `Mcp-Name` for a tools/call, and `Mcp-Param-Region`
// for the `regional` tool, whose `region` argument its schema marks with `x-mcp-header`.
//
// Every tools/call it receives is appended to $MRTR_LOG (one JSON line), so a test can see
// exactly which answers reached it; with $MRTR_WIRE, every message it reads is appended there
// (and over HTTP `{"closed": id}` when the client closes a request's stream before its answer).

import { appendFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createInterface } from 'node:readline';

const stdout = (m) => process.stdout.write(JSON.stringify(m) + '\n');
const log = (m) => {
  if (process.env.MRTR_LOG) appendFileSync(process.env.MRTR_LOG, JSON.stringify(m) + '\n');
};
const form = (message, properties, required = Object.keys(properties)) => ({
  method: 'elicitation/create',
  params: { mode: 'form', message, requestedSchema: { type: 'object', properties, required } },
});
const ask = (inputRequests, requestState) => ({
  resultType: 'input_required',
  ...(inputRequests ? { inputRequests } : {}),
  ...(requestState ? { requestState } : {}),
});
const done = (text) => ({ content: [{ type: 'text', text }] });

const tools = ['pattern_code', 'two_at_once', 'two_rounds', 'state_only', 'with_sampling', 'pattern_beside', 'asks_forever',
  'asks_by_request', 'asks_then_withdraws', 'asks_roots', 'asks_and_waits']
  .map((name) => ({ name, inputSchema: { type: 'object' } }))
  .concat([{ name: 'regional', inputSchema: { type: 'object', properties: {
    region: { type: 'string', 'x-mcp-header': 'Region' } } } }]);

// The replies awaited to this server's own requests, by id.
const awaiting = new Map();
let asked = 0;
let linkedReads = 0;
const request = (out, method, params) => {
  const id = `q${++asked}`;
  out({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });
  return { id, reply: new Promise((resolve) => awaiting.set(id, resolve)) };
};
const askByRequest = (out, message) => request(out, 'elicitation/create',
  { mode: 'form', message, requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } });
const answerWith = (out, id, label, reply) => reply.then((r) => out({ jsonrpc: '2.0', id,
  result: { resultType: 'complete', ...done(`${label} ${JSON.stringify(r.result ?? { error: r.error })}`) } }));
const LIFECYCLE = ['io.modelcontextprotocol/protocolVersion', 'io.modelcontextprotocol/clientCapabilities'];

function call(p) {
  const answers = p.inputResponses ?? {};
  const state = p.requestState;
  switch (p.name) {
    case 'pattern_code':
      if (answers.code) return done(`code ${JSON.stringify(answers.code)}`);
      return ask({ code: form('Enter the 6-digit code', { code: { type: 'string', pattern: '^[0-9]{6}$' } }) });
    case 'two_at_once':
      if (answers.name && answers.color) return done(`both ${JSON.stringify([answers.name, answers.color])}`);
      return ask({
        name: form('Your name', { name: { type: 'string' } }),
        color: form('Your color', { color: { type: 'string', enum: ['red', 'blue'] } }),
      });
    case 'two_rounds':
      if (state?.startsWith('second:') && answers.city) {
        return done(`rounds ${state.slice('second:'.length)} ${JSON.stringify(answers.city)}`);
      }
      if (answers.country) {
        return ask({ city: form('Your city', { city: { type: 'string' } }) },
          `second:${JSON.stringify(answers.country)}`);
      }
      return ask({ country: form('Your country', { country: { type: 'string' } }) });
    case 'state_only':
      if (state === 'warmed') return done('state echoed');
      return ask(undefined, 'warmed');
    case 'with_sampling':
      if (Object.keys(answers).length) return done(`answered ${JSON.stringify(Object.keys(answers))}`);
      return ask({
        ok: form('Fine?', { ok: { type: 'boolean' } }),
        llm: { method: 'sampling/createMessage', params: { messages: [{ role: 'user', content: { type: 'text', text: 'hi' } }], maxTokens: 10 } },
      });
    case 'pattern_beside':
      if (Object.keys(answers).length) return done(`answered ${JSON.stringify(Object.keys(answers))}`);
      return ask({
        ok: form('Fine?', { ok: { type: 'boolean' } }),
        code: form('Enter the 6-digit code', { code: { type: 'string', pattern: '^[0-9]{6}$' } }),
      });
    case 'asks_forever': {
      const round = Number(state ?? '0') + 1;
      return ask({ again: form(`Round ${round}: once more?`, { again: { type: 'boolean' } }) }, String(round));
    }
    case 'regional':
      return done(`region ${p.arguments?.region}`);
    default:
      return null;
  }
}

// One message from the client; `out` writes to wherever its answer goes (stdout, or the SSE
// stream of the POST that carried it). Whether it was a reply to one of ours.
function handle(m, out) {
  if (process.env.MRTR_WIRE) appendFileSync(process.env.MRTR_WIRE, JSON.stringify(m) + '\n');
  if (m.id !== undefined && !m.method && awaiting.has(m.id)) {
    awaiting.get(m.id)(m);
    awaiting.delete(m.id);
    return true;
  }
  if (m.id === undefined || !m.method) return false;
  const p = m.params ?? {};
  const missing = LIFECYCLE.filter((k) => p._meta?.[k] === undefined);
  if (m.method !== 'server/discover' && missing.length) {
    return out({ jsonrpc: '2.0', id: m.id, error: { code: -32602, message: `request _meta is missing ${missing.join(', ')}` } });
  }
  switch (m.method) {
    case 'server/discover':
      return out({ jsonrpc: '2.0', id: m.id, result: {
        resultType: 'complete', supportedVersions: ['2026-07-28'],
        capabilities: { tools: {}, prompts: {}, resources: {} },
        ttlMs: 0, cacheScope: 'private',
        _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'mrtr-server', version: '1.0.0' } },
      } });
    case 'tools/list':
      return out({ jsonrpc: '2.0', id: m.id, result: { resultType: 'complete', tools } });
    case 'tools/call': {
      log(p);
      if (p.name === 'asks_by_request') return answerWith(out, m.id, 'by request', askByRequest(out, 'Your name?').reply);
      if (p.name === 'asks_and_waits') {
        askByRequest(out, 'Waiting on you');
        return;
      }
      if (p.name === 'asks_roots') return answerWith(out, m.id, 'roots', request(out, 'roots/list').reply);
      if (p.name === 'asks_then_withdraws') {
        const { id } = askByRequest(out, 'Soon withdrawn');
        setTimeout(() => {
          awaiting.delete(id);
          out({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'no longer needed' } });
          out({ jsonrpc: '2.0', id: m.id, result: { resultType: 'complete', ...done('withdrawn') } });
        }, 300);
        return;
      }
      const result = call(p);
      if (!result) return out({ jsonrpc: '2.0', id: m.id, error: { code: -32602, message: `no tool ${p.name}` } });
      return out({ jsonrpc: '2.0', id: m.id, result: { resultType: 'complete', ...result } });
    }
    case 'prompts/list':
      return out({ jsonrpc: '2.0', id: m.id, result: { resultType: 'complete', prompts: [{ name: 'greeting' }] } });
    case 'prompts/get': {
      const name = p.inputResponses?.who?.content?.name;
      const result = name
        ? { resultType: 'complete', messages: [{ role: 'user', content: { type: 'text', text: `Hello, ${name}` } }] }
        : ask({ who: form('Who is greeted?', { name: { type: 'string' } }) });
      return out({ jsonrpc: '2.0', id: m.id, result });
    }
    case 'resources/list':
      return out({ jsonrpc: '2.0', id: m.id, result: { resultType: 'complete', resources: [{ uri: 'note://private', name: 'private' }] } });
    case 'resources/read': {
      if (p.uri === 'note://linked' && linkedReads++ === 0) {
        return out({ jsonrpc: '2.0', id: m.id, error: { code: -32042, message: 'Connect your notes first',
          data: { elicitations: [{ mode: 'url', elicitationId: 'link-1', url: 'https://consent.example.com/notes',
            message: 'Connect your notes' }] } } });
      }
      if (p.uri === 'note://formed') {
        return out({ jsonrpc: '2.0', id: m.id, error: { code: -32042, message: 'Sign in first',
          data: { elicitations: [{ mode: 'form', message: 'Your password', requestedSchema: {
            type: 'object', properties: { password: { type: 'string' } } } }] } } });
      }
      if (p.uri === 'note://linked') {
        return out({ jsonrpc: '2.0', id: m.id, result: { resultType: 'complete', contents: [{ uri: p.uri, text: 'the linked note' }] } });
      }
      const ok = p.inputResponses?.sure?.content?.sure === true;
      const result = ok
        ? { resultType: 'complete', contents: [{ uri: p.uri, text: 'the private note' }] }
        : ask({ sure: form('Show the private note?', { sure: { type: 'boolean' } }) });
      return out({ jsonrpc: '2.0', id: m.id, result });
    }
    case 'ping':
      return out({ jsonrpc: '2.0', id: m.id, result: {} });
    default:
      return out({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: `no ${m.method}` } });
  }
}

// A header as sent, `=?base64?...?=` unwrapped (SEP-2243).
const headerValue = (req, name) => {
  const v = req.headers[name];
  const wrapped = typeof v === 'string' && v.match(/^=\?base64\?(.*)\?=$/);
  return wrapped ? Buffer.from(wrapped[1], 'base64').toString('utf8') : v;
};

// Why a request's SEP-2243 headers do not match its body, if they do not.
function headerMismatch(req, m) {
  if (m.method !== 'server/discover' && req.headers['mcp-protocol-version'] !== '2026-07-28') {
    return `MCP-Protocol-Version is ${req.headers['mcp-protocol-version']}`;
  }
  if (headerValue(req, 'mcp-method') !== m.method) return `Mcp-Method is ${req.headers['mcp-method']}`;
  if (m.method !== 'tools/call') return null;
  if (headerValue(req, 'mcp-name') !== m.params?.name) return `Mcp-Name is ${req.headers['mcp-name']}`;
  if (m.params?.name === 'regional' && headerValue(req, 'mcp-param-region') !== m.params?.arguments?.region) {
    return `Mcp-Param-Region is ${req.headers['mcp-param-region']}`;
  }
  return null;
}

if (process.argv.includes('--http')) {
  const server = createServer((req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST' }).end();
      return;
    }
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      let m;
      try { m = JSON.parse(body); } catch {
        res.writeHead(400).end();
        return;
      }
      if (m.id === undefined || !m.method) {
        handle(m, () => {});
        res.writeHead(202).end();
        return;
      }
      const wrong = headerMismatch(req, m);
      if (wrong) {
        res.writeHead(400, { 'content-type': 'application/json' })
          .end(JSON.stringify({ jsonrpc: '2.0', id: m.id, error: { code: -32020, message: wrong } }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      // Closed by the client before its answer: 2026-07-28's cancellation over HTTP.
      res.on('close', () => {
        if (!res.writableEnded && process.env.MRTR_WIRE) {
          appendFileSync(process.env.MRTR_WIRE, JSON.stringify({ closed: m.id }) + '\n');
        }
      });
      // The stream ends with the request's answer.
      handle(m, (message) => {
        if (res.writableEnded) return;
        res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
        if (message.id === m.id && !message.method) res.end();
      });
    });
  });
  server.listen(0, '127.0.0.1', () => console.log(`http://127.0.0.1:${server.address().port}/mcp`));
} else {
  createInterface({ input: process.stdin }).on('line', (line) => {
    let m;
    try { m = JSON.parse(line); } catch { return; }
    handle(m, stdout);
  });
}
