#!/usr/bin/env node
// A small MCP server built on the TypeScript SDK (@modelcontextprotocol/sdk, pinned in
// package.json) that asks its client questions through legacy `elicitation/create`.
// Countersign's tests use it as a real, independent peer.
//
// Usage:
//   node ts-elicit-server.mjs               # stdio (default)
//   node ts-elicit-server.mjs --http PORT   # Streamable HTTP on 127.0.0.1:PORT/mcp (PORT 0 = any free port)
//
// Over HTTP the server prints `listening on http://127.0.0.1:PORT/mcp` to stderr once it is ready.
//
// Tools:
//   confirm_action {action: string}
//       Elicits a form {confirm: boolean (required)} and replies with the exact ElicitResult it
//       received, as JSON text: {"action":"accept","content":{"confirm":true}}.
//       If the SDK rejects the answer (e.g. content that does not match the schema) the reply is
//       isError: true with text {"error": "<message>"}.
//   ask_with_timeout {timeout_ms: integer}
//       Elicits a form {ok: boolean} with that SDK request timeout. On timeout the SDK sends
//       `notifications/cancelled` for the elicitation request (requestId 0 for the first
//       server-to-client request of a session) and the tool replies with the text "timed out";
//       otherwise it replies with the ElicitResult as JSON text.
//   ask_many {count: integer}
//       Sends `count` form elicitations at once (a burst) and replies with their results as a
//       JSON array once all are answered.
//   open_url {url: string, complete_after_ms?: integer}
//       Elicits in URL mode with exactly that URL (any scheme) and replies with the result; with
//       complete_after_ms and an accept, sends notifications/elicitation/complete that long after.
//   url_required {url: string, complete_after_ms?: integer}
//       The first call (per session) throws UrlElicitationRequiredError (-32042) asking the
//       client to open `url` (elicitationId logged as `url required id=...`); with
//       complete_after_ms it sends notifications/elicitation/complete for it that long after.
//       The next call replies "done after the URL".
//   list_roots {}
//       Asks the client for its roots (roots/list) and replies with what it answered.
//       Like every request below, it is sent as related to the call, so over HTTP it goes on
//       the call's own response stream.
//   ask_model {prompt: string}
//       Asks the client's model (sampling/createMessage: the prompt as the user's message, a
//       system prompt, 64 tokens, context from this server) and replies with the result as JSON
//       text; an error reply is isError: true with {"error": message, "code": code}. Sent
//       whether or not the client declared sampling, so a refusal can be seen.
//   late_answers {}
//       Replies {"late_answers": N}: how many answers arrived for elicitation requests this process
//       had already cancelled (counted across all sessions). Countersign must keep this at 0.
//
// Every line this server writes to stderr starts with `ts-elicit-server:`. It logs each
// elicitation/create it sends (`sent elicitation/create id=N`), each cancellation it sends
// (`sent notifications/cancelled {"requestId":N,...}`) and each late answer
// (`late answer for cancelled request id=N`), so tests can assert on them.

import { randomUUID } from 'node:crypto';
import http from 'node:http';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  ErrorCode, McpError, UrlElicitationRequiredError, isInitializeRequest,
} from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';

const log = (...parts) => process.stderr.write(`ts-elicit-server: ${parts.join(' ')}\n`);

let lateAnswers = 0;

function text(value, isError = false) {
  const t = typeof value === 'string' ? value : JSON.stringify(value);
  return { content: [{ type: 'text', text: t }], ...(isError ? { isError: true } : {}) };
}

