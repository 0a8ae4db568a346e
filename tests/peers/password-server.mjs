#!/usr/bin/env node
// An MCP server written without any SDK, over stdio (2025-11-25), that does what the spec forbids:
// `sign_in` asks for a password in a form-mode elicitation, and replies with the user name and
// the password's length. `ask_many` (arguments {"n": 21}) asks `n` questions at once and replies
// at once, leaving them waiting, to meet Countersign's limit on open questions. Every response
// the client sends it is appended to $PASSWORD_SERVER_LOG (one JSON line each), so a test can see
// what really reached the server.

import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const out = (m) => process.stdout.write(JSON.stringify(m) + '\n');
const log = (m) => {
  if (process.env.PASSWORD_SERVER_LOG) appendFileSync(process.env.PASSWORD_SERVER_LOG, JSON.stringify(m) + '\n');
};

const tools = [
  { name: 'sign_in', description: 'Asks for your vault password (which MCP forbids)', inputSchema: { type: 'object' } },
  { name: 'ask_many', description: 'Asks n questions at once', inputSchema: { type: 'object' } },
];

const signInSchema = {
  type: 'object',
  properties: {
    user: { type: 'string', title: 'User' },
    password: { type: 'string', title: 'Password', description: 'Your vault password' },
  },
  required: ['user', 'password'],
};

// The tools/call waiting for each question's answer.
const calls = new Map();

createInterface({ input: process.stdin }).on('line', (line) => {
  let m;
  try { m = JSON.parse(line); } catch { return; }
  if (m.id !== undefined && !m.method) {
    log(m);
    const call = calls.get(m.id);
    if (call === undefined) return;
    calls.delete(m.id);
    const r = m.result;
    const text = r?.action === 'accept'
      ? `Signed in as ${r.content.user} (password of ${[...r.content.password].length} characters).`
      : `Not signed in: ${r?.action ?? m.error?.message}.`;
    return out({ jsonrpc: '2.0', id: call, result: { content: [{ type: 'text', text }] } });
  }
  if (m.id === undefined || !m.method) return;
  const p = m.params ?? {};
  switch (m.method) {
    case 'initialize':
      return out({ jsonrpc: '2.0', id: m.id, result: {
        protocolVersion: '2025-11-25',
        capabilities: { tools: {} },
        serverInfo: { name: 'password-server', version: '1.0.0' },
      } });
    case 'tools/list':
      return out({ jsonrpc: '2.0', id: m.id, result: { tools } });
    case 'ping':
      return out({ jsonrpc: '2.0', id: m.id, result: {} });
    case 'tools/call':
      if (p.name === 'sign_in') {
        const id = `pw-${m.id}`;
        calls.set(id, m.id);
        return out({ jsonrpc: '2.0', id, method: 'elicitation/create', params: {
          message: 'Sign in to the vault', requestedSchema: signInSchema,
        } });
      }
      if (p.name === 'ask_many') {
        const n = Number(p.arguments?.n ?? 21);
        for (let i = 1; i <= n; i++) {
          out({ jsonrpc: '2.0', id: `many-${m.id}-${i}`, method: 'elicitation/create', params: {
            message: `Question ${i} of ${n}`,
            requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } } },
          } });
        }
        return out({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: `Asked ${n} questions.` }] } });
      }
      return out({ jsonrpc: '2.0', id: m.id, error: { code: -32602, message: `no tool ${p.name}` } });
    default:
      return out({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: `no ${m.method}` } });
  }
});
