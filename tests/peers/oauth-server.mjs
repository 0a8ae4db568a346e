#!/usr/bin/env node
// A remote MCP server protected by OAuth as the MCP authorization spec describes, with its own
// authorization server, written without any SDK so every step is visible: a 401 with
// `WWW-Authenticate` (resource_metadata, scope), protected resource metadata, authorization
// server metadata, dynamic client registration, the authorization code flow with PKCE (S256
// checked), refresh tokens, and a 403 `insufficient_scope` for the one tool that needs more.
// The authorization endpoint signs "person" in at once (a browser would show a login page).
//
//   node oauth-server.mjs            prints "listening <base-url>" and serves until killed
//   OAUTH_EXPIRES_IN=2               access tokens live 2 s (default 3600)
//   OAUTH_SERVER_LOG=/path           one JSON line per event: registration, authorization,
//                                    token grant, and each MCP request with the token it carried
//   OAUTH_AS_METADATA='{"token_endpoint": "http://203.0.113.7/token"}'
//                                    members put over the authorization server's metadata
//                                    (`{base}` in a value is the server's address, `{port}` its
//                                    port): a hostile one
//   OAUTH_AS_PATH=/.well-known/as    serve those members at this path instead, and name it as the
//                                    authorization server in the protected resource metadata; the
//                                    RFC 8414 address keeps the server's own honest metadata
//   OAUTH_REFRESH_DELAY_MS=1500      a refresh grant is answered this much later
//   OAUTH_REFUSE_TOKENS=1            every token is refused (`invalid_token`), however fresh: a
//                                    server that sends the person to sign in again and again
//   OAUTH_SESSIONS=1                 keep sessions (`Mcp-Session-Id`) and serve a quiet standalone
//                                    stream (GET) to a client holding a good token (else GET is 405)
//
// Tools: `whoami` (scope notes:read) answers with the token's scopes; `write_note` needs
// notes:write too. `POST /revoke` revokes one token (RFC 7009, named in the metadata as
// `revocation_endpoint`). `POST /revoke-all` revokes every token, `POST /revoke-access` every access
// token, `POST /metadata` with `{"members": ..., "at": ...}` sets OAUTH_AS_METADATA and
// OAUTH_AS_PATH from then on (the tests' levers). Token grants are logged with the Host they
// were sent to.

import { createServer } from 'node:http';
import { appendFileSync } from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';

const expiresIn = Number(process.env.OAUTH_EXPIRES_IN || 3600);
const keepsSessions = process.env.OAUTH_SESSIONS === '1';
const log = (m) => {
  if (process.env.OAUTH_SERVER_LOG) appendFileSync(process.env.OAUTH_SERVER_LOG, JSON.stringify(m) + '\n');
};

let base = '';
const codes = new Map(); // code -> {challenge, scope, redirectUri, clientId}
const tokens = new Map(); // access token -> {scope, expiresAt}
const refreshes = new Map(); // refresh token -> scope
let next = 1;

const json = (res, status, body, headers = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};
const body = (req) => new Promise((resolve) => {
  let data = '';
  req.on('data', (c) => (data += c));
  req.on('end', () => resolve(data));
});
const challenge = (extra = '') =>
  `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp", scope="notes:read"${extra}`;

const tools = [
  { name: 'whoami', description: 'Who the token belongs to, and its scopes', inputSchema: { type: 'object' } },
  { name: 'write_note', description: 'Writes a note (needs notes:write)', inputSchema: { type: 'object' } },
];