function buildServer() {
  const server = new McpServer(
    { name: 'countersign-ts-elicit-server', version: '1.0.0' },
    { capabilities: { tools: {} } },
  );

  server.registerTool(
    'confirm_action',
    {
      description: 'Asks the person to confirm an action; replies with the exact elicitation result.',
      inputSchema: { action: z.string().describe('What is about to happen') },
    },
    async ({ action }, extra) => {
      try {
        const result = await server.server.elicitInput(
          {
            mode: 'form',
            message: `Confirm: ${action}`,
            requestedSchema: {
              type: 'object',
              properties: {
                confirm: { type: 'boolean', title: 'Confirm', description: `Really ${action}?` },
              },
              required: ['confirm'],
            },
          },
          { relatedRequestId: extra.requestId },
        );
        return text(result);
      } catch (err) {
        return text({ error: String(err?.message ?? err) }, true);
      }
    },
  );

  server.registerTool(
    'ask_with_timeout',
    {
      description: 'Elicits with the given request timeout; replies "timed out" when it expires.',
      inputSchema: { timeout_ms: z.number().int().positive().describe('Elicitation timeout in ms') },
    },
    async ({ timeout_ms }, extra) => {
      try {
        const result = await server.server.elicitInput(
          {
            mode: 'form',
            message: `Answer within ${timeout_ms} ms`,
            requestedSchema: {
              type: 'object',
              properties: { ok: { type: 'boolean', title: 'OK?' } },
            },
          },
          { relatedRequestId: extra.requestId, timeout: timeout_ms },
        );
        return text(result);
      } catch (err) {
        if (err instanceof McpError && err.code === ErrorCode.RequestTimeout) {
          log(`elicitation timed out after ${timeout_ms} ms`);
          return text('timed out');
        }
        return text({ error: String(err?.message ?? err) }, true);
      }
    },
  );

  server.registerTool(
    'ask_many',
    {
      description: 'Asks count questions at once; replies with every result.',
      inputSchema: { count: z.number().int().min(1).max(50).describe('How many questions') },
    },
    async ({ count }, extra) => {
      try {
        const results = await Promise.all(
          Array.from({ length: count }, (_, i) =>
            server.server.elicitInput(
              {
                mode: 'form',
                message: `Burst question ${i + 1} of ${count}`,
                requestedSchema: { type: 'object', properties: { ok: { type: 'boolean', title: 'OK?' } } },
              },
              { relatedRequestId: extra.requestId, timeout: 600_000 },
            ),
          ),
        );
        return text(results);
      } catch (err) {
        return text({ error: String(err?.message ?? err) }, true);
      }
    },
  );

  server.registerTool(
    'open_url',
    {
      description: 'Asks the person to open exactly this URL (URL-mode elicitation).',
      inputSchema: {
        url: z.string().describe('The URL, any scheme'),
        complete_after_ms: z.number().int().optional(),
      },
    },
    async ({ url, complete_after_ms }, extra) => {
      try {
        const elicitationId = randomUUID();
        const result = await server.server.elicitInput(
          { mode: 'url', message: 'Please open this page', url, elicitationId },
          { relatedRequestId: extra.requestId, timeout: 600_000 },
        );
        if (complete_after_ms !== undefined && result.action === 'accept') {
          const notify = server.server.createElicitationCompletionNotifier(elicitationId);
          setTimeout(() => notify().then(() => log(`sent elicitation complete id=${elicitationId}`), () => {}),
            complete_after_ms);
        }
        return text(result);
      } catch (err) {
        return text({ error: String(err?.message ?? err) }, true);
      }
    },
  );

  let urlRequired = 0;
  server.registerTool(
    'url_required',
    {
      description: 'Needs an address opened before it runs (URLElicitationRequiredError).',
      inputSchema: { url: z.string(), complete_after_ms: z.number().int().optional() },
    },
    async ({ url, complete_after_ms }) => {
      urlRequired += 1;
      if (urlRequired % 2 === 0) return text('done after the URL');
      const elicitationId = randomUUID();
      log(`url required id=${elicitationId}`);
      if (complete_after_ms !== undefined) {
        const notify = server.server.createElicitationCompletionNotifier(elicitationId);
        setTimeout(() => {
          notify().then(() => log(`sent elicitation complete id=${elicitationId}`), () => {});
        }, complete_after_ms);
      }
      throw new UrlElicitationRequiredError([
        { mode: 'url', message: 'Connect your calendar first', url, elicitationId },
      ]);
    },
  );

  server.registerTool(
    'list_roots',
    { description: "The client's roots, as it answers roots/list.", inputSchema: {} },
    async (_args, extra) => {
      try {
        return text(await server.server.listRoots(undefined, { relatedRequestId: extra.requestId }));
      } catch (err) {
        return text({ error: String(err?.message ?? err) }, true);
      }
    },
  );

  server.registerTool(
    'ask_model',
    { description: "What the client's model writes for a prompt (sampling).", inputSchema: { prompt: z.string() } },
    async ({ prompt }, extra) => {
      try {
        return text(await server.server.createMessage({
          messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
          systemPrompt: 'You are a terse assistant.',
          maxTokens: 64,
          includeContext: 'thisServer',
        }, { relatedRequestId: extra.requestId }));
      } catch (err) {
        return text({ error: String(err?.message ?? err), code: err?.code ?? null }, true);
      }
    },
  );

  server.registerTool(
    'late_answers',
    {
      description: 'How many elicitation answers arrived after this server had cancelled the request.',
      inputSchema: {},
    },
    async () => text({ late_answers: lateAnswers }),
  );

  return server;
}

