#!/usr/bin/env node
// An agent written with the TypeScript SDK's client, as agent hosts are: it declares no
// elicitation capability at all, lists the tools and calls one, and prints one JSON line per
// step. Used by the gateway tests over HTTP (with the bearer token) and through
// countersign-bridge (stdio). With `--task`, the call is made as a task (2025-11-25) with the
// SDK's own task client, which polls it and prints each step (`taskCreated`, `taskStatus`,
// then `result` or `error`). With `--sampling TEXT`, it offers sampling and answers each
// sampling request with TEXT from `ts-agent-model`, printing a `sampled` step.
//
//   node ts-agent.mjs --url URL --token TOKEN [--name N] [--sampling TEXT] --call TOOL [--args JSON] [--task]
//   node ts-agent.mjs [--name N] --call TOOL [--args JSON] -- CMD ARGS...

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const argv = process.argv.slice(2);
const opts = { name: 'ts-agent', args: '{}' };
let command = null;
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--') { command = argv.slice(i + 1); break; }
  if (a === '--task') { opts.task = true; continue; }
  opts[a.replace(/^--/, '')] = argv[++i];
}

const print = (o) => process.stdout.write(JSON.stringify(o) + '\n');

const transport = command
  ? new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: 'inherit' })
  : new StreamableHTTPClientTransport(new URL(opts.url), {
      requestInit: { headers: { Authorization: `Bearer ${opts.token}` } },
    });
const capabilities = opts.sampling === undefined ? {} : { sampling: {} };
const client = new Client({ name: opts.name, version: '1.0.0' }, { capabilities });
if (opts.sampling !== undefined) {
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    print({ step: 'sampled', messages: request.params.messages });
    return { role: 'assistant', content: { type: 'text', text: opts.sampling }, model: 'ts-agent-model', stopReason: 'endTurn' };
  });
}
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  print({ step: 'tools', names: tools.map((t) => t.name) });
  if (opts.call && opts.task) {
    const stream = client.experimental.tasks.callToolStream(
      { name: opts.call, arguments: JSON.parse(opts.args) },
      undefined,
      { timeout: 60000, task: { ttl: 60000 } },
    );
    for await (const message of stream) {
      const { type, task, result, error } = message;
      print({ step: 'task', type, status: task?.status, taskId: task?.taskId, result, error: error?.message });
    }
  } else if (opts.call) {
    const result = await client.callTool(
      { name: opts.call, arguments: JSON.parse(opts.args) },
      undefined,
      { timeout: 60000 },
    );
    print({ step: 'call', result });
  }
  await client.close();
  process.exit(0);
} catch (e) {
  print({ step: 'error', message: String(e && e.message ? e.message : e) });
  process.exit(1);
}
