#!/usr/bin/env node
// A TypeScript SDK agent for the gateway benchmark (crates/core/benches/gateway.rs): one
// client, keep-alive connections (Node's fetch keeps them, as agent hosts do), calling one tool
// one call at a time.
//
//   node ts-bench-agent.mjs --tool T --warmup W --calls N (--url URL [--token T] | -- CMD ARGS...)
//
// It connects, makes W warm-up calls, prints {"step":"warm"}, waits for a line on stdin (the
// bench reads the CPU clocks meanwhile), makes N calls and prints {"step":"done","ns":[...]}:
// each call's time in nanoseconds.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createInterface } from 'node:readline';

const argv = process.argv.slice(2);
const opts = {};
let command = null;
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--') { command = argv.slice(i + 1); break; }
  opts[argv[i].replace(/^--/, '')] = argv[++i];
}
const print = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const headers = opts.token ? { Authorization: `Bearer ${opts.token}` } : {};
const transport = command
  ? new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: 'inherit', env: process.env })
  : new StreamableHTTPClientTransport(new URL(opts.url), { requestInit: { headers } });
const client = new Client({ name: 'ts-bench-agent', version: '1.0.0' }, { capabilities: {} });
const call = () => client.callTool({ name: opts.tool, arguments: {} });
try {
  await client.connect(transport);
  for (let i = 0; i < Number(opts.warmup); i++) await call();
  print({ step: 'warm' });
  const lines = createInterface({ input: process.stdin });
  await new Promise((resolve) => lines.once('line', resolve));
  const ns = [];
  for (let i = 0; i < Number(opts.calls); i++) {
    const t0 = process.hrtime.bigint();
    const result = await call();
    if (result.isError) throw new Error(`the call failed: ${JSON.stringify(result.content)}`);
    ns.push(Number(process.hrtime.bigint() - t0));
  }
  // Past 64 KiB a pipe takes the line in parts: wait for all of it before exiting.
  await new Promise((resolve) => process.stdout.write(JSON.stringify({ step: 'done', ns }) + '\n', resolve));
  await client.close();
  process.exit(0);
} catch (e) {
  print({ step: 'error', message: String(e && e.message ? e.message : e) });
  process.exit(1);
}
