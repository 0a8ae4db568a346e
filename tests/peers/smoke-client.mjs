#!/usr/bin/env node
// A tiny MCP client (TypeScript SDK) for checking the test peers by hand and from
// scripts/smoke-peers.sh. It connects, initializes, lists tools and optionally calls one,
// answering elicitations as told. Prints one JSON line per step to stdout.
//
//   node smoke-client.mjs [options] -- CMD ARGS...     # stdio peer
//   node smoke-client.mjs [options] --url URL          # Streamable HTTP peer
//
// Options:
//   --call NAME [--args JSON]    call a tool after listing
//   --then NAME [--args2 JSON]   call a second tool afterwards (same session)
//   --answer MODE                how to answer elicitation/create:
//       accept-defaults (default)  accept with each property's `default` (booleans without one: true,
//                                  strings without one: "smoke")
//       decline | cancel           that action
//       ignore                     never answer (the server's timeout fires)
//       late:MS                    ignore, then MS ms later send an accept for that request id anyway
//                                  (the SDK client would drop it once cancelled, so it is written raw)
//   --pause MS                   wait MS ms between the two calls
//   --timeout MS                 client request timeout for the tool call (default 30000)

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const argv = process.argv.slice(2);
const opts = { answer: 'accept-defaults', timeout: 30000 };
let command = null;
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--') {
    command = argv.slice(i + 1);
    break;
  } else if (a === '--url') opts.url = argv[++i];
  else if (a === '--call') opts.call = argv[++i];
  else if (a === '--args') opts.args = JSON.parse(argv[++i]);
  else if (a === '--then') opts.then = argv[++i];
  else if (a === '--args2') opts.args2 = JSON.parse(argv[++i]);
  else if (a === '--answer') opts.answer = argv[++i];
  else if (a === '--timeout') opts.timeout = Number(argv[++i]);
  else if (a === '--pause') opts.pause = Number(argv[++i]);
  else {
    console.error(`smoke-client: unknown argument ${a}`);
    process.exit(2);
  }
}
if (!opts.url && !command) {
  console.error('smoke-client: give --url URL or -- CMD ARGS...');
  process.exit(2);
}

const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');

function defaultsFor(schema) {
  const content = {};
  for (const [name, prop] of Object.entries(schema?.properties ?? {})) {
    if (prop.default !== undefined) content[name] = prop.default;
    else if (prop.type === 'boolean') content[name] = true;
    else if (prop.type === 'string') content[name] = prop.enum?.[0] ?? 'smoke';
    else if (prop.type === 'number' || prop.type === 'integer') content[name] = prop.minimum ?? 1;
  }
  return content;
}

const client = new Client(
  { name: 'countersign-smoke-client', version: '1.0.0' },
  { capabilities: { elicitation: { form: {} } } },
);

const transport = opts.url
  ? new StreamableHTTPClientTransport(new URL(opts.url))
  : new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: 'inherit' });

client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
  out({ step: 'elicitation', id: extra.requestId, params: request.params });
  const mode = opts.answer;
  if (mode === 'decline' || mode === 'cancel') return { action: mode };
  if (mode === 'ignore' || mode.startsWith('late:')) {
    if (mode.startsWith('late:')) {
      const delay = Number(mode.slice(5));
      setTimeout(() => {
        const late = { jsonrpc: '2.0', id: extra.requestId, result: { action: 'accept', content: defaultsFor(request.params.requestedSchema) } };
        out({ step: 'late-answer-sent', id: extra.requestId });
        transport.send(late).catch((e) => out({ step: 'late-answer-error', error: String(e) }));
      }, delay);
    }
    return new Promise(() => {}); // never answered through the SDK
  }
  return { action: 'accept', content: defaultsFor(request.params.requestedSchema) };
});

try {
  await client.connect(transport);
  out({ step: 'initialized', server: client.getServerVersion(), protocolVersion: transport.protocolVersion ?? null });
  const { tools } = await client.listTools();
  out({ step: 'tools', names: tools.map((t) => t.name) });
  for (const [name, args] of [
    [opts.call, opts.args],
    [opts.then, opts.args2],
  ]) {
    if (!name) continue;
    if (name === opts.then && opts.pause) await new Promise((r) => setTimeout(r, opts.pause));
    const result = await client.callTool({ name, arguments: args ?? {} }, undefined, { timeout: opts.timeout });
    out({ step: 'result', tool: name, isError: result.isError ?? false, text: result.content?.map((c) => c.text).join('') });
  }
  await client.close();
  process.exit(0);
} catch (err) {
  out({ step: 'error', error: String(err?.stack ?? err) });
  process.exit(1);
}