async function mcp(req, res) {
  const auth = req.headers.authorization || '';
  const token = auth.startsWith('Bearer ') ? auth.slice(7) : '';
  const granted = tokens.get(token);
  const text = await body(req);
  let m;
  try { m = JSON.parse(text); } catch { return json(res, 400, { error: 'parse' }); }
  log({ event: 'mcp', method: m.method, id: m.id ?? null, token: token || null });
  if (!granted || granted.expiresAt < Date.now() || process.env.OAUTH_REFUSE_TOKENS === '1') {
    return json(res, 401, { error: 'invalid_token' }, { 'www-authenticate': challenge(', error="invalid_token"') });
  }
  if (m.id === undefined) { res.writeHead(202); return res.end(); }
  const reply = (result) => json(res, 200, { jsonrpc: '2.0', id: m.id, result });
  switch (m.method) {
    case 'initialize':
      return json(res, 200, {
        jsonrpc: '2.0',
        id: m.id,
        result: {
          protocolVersion: '2025-11-25',
          capabilities: { tools: {} },
          serverInfo: { name: 'oauth-notes', version: '1.0.0' },
        },
      }, keepsSessions ? { 'mcp-session-id': `notes-session-${next++}` } : {});
    case 'ping':
      return reply({});
    case 'tools/list':
      return reply({ tools });
    case 'tools/call':
      if (m.params?.name === 'write_note' && !granted.scope.split(' ').includes('notes:write')) {
        return json(res, 403, { error: 'insufficient_scope' }, {
          'www-authenticate': `Bearer error="insufficient_scope", scope="notes:read notes:write", resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`,
        });
      }
      return reply({ content: [{ type: 'text', text: `person, scopes: ${granted.scope}` }] });
    default:
      return json(res, 200, { jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'Method not found' } });
  }
}

