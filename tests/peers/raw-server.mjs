#!/usr/bin/env node
// An MCP server written without any SDK, over stdio, whose answers carry fields no SDK models
// (vendor keys on a tool, its result, a resource and a prompt). The gateway tests check that
// agents receive them unchanged.

import { createInterface } from 'node:readline';

const vendor = { 'x-vendor': { kept: true, n: 7 } };
const results = {
  initialize: (p) => ({
    protocolVersion: p.protocolVersion === '2025-06-18' ? '2025-06-18' : '2025-11-25',
    capabilities: { tools: {}, resources: {}, prompts: {} },
    serverInfo: { name: 'raw-server', version: '1.0.0' },
  }),
  'tools/list': () => ({
    tools: [{
      name: 'echo', description: 'Echoes', inputSchema: { type: 'object' },
      annotations: { readOnlyHint: true }, ...vendor,
    }],
  }),
  'tools/call': (p) => ({ content: [{ type: 'text', text: JSON.stringify(p.arguments ?? {}) }], ...vendor }),
  'resources/list': () => ({ resources: [{ uri: 'raw://a', name: 'a', ...vendor }] }),
  'resources/read': (p) => ({ contents: [{ uri: p.uri, text: 'hello', ...vendor }] }),
  'prompts/list': () => ({ prompts: [{ name: 'p', ...vendor }] }),
  'prompts/get': () => ({ messages: [{ role: 'user', content: { type: 'text', text: 'hi' } }], ...vendor }),
  ping: () => ({}),
};

const out = (m) => process.stdout.write(JSON.stringify(m) + '\n');
createInterface({ input: process.stdin }).on('line', (line) => {
  let m;
  try { m = JSON.parse(line); } catch { return; }
  if (m.id === undefined || !m.method) return;
  const make = results[m.method];
  if (make) out({ jsonrpc: '2.0', id: m.id, result: make(m.params ?? {}) });
  else out({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: `no ${m.method}` } });
});