// Watches one transport: logs outgoing elicitations and cancellations, counts answers that
// arrive for requests already cancelled. Must be called after `server.connect(transport)`
// (connect installs the onmessage handler this wraps).
function instrument(transport) {
  const cancelled = new Set();
  const send = transport.send.bind(transport);
  transport.send = async (message, options) => {
    if (message?.method === 'elicitation/create') {
      log(`sent elicitation/create id=${message.id}`);
    } else if (message?.method === 'notifications/cancelled') {
      cancelled.add(message.params?.requestId);
      log(`sent notifications/cancelled ${JSON.stringify(message.params)}`);
    }
    return send(message, options);
  };
  const onmessage = transport.onmessage;
  transport.onmessage = (message, extra) => {
    const isResponse = message && message.method === undefined && message.id !== undefined;
    if (isResponse && cancelled.has(message.id)) {
      lateAnswers += 1;
      log(`late answer for cancelled request id=${message.id}: ${JSON.stringify(message.result ?? message.error)}`);
    }
    return onmessage?.call(transport, message, extra);
  };
}

async function serveStdio() {
  const server = buildServer();
  // Responses to cancelled requests are reported here by the SDK; they are counted in instrument().
  server.server.onerror = (err) => log(`sdk error: ${err?.message ?? err}`);
  const transport = new StdioServerTransport();
  await server.connect(transport);
  instrument(transport);
  log('ready on stdio');
}

async function serveHttp(port) {
  const sessions = new Map(); // session id -> transport

  const httpServer = http.createServer(async (req, res) => {
    try {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      if (url.pathname !== '/mcp') {
        res.writeHead(404).end('not found');
        return;
      }
      const sessionId = req.headers['mcp-session-id'];
      if (typeof sessionId === 'string' && sessions.has(sessionId)) {
        await sessions.get(sessionId).handleRequest(req, res);
        return;
      }
      if (req.method !== 'POST') {
        res.writeHead(400, { 'Content-Type': 'application/json' }).end(
          JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Invalid or missing session ID' }, id: null }),
        );
        return;
      }
      const body = await readJson(req);
      if (!isInitializeRequest(body)) {
        res.writeHead(400, { 'Content-Type': 'application/json' }).end(
          JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Invalid or missing session ID' }, id: null }),
        );
        return;
      }
      const server = buildServer();
      server.server.onerror = (err) => log(`sdk error: ${err?.message ?? err}`);
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          sessions.set(id, transport);
          log(`session ${id} initialized`);
        },
      });
      transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
      };
      await server.connect(transport);
      instrument(transport);
      await transport.handleRequest(req, res, body);
    } catch (err) {
      log(`http error: ${err?.stack ?? err}`);
      if (!res.headersSent) {
        res.writeHead(500, { 'Content-Type': 'application/json' }).end(
          JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal server error' }, id: null }),
        );
      }
    }
  });

  await new Promise((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(port, '127.0.0.1', resolve);
  });
  const { port: actual } = httpServer.address();
  log(`listening on http://127.0.0.1:${actual}/mcp`);

  const shutdown = async () => {
    for (const t of sessions.values()) await t.close().catch(() => {});
    httpServer.close();
    process.exit(0);
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}

function readJson(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (err) {
        reject(err);
      }
    });
    req.on('error', reject);
  });
}

const args = process.argv.slice(2);
const httpIdx = args.indexOf('--http');
if (httpIdx >= 0) {
  const port = Number(args[httpIdx + 1]);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    log('usage: ts-elicit-server.mjs [--http PORT]');
    process.exit(2);
  }
  await serveHttp(port);
} else {
  await serveStdio();
}
