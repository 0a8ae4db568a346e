#!/usr/bin/env node
// Reference client for the MCP conformance suite's client scenarios, written with the
// TypeScript SDK. It shows what each scenario expects of Countersign's own conformance client
// (tests/conformance-client, binary `countersign-conformance-client`) and lets
// scripts/conformance.sh be tried without it:
//
//   CONFORMANCE_CLIENT="node tests/peers/ts-conformance-client.mjs" scripts/conformance.sh
//
// Contract (the suite's): argv[2] is the scenario server's URL, MCP_CONFORMANCE_SCENARIO names
// the scenario. Exit 0 when the client did its part; the suite judges the rest from the wire.
//
// What each scenario wants:
//   initialize   initialize offering protocol 2025-11-25 (or 2025-06-18) with clientInfo name and
//                version; then anything (this client lists tools). The scenario server answers
//                every non-initialize POST with an empty result and the GET stream with 400.
//   tools_call   initialize, tools/list, then tools/call add_numbers {a, b}.
//   elicitation-sep1034-client-defaults
//                declare elicitation, call test_client_elicitation_defaults; the server sends a
//                form whose five optional fields (string, integer, number, enum, boolean) all
//                carry `default`; answer accept with every default filled in (the untouched
//                pre-filled form).
//   sse-retry    call test_reconnection; the server answers on an SSE stream with a priming event
//                (`id`, `retry: 500`) and closes it without a response. The client must reconnect
//                with GET after ~500 ms (no sooner than 450, no later than 700, or it is a warning
//                which the suite counts as failure), sending Last-Event-ID; the result arrives on
//                that GET stream.
//   sep-2322-client-request-state   (conformance 0.2.0-alpha only; protocol 2026-07-28, MRTR)
//                No initialize: server/discover, tools/list, then for each tool a tools/call.
//                A result with resultType "input_required" carries inputRequests (here
//                elicitation/create) and maybe requestState; the client retries the same
//                tools/call with a NEW JSON-RPC id, params.inputResponses keyed like
//                inputRequests, and requestState echoed byte for byte only if one was sent.
//                Another call (test_mrtr_unrelated) must carry neither. A result without
//                resultType is complete. The TS SDK 1.32 has no MRTR, so this part is raw HTTP.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const serverUrl = process.argv[2];
const scenario = process.env.MCP_CONFORMANCE_SCENARIO;
const log = (msg) => process.stderr.write(`ts-conformance-client: ${msg}\n`);

if (!serverUrl || !scenario) {
  log('usage: MCP_CONFORMANCE_SCENARIO=<name> ts-conformance-client.mjs <server-url>');
  process.exit(2);
}

// The "untouched pre-filled form": every property that has a default gets it.
function prefilled(schema) {
  const content = {};
  for (const [name, prop] of Object.entries(schema?.properties ?? {})) {
    if (prop && prop.default !== undefined) content[name] = prop.default;
  }
  return content;
}

async function connect(capabilities = {}) {
  const client = new Client({ name: 'countersign-ts-conformance-client', version: '1.0.0' }, { capabilities });
  client.onerror = (err) => log(`client error: ${err?.message ?? err}`);
  const transport = new StreamableHTTPClientTransport(new URL(serverUrl));
  await client.connect(transport);
  log(`connected: protocol ${transport.protocolVersion ?? '(none)'}`);
  return client;
}

async function initializeScenario() {
  const client = await connect();
  await client.listTools().catch((err) => log(`tools/list: ${err.message}`));
  await client.close();
}

async function toolsCallScenario() {
  const client = await connect();
  const { tools } = await client.listTools();
  log(`tools: ${tools.map((t) => t.name).join(', ')}`);
  const result = await client.callTool({ name: 'add_numbers', arguments: { a: 5, b: 3 } });
  log(`add_numbers -> ${JSON.stringify(result.content)}`);
  await client.close();
}

async function elicitationDefaultsScenario() {
  const client = new Client(
    { name: 'countersign-ts-conformance-client', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} } } },
  );
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    const content = prefilled(request.params.requestedSchema);
    log(`elicitation -> accept ${JSON.stringify(content)}`);
    return { action: 'accept', content };
  });
  const transport = new StreamableHTTPClientTransport(new URL(serverUrl));
  await client.connect(transport);
  const { tools } = await client.listTools();
  for (const tool of tools) {
    const result = await client.callTool({ name: tool.name, arguments: {} });
    log(`${tool.name} -> ${JSON.stringify(result.content)}`);
  }
  await client.close();
}

async function sseRetryScenario() {
  const client = await connect();
  const { tools } = await client.listTools();
  for (const tool of tools) {
    const result = await client.callTool({ name: tool.name, arguments: {} }, undefined, { timeout: 10000 });
    log(`${tool.name} -> ${JSON.stringify(result.content)}`);
  }
  await client.close();
}

// --- MRTR (protocol 2026-07-28), raw JSON-RPC over HTTP POST -------------------------------

async function mrtrScenario() {
  const protocolVersion = process.env.MCP_CONFORMANCE_PROTOCOL_VERSION || '2026-07-28';
  const capabilities = { elicitation: { form: {} } };
  let nextId = 1;
  const post = async (method, params) => {
    const id = nextId++;
    const body = {
      jsonrpc: '2.0',
      id,
      method,
      params: {
        ...params,
        _meta: {
          ...(params?._meta ?? {}),
          'io.modelcontextprotocol/protocolVersion': protocolVersion,
          'io.modelcontextprotocol/clientCapabilities': capabilities,
          'io.modelcontextprotocol/clientInfo': { name: 'countersign-ts-conformance-client', version: '1.0.0' },
        },
      },
    };
    const res = await fetch(serverUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': protocolVersion,
      },
      body: JSON.stringify(body),
    });
    const msg = await res.json();
    if (msg.error) throw new Error(`${method}: ${msg.error.code} ${msg.error.message}`);
    return msg.result;
  };

  const answer = (request) => {
    if (request.method === 'elicitation/create') {
      return { action: 'accept', content: prefilled(request.params?.requestedSchema) };
    }
    throw new Error(`cannot answer input request ${request.method}`);
  };

  // One tools/call, retried (new id each time) until it completes.
  const callTool = async (name, args = {}) => {
    let params = { name, arguments: args };
    for (let round = 0; round < 10; round++) {
      const result = await post('tools/call', params);
      if ((result.resultType ?? 'complete') !== 'input_required') return result;
      const inputResponses = {};
      for (const [key, request] of Object.entries(result.inputRequests ?? {})) inputResponses[key] = answer(request);
      params = { name, arguments: args, inputResponses };
      if (result.requestState !== undefined) params.requestState = result.requestState;
    }
    throw new Error(`${name}: too many input rounds`);
  };

  const discovered = await post('server/discover', {});
  log(`discovered: ${JSON.stringify(discovered.supportedVersions)}`);
  const { tools } = await post('tools/list', {});
  for (const tool of tools) {
    const result = await callTool(tool.name);
    log(`${tool.name} -> ${JSON.stringify(result.content)}`);
  }
}

const scenarios = {
  initialize: initializeScenario,
  tools_call: toolsCallScenario,
  'elicitation-sep1034-client-defaults': elicitationDefaultsScenario,
  'sse-retry': sseRetryScenario,
  'sep-2322-client-request-state': mrtrScenario,
};

const run = scenarios[scenario];
if (!run) {
  log(`unknown scenario ${scenario}`);
  process.exit(1);
}
try {
  await run();
  process.exit(0);
} catch (err) {
  log(`failed: ${err?.stack ?? err}`);
  process.exit(1);
}