const server = createServer(async (req, res) => {
  const url = new URL(req.url, base);
  if (req.method === 'POST' && url.pathname === '/mcp') return mcp(req, res);
  // The tests' lever: every token and refresh token stops working (as when the person
  // revokes the app's access at the provider).
  if (req.method === 'POST' && url.pathname === '/revoke-all') {
    tokens.clear();
    refreshes.clear();
    log({ event: 'revoked' });
    res.writeHead(204);
    return res.end();
  }
  // Only the access tokens stop working (a provider that revokes them early); refreshing works.
  if (req.method === 'POST' && url.pathname === '/metadata') {
    const lever = JSON.parse((await body(req)) || '{}');
    process.env.OAUTH_AS_METADATA = lever.members;
    process.env.OAUTH_AS_PATH = lever.at;
    res.writeHead(204);
    return res.end();
  }
  if (req.method === 'POST' && url.pathname === '/revoke-access') {
    tokens.clear();
    log({ event: 'revoked-access' });
    res.writeHead(204);
    return res.end();
  }
  if (req.method === 'GET' && url.pathname === '/mcp') {
    if (!keepsSessions) { res.writeHead(405); return res.end(); }
    const auth = req.headers.authorization || '';
    const granted = tokens.get(auth.startsWith('Bearer ') ? auth.slice(7) : '');
    if (!granted || granted.expiresAt < Date.now()) {
      return json(res, 401, { error: 'invalid_token' }, { 'www-authenticate': challenge(', error="invalid_token"') });
    }
    log({ event: 'stream' });
    // Quiet: held open until the client goes.
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.flushHeaders();
    return;
  }
  if (req.method === 'DELETE' && url.pathname === '/mcp') { res.writeHead(200); return res.end(); }
  if (req.method === 'GET' && url.pathname === '/.well-known/oauth-protected-resource/mcp') {
    return json(res, 200, {
      resource: `${base}/mcp`,
      authorization_servers: [process.env.OAUTH_AS_PATH ? `${base}${process.env.OAUTH_AS_PATH}` : base],
      scopes_supported: ['notes:read', 'notes:write'],
    });
  }
  const asPath = process.env.OAUTH_AS_PATH;
  if (req.method === 'GET' && (url.pathname === '/.well-known/oauth-authorization-server' || url.pathname === asPath)) {
    const members = !asPath || url.pathname === asPath ? (process.env.OAUTH_AS_METADATA || '{}') : '{}';
    const port = new URL(base).port;
    return json(res, 200, {
      issuer: base,
      authorization_endpoint: `${base}/authorize`,
      token_endpoint: `${base}/token`,
      revocation_endpoint: `${base}/revoke`,
      registration_endpoint: `${base}/register`,
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
      scopes_supported: ['notes:read', 'notes:write'],
      ...JSON.parse(members.replaceAll('{base}', base).replaceAll('{port}', port)),
    });
  }
  if (req.method === 'POST' && url.pathname === '/register') {
    const reg = JSON.parse((await body(req)) || '{}');
    log({ event: 'register', client_name: reg.client_name, redirect_uris: reg.redirect_uris });
    return json(res, 201, { client_id: 'client-1', redirect_uris: reg.redirect_uris || [], token_endpoint_auth_method: 'none' });
  }
  if (req.method === 'GET' && url.pathname === '/authorize') {
    const q = url.searchParams;
    const redirect = q.get('redirect_uri');
    log({ event: 'authorize', scope: q.get('scope'), resource: q.get('resource'), method: q.get('code_challenge_method') });
    if (q.get('code_challenge_method') !== 'S256' || !q.get('code_challenge') || !redirect) {
      return json(res, 400, { error: 'invalid_request' });
    }
    const code = `code-${next++}`;
    codes.set(code, { challenge: q.get('code_challenge'), scope: q.get('scope') || 'notes:read', redirect });
    const back = new URL(redirect);
    back.searchParams.set('code', code);
    back.searchParams.set('state', q.get('state') || '');
    res.writeHead(302, { location: back.toString() });
    return res.end();
  }
  // RFC 7009: the token named stops working (a refresh token takes its access tokens along,
  // as the RFC allows; here only itself). Unknown tokens are answered 200 too, as the RFC says.
  if (req.method === 'POST' && url.pathname === '/revoke') {
    const form = new URLSearchParams(await body(req));
    const token = form.get('token') || '';
    const known = tokens.delete(token) || refreshes.delete(token);
    log({ event: 'revoke', token, hint: form.get('token_type_hint'), client_id: form.get('client_id'), known });
    if (!token) return json(res, 400, { error: 'invalid_request' });
    res.writeHead(200);
    return res.end();
  }
  if (req.method === 'POST' && url.pathname === '/token') {
    const form = new URLSearchParams(await body(req));
    const grant = form.get('grant_type');
    let scope;
    if (grant === 'authorization_code') {
      const entry = codes.get(form.get('code'));
      codes.delete(form.get('code'));
      const verifier = form.get('code_verifier') || '';
      const computed = createHash('sha256').update(verifier).digest('base64url');
      if (!entry || computed !== entry.challenge) {
        log({ event: 'token', grant, ok: false, host: req.headers.host });
        return json(res, 400, { error: 'invalid_grant' });
      }
      scope = entry.scope;
    } else if (grant === 'refresh_token') {
      await new Promise((done) => setTimeout(done, Number(process.env.OAUTH_REFRESH_DELAY_MS || 0)));
      scope = refreshes.get(form.get('refresh_token'));
      if (!scope) {
        log({ event: 'token', grant, ok: false, host: req.headers.host });
        return json(res, 400, { error: 'invalid_grant' });
      }
    } else {
      return json(res, 400, { error: 'unsupported_grant_type' });
    }
    const access = `at-${next++}-${randomBytes(6).toString('hex')}`;
    const refresh = `rt-${next++}-${randomBytes(6).toString('hex')}`;
    tokens.set(access, { scope, expiresAt: Date.now() + expiresIn * 1000 });
    refreshes.set(refresh, scope);
    log({ event: 'token', grant, ok: true, access, refresh, host: req.headers.host });
    return json(res, 200, { access_token: access, token_type: 'Bearer', expires_in: expiresIn, refresh_token: refresh, scope });
  }
  res.writeHead(404);
  res.end();
});

server.listen(0, '127.0.0.1', () => {
  base = `http://127.0.0.1:${server.address().port}`;
  process.stdout.write(`listening ${base}\n`);
});
