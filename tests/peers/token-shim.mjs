#!/usr/bin/env node
// A test-only forwarding shim in front of Countersign's gateway, for the conformance suite's
// server scenarios, which send no Authorization header: it adds the gateway's bearer token and
// forwards everything else as it came, streams included. A Host or Origin naming the shim is
// rewritten to name the gateway (what an agent reaching the gateway directly would send); any
// other Host or Origin passes unchanged, so the gateway's own DNS-rebinding guard judges what
// the suite sent.
//
//   node token-shim.mjs --target http://127.0.0.1:PORT/mcp/SERVER --token TOKEN[,TOKEN...]
//
// With several tokens, each session the suite opens is a new agent's, in turn: the suite opens a
// session per scenario and ends none, and one agent may hold only so many at once. A session's
// later requests carry the token that opened it.
//
// Prints `listening on http://127.0.0.1:PORT/mcp` once it listens.
import http from 'node:http';

const argv = process.argv.slice(2);
const opts = {};
for (let i = 0; i < argv.length; i += 2) opts[argv[i].replace(/^--/, '')] = argv[i + 1];
const target = new URL(opts.target);
const tokens = opts.token.split(',');
let next = 0;
/** The token each session was opened with, by its Mcp-Session-Id. */
const bySession = new Map();

const server = http.createServer((req, res) => {
  const port = server.address().port;
  const session = req.headers['mcp-session-id'];
  let token = session === undefined ? undefined : bySession.get(session);
  if (token === undefined) token = tokens[next % tokens.length];
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  for (const host of [`127.0.0.1:${port}`, `localhost:${port}`]) {
    const gateway = host.replace(`:${port}`, `:${target.port}`);
    if (headers.host === host) headers.host = gateway;
    if (headers.origin === `http://${host}`) headers.origin = `http://${gateway}`;
  }
  const path = req.url.replace(/^\/mcp/, target.pathname);
  const forwarded = http.request(
    { hostname: target.hostname, port: target.port, method: req.method, path, headers },
    (answer) => {
      const opened = answer.headers['mcp-session-id'];
      if (opened !== undefined && !bySession.has(opened)) {
        bySession.set(opened, token);
        next += 1;
      }
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    },
  );
  forwarded.on('error', (e) => {
    if (!res.headersSent) res.writeHead(502);
    res.end(String(e));
  });
  // The suite hanging up (a stream it is done with) hangs up on the gateway too.
  res.on('close', () => forwarded.destroy());
  req.pipe(forwarded);
});
server.listen(0, '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}/mcp`);
});
