// The Connect agents page (gateway status, Pause / Resume, servers, the shared token file, agents
// with their own tokens: create, shown once with snippets and Copy, revoke) and the
// remembered decisions in Settings (Revoke).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

import { launch, openApp, UI_DIR } from "./support/app.mjs";
import { agentConfigs, agentView, gatewayInfo, importPreview, rememberedDecision, rewritePreview, rewriteView, server, sharedAgent } from "./support/fixtures.mjs";

const IMG = "<img src=x onerror=window.__pwned=1>";
const SCRIPT = "<script>window.__pwned=1</script>";

let env;
before(async () => {
  env = await launch();
});
after(async () => {
  await env?.close();
});

const state = (o = {}) => ({
  servers: [server("demo"), server("tickets")],
  tools: { demo: [], tickets: [] },
  gateway: gatewayInfo(),
  agentConfigs: agentConfigs(),
  ...o,
});

async function openConnect(backendState, options) {
  const app = await openApp(env, backendState, options);
  await app.page.getByRole("tab", { name: "Connect agents" }).click();
  await app.page.locator(".gateway-state").waitFor();
  return app;
}

/** Creates an agent named `name` on the open Connect page; its panel once shown. */
async function createAgent(page, name) {
  const agents = page.getByRole("region", { name: "Agents", exact: true });
  await agents.getByRole("textbox", { name: "Agent name" }).fill(name);
  await agents.getByRole("button", { name: "Create token" }).click();
  await agents.locator(".agent-new").waitFor();
  return agents;
}

test("Connect agents shows where the gateway listens, the servers, the shared token file and the agents", async () => {
  const app = await openConnect(state({ gateway: gatewayInfo({ agents: [
    sharedAgent({ lastUsedMs: Date.UTC(2026, 0, 3, 8, 0, 0) }),
    agentView("0123456789abcdef", "Cursor"),
  ] }) }));
  const { page } = app;
  const panel = page.getByRole("tabpanel", { name: "Connect agents" });
  assert.equal(await panel.getByRole("heading", { level: 2 }).textContent(), "Connect agents");
  const gateway = panel.getByRole("region", { name: "Gateway status" });
  assert.match(await gateway.textContent(), /Listening at http:\/\/127\.0\.0\.1:47717/);
  assert.match(await gateway.textContent(), /Shared token file: \/home\/me\/\.local\/share\/countersign\/gateway-token/);
  assert.equal(await gateway.getByRole("button", { name: "Pause" }).count(), 1);
  const servers = await panel.getByRole("region", { name: "Servers through the gateway" }).getByRole("listitem").allTextContents();
  assert.deepEqual(servers, ["demo http://127.0.0.1:47717/mcp/demo", "tickets http://127.0.0.1:47717/mcp/tickets"]);

  const agents = panel.getByRole("region", { name: "Agents", exact: true });
  assert.match(await agents.textContent(), /Agents set up earlier use the shared token and keep working\. To move one to its own token: create a token for it here, paste its new snippet in place of the old entries, and once no agent uses the shared token any more, revoke the shared token\./);
  const rows = (await agents.getByRole("listitem").allTextContents()).map((t) => t.replace(/\s*Revoke\s*$/, ""));
  assert.equal(rows.length, 2);
  assert.match(rows[0], /^Shared token \(older setups\) \(made before agents had their own; last used /);
  assert.match(rows[1], /^Cursor \(created .*; not used since Countersign started\)$/);
  // No token is on the page until one is made.
  assert.equal(await agents.locator(".agent-new").count(), 0);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("Copy puts a new agent's snippet on the clipboard; where the clipboard is refused, it selects it for Ctrl+C", async () => {
  const app = await openConnect(state());
  const { page, context } = app;
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(env.url).origin });
  const agents = await createAgent(page, "Cursor");
  const made = app.backend.calls.filter((c) => c.cmd === "create_agent");
  assert.deepEqual(made.map((c) => c.args), [{ name: "Cursor" }]);
  const token = Object.values(app.backend.tokens)[0];
  const card = agents.getByRole("article", { name: "Cursor", exact: true });
  const cursorSnippet = await card.locator("pre").textContent();
  assert.ok(cursorSnippet.includes(`Bearer ${token}`), cursorSnippet);
  await card.getByRole("button", { name: "Copy" }).click();
  await card.getByRole("status").getByText("Copied.").waitFor();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), cursorSnippet);

  // The clipboard API refuses: the text is selected and the person is told to press Ctrl+C.
  await page.evaluate(() => {
    navigator.clipboard.writeText = () => Promise.reject(new DOMException("denied", "NotAllowedError"));
  });
  const claudeCard = agents.getByRole("article", { name: "Claude Code" });
  const claudeSnippet = await claudeCard.locator("pre").textContent();
  await claudeCard.getByRole("button", { name: "Copy" }).click();
  await claudeCard.getByRole("status").getByText(/press Ctrl\+C/).waitFor();
  assert.equal(await page.evaluate(() => window.getSelection().toString()), claudeSnippet);
  assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("aria-label")), "Claude Code snippet");
  await app.close();
});

test("a server's name the hosts cannot take is said apart from Countersign's note, as that name", async () => {
  const odd = `my desk. This token is safe to share. ${IMG}`;
  const app = await openConnect(state({ gateway: gatewayInfo({ servers: ["demo", odd] }) }));
  const { page } = app;
  await page.evaluate(() => { window.__pwned = undefined; });
  const agents = await createAgent(page, "Cursor");
  const cursor = agents.locator(".agent-new").getByRole("article", { name: "Cursor" });
  assert.doesNotMatch(await cursor.locator(".client-note").textContent(), /safe to share/);
  const renamed = cursor.locator(".client-renamed");
  assert.deepEqual(await renamed.locator("code").allTextContents(), [odd, odd.replace(/[^A-Za-z0-9_-]/g, "-")]);
  assert.equal(await renamed.locator("code .untrusted").count(), 2);
  assert.equal(await renamed.locator("img").count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  await app.close();
});

test("a new agent's token is shown once with its snippets, never again; Revoke asks first; a hostile name stays text", async () => {
  const hostile = `Evil ${IMG}`;
  const app = await openConnect(state());
  const { page, backend } = app;
  await page.evaluate(() => { window.__pwned = undefined; });
  const agents = await createAgent(page, hostile);
  const token = Object.values(backend.tokens)[0];
  const created = agents.locator(".agent-new");
  assert.equal(await created.getByRole("heading", { level: 4 }).first().textContent(), `Token for ${hostile}`);
  assert.equal(await created.locator("pre[aria-label='The new token']").textContent(), token);
  assert.match(await created.textContent(), /This is the only time Countersign shows this token: you will not see it again/);
  // Every host's snippet carries this agent's token, Claude Desktop's in the bridge's env.
  const desktop = JSON.parse(await created.getByRole("article", { name: "Claude Desktop" }).locator("pre").textContent());
  assert.equal(desktop.mcpServers.demo.env.COUNTERSIGN_TOKEN, token);
  assert.ok((await created.getByRole("article", { name: "Cursor" }).locator("pre").textContent()).includes(token));
  // Gemini CLI and Codex: their own commands, user-wide, each with its note.
  const gemini = created.getByRole("article", { name: "Gemini CLI" });
  const geminiLines = (await gemini.locator("pre").textContent()).split("\n");
  assert.deepEqual(geminiLines.slice(2), [
    `export COUNTERSIGN_TOKEN_GEMINI=${token}`,
    "gemini mcp add --scope user --transport http demo http://127.0.0.1:47717/mcp/demo --header 'Authorization: Bearer ${COUNTERSIGN_TOKEN_GEMINI}'",
    "gemini mcp add --scope user --transport http tickets http://127.0.0.1:47717/mcp/tickets --header 'Authorization: Bearer ${COUNTERSIGN_TOKEN_GEMINI}'",
  ]);
  assert.match(await gemini.locator(".client-note").textContent(), /default \(project\) scope writes into the project's \.gemini\/settings\.json, a file that gets committed/);
  const codex = created.getByRole("article", { name: "Codex" });
  const codexLines = (await codex.locator("pre").textContent()).split("\n");
  assert.equal(codexLines.length, 5);
  assert.equal(codexLines[2], `export COUNTERSIGN_TOKEN_CODEX=${token}; unset COUNTERSIGN_TOKEN`);
  assert.equal(codexLines[3], "codex mcp remove demo >/dev/null 2>&1; codex mcp add demo --url http://127.0.0.1:47717/mcp/demo --bearer-token-env-var COUNTERSIGN_TOKEN_CODEX");
  assert.match(await codex.locator(".client-where").textContent(), /~\/\.codex\/config\.toml/);
  assert.match(await codex.locator(".client-note").textContent(), /not in Codex's config file/);
  assert.match(await created.getByRole("article", { name: "Claude Code" }).locator("pre").textContent(), /^claude mcp remove --scope user demo 2>\/dev\/null; claude mcp add --scope user --transport http demo /);
  // Copy token puts exactly the token on the clipboard.
  await app.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(env.url).origin });
  await created.getByRole("button", { name: "Copy token" }).click();
  await created.getByText("Copied.").first().waitFor();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), token);

  // Listed by name, as text; the list never carries the token.
  const row = agents.getByRole("listitem").filter({ hasText: hostile });
  await row.waitFor();
  assert.match(await row.textContent(), /created .*; not used since Countersign started/);
  assert.equal(await agents.getByRole("textbox", { name: "Agent name" }).inputValue(), "");

  // Done: the token is gone from the page, and a reload does not bring it back.
  await created.getByRole("button", { name: "Done" }).click();
  assert.equal(await agents.locator(".agent-new").count(), 0);
  const read = backend.calls.filter((c) => c.cmd === "gateway_info").length;
  await page.getByRole("tabpanel", { name: "Connect agents" }).getByRole("button", { name: "Refresh" }).click();
  // Drawn again from what the backend says now (the page says "Loading…" until then).
  await page.waitForFunction(() => ![...document.querySelectorAll(".connect p[role=status]")]
    .some((p) => p.textContent === "Loading…"));
  assert.ok(backend.calls.filter((c) => c.cmd === "gateway_info").length > read, "Refresh read the gateway again");
  await agents.getByRole("listitem").filter({ hasText: hostile }).waitFor();
  assert.equal((await page.locator(".connect").textContent()).includes(token), false);

  // Revoke asks first; Keep leaves it.
  await row.getByRole("button", { name: "Revoke", exact: true }).click();
  const confirm = row.getByRole("group", { name: "Confirm revoke" });
  assert.equal(await confirm.textContent(), `Revoke ${hostile}? This agent is refused from its next request. Revoke token Keep`);
  await confirm.getByRole("button", { name: "Keep" }).click();
  assert.equal(backend.calls.filter((c) => c.cmd === "revoke_agent").length, 0);
  assert.equal(await row.getByRole("button", { name: "Revoke", exact: true }).isEnabled(), true);
  // Then for real: gone from the list, the shared token stays.
  await row.getByRole("button", { name: "Revoke", exact: true }).click();
  await row.getByRole("button", { name: "Revoke token" }).click();
  await agents.getByRole("status").getByText(`Revoked ${hostile}.`).waitFor();
  const id = Object.keys(backend.tokens)[0];
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "revoke_agent").map((c) => c.args), [{ id }]);
  assert.deepEqual((await agents.getByRole("listitem").allTextContents()).map((t) => t.split(" (made")[0]), ["Shared token (older setups)"]);

  // Revoking the shared token warns that every older setup stops.
  const shared = agents.getByRole("listitem").first();
  await shared.getByRole("button", { name: "Revoke", exact: true }).click();
  assert.match(await shared.getByRole("group", { name: "Confirm revoke" }).textContent(), /Every agent still using the shared token is refused/);
  // A failure is shown beside the row, which stays.
  backend.onAgentTokens = (cmd) => cmd === "revoke_agent" ? { err: { kind: "agent", message: `cannot write agents.json ${SCRIPT}` } } : null;
  await shared.getByRole("button", { name: "Revoke token" }).click();
  await shared.getByText(`Could not revoke: cannot write agents.json ${SCRIPT}`).waitFor();
  // A blank name is not sent; a name the backend refuses says why, as text.
  await agents.getByRole("textbox", { name: "Agent name" }).fill("   ");
  await agents.getByRole("button", { name: "Create token" }).click();
  await agents.getByText("Give the agent a name first.").waitFor();
  backend.onAgentTokens = (cmd) => cmd === "create_agent" ? { err: { kind: "agent", message: `there are already 64 agents ${IMG}` } } : null;
  await agents.getByRole("textbox", { name: "Agent name" }).fill("One more");
  await agents.getByRole("button", { name: "Create token" }).click();
  await agents.getByText(`Could not create the token: there are already 64 agents ${IMG}`).waitFor();
  assert.equal(backend.calls.filter((c) => c.cmd === "create_agent").length, 2);

  assert.equal(await page.locator(".connect").locator("img,script").count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("refused connections are listed with the client, the status, what was wrong and what to do, as text", async () => {
  const refusals = [
    { atMs: Date.now(), status: 401, reason: "wrong or revoked bearer token: create a token for this agent", client: `claude-code/2.1 ${IMG}`, path: "/mcp/demo" },
    { atMs: Date.now() - 5000, status: 404, reason: "no server by that name on this gateway", client: null, path: `/mcp/${SCRIPT}` },
  ];
  const app = await openConnect(state({ gateway: gatewayInfo({ refusals }) }));
  const { page } = app;
  const section = page.getByRole("region", { name: "Refused connections" });
  const items = section.locator("li");
  assert.equal(await items.count(), 2);
  const first = await items.nth(0).textContent();
  assert.match(first, /401/);
  assert.match(first, /wrong or revoked bearer token/);
  assert.ok(first.includes(`claude-code/2.1 ${IMG}`), first);
  const second = await items.nth(1).textContent();
  assert.match(second, /404/);
  assert.match(second, /a client that gave no name/);
  assert.ok(second.includes(SCRIPT), second);
  assert.equal(await page.locator(".refusals img, .refusals script").count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  await app.close();
});

test("no refusals: says so", async () => {
  const app = await openConnect(state());
  const section = app.page.getByRole("region", { name: "Refused connections" });
  assert.match(await section.textContent(), /None since Countersign started/);
  await app.close();
});

test("Pause and Resume call set_gateway_paused and the status follows", async () => {
  const app = await openConnect(state());
  const { page, backend } = app;
  const gateway = page.getByRole("region", { name: "Gateway status" });
  await gateway.getByRole("button", { name: "Pause" }).click();
  await gateway.getByRole("button", { name: "Resume" }).waitFor();
  assert.match(await gateway.textContent(), /Paused Every agent request is refused until you resume/);
  assert.doesNotMatch(await gateway.textContent(), /Listening/);
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Resume", "focus stays on the button");
  await gateway.getByRole("button", { name: "Resume" }).click();
  await gateway.getByRole("button", { name: "Pause" }).waitFor();
  assert.match(await gateway.textContent(), /Listening at/);
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "set_gateway_paused").map((c) => c.args),
    [{ paused: true }, { paused: false }]);

  // A refusal is shown beside the button, which stays as it was.
  backend.onGateway = () => ({ err: { kind: "gateway", message: "the gateway is not running" } });
  await gateway.getByRole("button", { name: "Pause" }).click();
  await gateway.getByText("Could not pause: the gateway is not running").waitFor();
  assert.equal(await gateway.getByRole("button", { name: "Pause" }).isEnabled(), true);
  await app.close();
});

test("a pause from the tray redraws the page, and the focus stays on the button", async () => {
  const app = await openConnect(state());
  const { page, backend } = app;
  const gateway = page.getByRole("region", { name: "Gateway status" });
  await gateway.getByRole("button", { name: "Pause" }).focus();
  await backend.pauseFromTray(true);
  await gateway.getByRole("button", { name: "Resume" }).waitFor();
  assert.match(await gateway.textContent(), /Paused Every agent request is refused until you resume/);
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Resume");
  await backend.pauseFromTray(false);
  await gateway.getByRole("button", { name: "Pause" }).waitFor();
  assert.match(await gateway.textContent(), /Listening at/);
  // The tray changed it: the page asked for nothing but the new state.
  assert.equal(backend.calls.filter((c) => c.cmd === "set_gateway_paused").length, 0);
  await app.close();
});

test("no gateway: the AppError's message; not listening: its error; turned off: says so", async () => {
  let app = await openConnect(state({ gateway: null, gatewayError: { kind: "gateway", message: `cannot bind 127.0.0.1:47717: Address already in use ${IMG}` } }));
  let gateway = app.page.getByRole("region", { name: "Gateway status" });
  assert.equal(await gateway.textContent(), `Not running cannot bind 127.0.0.1:47717: Address already in use ${IMG}`);
  assert.equal(await app.page.getByRole("button", { name: "Pause" }).count(), 0);
  // Fixed (say, the other program quit) and refreshed by hand.
  app.backend.gatewayError = null;
  app.backend.gateway = gatewayInfo();
  await app.page.getByRole("tabpanel", { name: "Connect agents" }).getByRole("button", { name: "Refresh" }).click();
  await gateway.getByText(/Listening at/).waitFor();
  await app.close();

  app = await openConnect(state({ gateway: gatewayInfo({ error: "port 47717 is taken" }) }));
  gateway = app.page.getByRole("region", { name: "Gateway status" });
  assert.match(await gateway.textContent(), /Not running port 47717 is taken/);
  assert.equal(await gateway.getByRole("button", { name: /Pause|Resume/ }).count(), 0);
  await app.close();

  app = await openConnect(state({ gateway: gatewayInfo({ enabled: false }) }));
  assert.match(await app.page.getByRole("region", { name: "Gateway status" }).textContent(), /Off The gateway is turned off in the config/);
  await app.close();
});

test("markup in server names, snippets and paths shows as text", async () => {
  const info = gatewayInfo({ servers: [`s${IMG}`], agents: [sharedAgent(), agentView("0123456789abcdef", `a${SCRIPT}`)] });
  info.tokenPath = `/tmp/${SCRIPT}`;
  const app = await openConnect(state({ gateway: info }));
  const { page } = app;
  const text = await page.locator(".connect").textContent();
  for (const literal of [`s${IMG}`, `/tmp/${SCRIPT}`, `a${SCRIPT}`]) {
    assert.ok(text.includes(literal), literal);
  }
  assert.equal(await page.locator(".connect").locator("img,script").count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  await app.close();
});

const NOW = Date.UTC(2026, 0, 5, 10, 0, 0);
const allowed = [
  rememberedDecision(1, { agentName: "Claude Code", server: "tickets", tool: "delete_ticket", lastUsedMs: NOW, uses: 3,
    covering: { kind: "anyArguments", alsoSent: `{"x-force":"${IMG}"}` } }),
  rememberedDecision(2, { agent: "a2", agentName: "Cursor", server: "github", tool: "create_issue", allow: false,
    lasting: { kind: "session" }, covering: { kind: "exactArguments", arguments: '{"repo":"me/x"}' }, session: 4 }),
  rememberedDecision(7, { agent: "a3", agentName: "", server: `gh${IMG}`, tool: `t${SCRIPT}`,
    lasting: { kind: "until", untilMs: Date.UTC(2026, 0, 6, 23, 0, 0) }, covering: { kind: "pathUnder", argument: `p${IMG}`, prefix: "/home/me/p" } }),
  rememberedDecision(9, { agent: "a1", agentName: "Claude Code", server: "web", tool: "fetch",
    covering: { kind: "urlHost", argument: "url", host: "api.github.com" }, uses: 1, lastUsedMs: NOW }),
];

test("Settings tells apart two tokens the person gave one name, by when each was created", async () => {
  const remembered = [
    rememberedDecision(1, { agent: "a1", agentName: "Claude Code", tool: "delete_ticket" }),
    rememberedDecision(2, { agent: "a2", agentName: "Claude Code", tool: "close_ticket" }),
    rememberedDecision(3, { agent: "a3", agentName: "Cursor", tool: "list_tickets" }),
  ];
  const agents = [sharedAgent(),
    agentView("a1", "Claude Code", { createdMs: Date.UTC(2026, 0, 1, 9, 30, 0) }),
    agentView("a2", "Claude Code", { createdMs: Date.UTC(2026, 0, 3, 16, 0, 0) }),
    agentView("a3", "Cursor")];
  const app = await openApp(env, { ...state({ gateway: gatewayInfo({ agents }) }), settings: { mutedServers: [], remembered } });
  const { page } = app;
  await page.getByRole("tab", { name: "Settings" }).click();
  const section = page.getByRole("region", { name: "Remembered decisions" });
  await section.getByRole("listitem").first().waitFor();
  const what = await section.locator(".remembered-what").allTextContents();
  // (The harness runs in Europe/Berlin.)
  assert.match(what[0], /^Claude Code \(token created Jan 1, 2026, 10:30:00\sAM\) may run delete_ticket on tickets$/);
  assert.match(what[1], /^Claude Code \(token created Jan 3, 2026, 5:00:00\sPM\) may run close_ticket on tickets$/);
  // A name only one token has needs nothing more.
  assert.equal(what[2], "Cursor may run list_tickets on tickets");
  await app.close();
});

test("Settings lists the remembered decisions; Revoke forgets one by id and its row goes", async () => {
  const app = await openApp(env, { ...state(), settings: { mutedServers: [], remembered: structuredClone(allowed) } });
  const { page, backend } = app;
  await page.getByRole("tab", { name: "Settings" }).click();
  const section = page.getByRole("region", { name: "Remembered decisions" });
  const rows = section.getByRole("listitem");
  await rows.first().waitFor();
  assert.deepEqual(await section.locator(".remembered-what").allTextContents(), [
    "Claude Code may run delete_ticket on tickets",
    "Cursor may not run create_issue on github",
    `An agent with no name may run t${SCRIPT} on gh${IMG}`,
    "Claude Code may run fetch on web",
  ]);
  const scopes = await section.locator(".remembered-scope").allTextContents();
  // The fields beyond the model the decision was made with (the agent's text: shown as text).
  assert.equal(scopes[0], `Allowed always · any arguments, with {"x-force":"${IMG}"} also sent`);
  assert.equal(scopes[1], 'Denied for the agent\'s session · exactly {"repo":"me/x"}');
  // The moment in the person's time zone (the harness runs in Europe/Berlin: UTC+1 in January).
  assert.match(scopes[2], /^Allowed until Jan 7, 2026, 12:00:00\sAM · “p<img src=x onerror=window.__pwned=1>”: any path under \/home\/me\/p$/);
  assert.equal(scopes[3], "Allowed always · “url”: any URL on api.github.com");
  const uses = await section.locator(".remembered-use").allTextContents();
  assert.match(uses[0], /^Last used Jan 5, 2026, 11:00:00\sAM, 3 uses$/);
  assert.equal(uses[1], "Not used yet (0 uses)");
  assert.match(uses[3], /, 1 use$/);
  // Each Revoke button is described by its row's sentence and scope.
  const second = rows.nth(1).getByRole("button", { name: "Revoke" });
  const describedBy = await second.getAttribute("aria-describedby");
  assert.equal(await page.evaluate((ids) => ids.split(" ").map((id) => document.getElementById(id).textContent).join(" | "), describedBy),
    'Cursor may not run create_issue on github | Denied for the agent\'s session · exactly {"repo":"me/x"}');

  await second.click();
  await page.waitForFunction(() => document.querySelectorAll(".allowed-list li").length === 3);
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "revoke_decision").map((c) => c.args), [{ id: 2 }]);
  assert.doesNotMatch(await section.textContent(), /Cursor/);
  assert.match(await section.getByRole("status").textContent(), /Revoked/);
  // Focus moves to the row that took its place.
  assert.ok((await page.evaluate(() => document.activeElement?.closest("li")?.textContent)).startsWith(`An agent with no name may run t${SCRIPT} on gh${IMG}`));

  // A failed revoke keeps the row and says why.
  backend.onGateway = () => ({ err: { kind: "settings", message: "cannot save settings: read-only" } });
  await rows.first().getByRole("button", { name: "Revoke" }).click();
  await section.getByText("Could not revoke: cannot save settings: read-only").waitFor();
  assert.equal(await rows.count(), 3);
  backend.onGateway = null;

  // The last ones go: the empty state, focus on the heading.
  for (const left of [2, 1, 0]) {
    await rows.first().getByRole("button", { name: "Revoke" }).click();
    await page.waitForFunction((n) => document.querySelectorAll(".allowed-list li").length === n, left);
  }
  await section.getByText(/Nothing is remembered/).waitFor();
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Remembered decisions");
  assert.deepEqual(backend.settings.remembered, []);
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "revoke_decision").map((c) => c.args.id), [2, 1, 1, 7, 9]);
  assert.equal(await page.locator(".settings").locator("img,script").count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("Settings says which remembered decisions decide nothing now, and why", async () => {
  const decisions = [
    rememberedDecision(1, { server: "tickets" }),
    rememberedDecision(2, { server: `gh${IMG}`, inert: "serverChanged" }),
    rememberedDecision(3, { server: "old", inert: "serverGone" }),
    rememberedDecision(4, { server: "older", inert: "unbound" }),
  ];
  const app = await openApp(env, { ...state(), settings: { mutedServers: [], remembered: decisions } });
  const { page } = app;
  await page.getByRole("tab", { name: "Settings" }).click();
  const section = page.getByRole("region", { name: "Remembered decisions" });
  const rows = section.getByRole("listitem");
  await rows.first().waitFor();
  const inert = await section.locator(".remembered-inert").allTextContents();
  assert.deepEqual(inert, [
    `Decides nothing now: gh${IMG} is configured differently since (another command, arguments, environment, directory, URL or headers). Its next such call asks you.`,
    "Decides nothing now: no server named old is configured.",
    "Decides nothing: it was made before Countersign tied each decision to the server it was made for, and no server of its name was configured to tie it to.",
  ]);
  assert.deepEqual(await rows.evaluateAll((li) => li.map((l) => l.classList.contains("inert"))), [false, true, true, true]);
  // A screen reader hears why with the row's Revoke button.
  const describedBy = await rows.nth(2).getByRole("button", { name: "Revoke" }).getAttribute("aria-describedby");
  assert.match(await page.evaluate((ids) => ids.split(" ").map((id) => document.getElementById(id).textContent).join(" | "), describedBy),
    /\| Decides nothing now: no server named old is configured\.$/);
  assert.equal(await page.locator(".settings").locator("img,script").count(), 0);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("Settings says whose allows wait on decisions it cannot read, and forgets them on request", async () => {
  const app = await openApp(env, {
    ...state(),
    settings: {
      mutedServers: [], remembered: [rememberedDecision(1, { server: "tickets" })],
      unreadShown: [
        { agentName: "Claude Code", server: "tickets", tool: "delete_ticket", allow: false },
        { agentName: null, server: `gh${IMG}`, tool: null, allow: null },
      ],
    },
  });
  const { page } = app;
  await page.getByRole("tab", { name: "Settings" }).click();
  const section = page.getByRole("region", { name: "Remembered decisions" });
  const forget = section.getByRole("button", { name: "Forget them" });
  await forget.waitFor();
  const note = await section.locator(".held-back").textContent();
  assert.match(note, /cannot be read here \(made by another version of Countersign, or kept in a file that could not be read\); one may be a denial/);
  assert.ok(note.includes(`no remembered or trusted allow runs a tool call on tickets, gh${IMG} without asking you.`), note);
  // What each one is, as far as it can be read; untrusted text stays text.
  assert.deepEqual(await section.getByRole("list", { name: "Decisions that cannot be read" }).getByRole("listitem").allTextContents(), [
    "Claude Code may not run delete_ticket on tickets",
    `An unknown agent may or may not run an unknown tool on gh${IMG}`,
  ]);
  // The button's description is the sentence, so a screen reader hears what it forgets.
  assert.match(await page.evaluate((id) => document.getElementById(id).textContent, await forget.getAttribute("aria-describedby")), /^Some remembered decisions/);
  // A failed save keeps the note and says why.
  app.backend.onGateway = () => ({ err: { kind: "settings", message: "cannot save settings: read-only" } });
  await forget.click();
  await section.getByText("Could not forget them: cannot save settings: read-only").waitFor();
  assert.ok(await forget.isEnabled());
  app.backend.onGateway = null;
  await forget.focus();
  await page.keyboard.press("Enter");
  await section.getByText(/Forgotten: remembered and trusted allows run again/).waitFor();
  assert.equal(await section.locator(".held-back").textContent(), "");
  assert.equal(await section.getByRole("listitem").count(), 1);
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Remembered decisions");
  assert.equal(app.backend.calls.filter((c) => c.cmd === "forget_unread_decisions").length, 2);
  assert.equal(await page.locator(".settings").locator("img,script").count(), 0);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("A decision that names no server holds back every server's allows", async () => {
  const app = await openApp(env, { ...state(), settings: { mutedServers: [], remembered: [],
    unreadShown: [{ agentName: null, server: null, tool: null, allow: null }, { agentName: null, server: "tickets", tool: "t", allow: false }] } });
  await app.page.getByRole("tab", { name: "Settings" }).click();
  const section = app.page.getByRole("region", { name: "Remembered decisions" });
  await section.getByText(/runs a tool call on any server without asking you\./).waitFor();
  await section.getByText(/Nothing is remembered/).waitFor();
  await app.close();
});

test("A file that could not be read holds back every server's allows, and says which file", async () => {
  const lostIn = `/home/me/.config/countersign/settings.json.bad${IMG}`;
  const app = await openApp(env, { ...state(), settings: { mutedServers: [], remembered: [],
    unreadShown: [{ agentName: null, server: null, tool: null, allow: null, lostIn }] } });
  await app.page.getByRole("tab", { name: "Settings" }).click();
  const section = app.page.getByRole("region", { name: "Remembered decisions" });
  await section.getByText(/kept in a file that could not be read/).waitFor();
  await section.getByText(/runs a tool call on any server without asking you\./).waitFor();
  assert.deepEqual(await section.getByRole("list", { name: "Decisions that cannot be read" }).getByRole("listitem").allTextContents(),
    [`Whatever was kept in ${lostIn}, which could not be read`]);
  assert.equal(await section.locator("img,script").count(), 0);
  await app.close();
});

test("Settings with nothing remembered shows the empty state", async () => {
  const app = await openApp(env, state());
  await app.page.getByRole("tab", { name: "Settings" }).click();
  await app.page.getByRole("region", { name: "Remembered decisions" }).getByText(/Nothing is remembered/).waitFor();
  await app.close();
});

// ---- Import from your agents -----------------------------------------------------------------

const VARS_WARNING = "uses ${input:key}, which VS Code fills in and Countersign does not: edit the entry after importing";

function cursorImport() {
  return importPreview("cursor", [
    ["linear", "new", "https://mcp.linear.app/mcp"],
    ["github", "renamed", "npx -y @gh/mcp", "github-cursor", "Countersign already has a different server named \"github\""],
    ["demo", "alreadyThere", "countersign-demo-server"],
    ["desk", "routed", "http://127.0.0.1:47717/mcp/desk", null, "already routed through Countersign"],
    [`old${IMG}`, "skipped", "https://old.example/sse", null, "Countersign cannot use it: the old SSE transport is not supported"],
    ["search", "new", "https://search.example/mcp", "search", null, [VARS_WARNING]],
  ], { notes: [`A note about ${SCRIPT}`] });
}

const NEW_CURSOR_TEXT = `{
  "mcpServers": {
    "linear": {
      "url": "http://127.0.0.1:47717/mcp/linear",
      "headers": {
        "Authorization": "Bearer cs_SECRET_TOKEN"
      }
    },
    "mine": {"command": "${SCRIPT}"}
  }
}
`;

function cursorRewrite() {
  return rewritePreview("cursor", {
    changes: [
      ["linear", "linear", "https://mcp.linear.app/mcp", "http://127.0.0.1:47717/mcp/linear"],
      ["gh", "github", "npx -y @gh/mcp", "http://127.0.0.1:47717/mcp/github", "Countersign serves it once restarted"],
    ],
    kept: [[`mine${IMG}`, "not in Countersign's config: import it first"]],
    warnings: ["~/.cursor/mcp.json can be read by other users of this computer. It will hold the gateway's token, so Countersign makes it readable by you only; Undo puts its permissions back."],
    newText: NEW_CURSOR_TEXT,
  });
}

async function agentCard(page, title) {
  const region = page.getByRole("region", { name: "Import from your agents" });
  const card = region.getByRole("article", { name: title });
  await card.waitFor();
  return card;
}

test("Test connection runs the host's own check and shows what it printed, as text", async () => {
  const app = await openConnect(state({
    agentConfigs: agentConfigs({ found: ["cursor", "claudeCode"], checks: { claudeCode: "claude mcp list", gemini: "gemini mcp list" } }),
  }));
  const { page, backend } = app;
  let release;
  backend.hostChecks = {
    claudeCode: new Promise((resolve) => { release = resolve; }),
    gemini: { err: { kind: "agentConfig", message: "cannot run gemini mcp list: Permission denied" } },
  };
  // Only hosts whose tool is installed offer it.
  const cursor = await agentCard(page, "Cursor");
  assert.equal(await cursor.getByRole("button", { name: "Test connection" }).count(), 0);
  const claude = await agentCard(page, "Claude Code");
  const test = claude.getByRole("button", { name: "Test connection" });
  assert.equal(await test.getAttribute("title"), "Runs claude mcp list: Claude Code's own check of its MCP servers");
  await test.click();
  assert.equal(await claude.getByRole("status").first().textContent(), "Running claude mcp list…");
  assert.equal(await test.isDisabled(), true, "one check at a time");
  release({ ok: {
    client: "claudeCode", command: "claude mcp list", exitCode: 0, timedOut: false, tookMs: 1234,
    output: `Checking MCP server health...\n\ndesk: http://127.0.0.1:47717/mcp/desk (HTTP) - ✓ Connected\n${IMG}\n`,
  } });
  await claude.locator(".agent-check-output").waitFor();
  assert.equal(await claude.locator(".agent-check p").textContent(), "claude mcp list finished in 1.2 s. What Claude Code says:");
  const said = await claude.locator(".agent-check-output").textContent();
  assert.ok(said.includes("desk: http://127.0.0.1:47717/mcp/desk (HTTP) - ✓ Connected"), said);
  assert.ok(said.includes(IMG), "the tool's words shown as text");
  assert.equal(await page.evaluate(() => window.__pwned ?? null), null);
  assert.equal(await test.isDisabled(), false);
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "check_agent_host").map((c) => c.args), [{ client: "claudeCode" }]);
  // A check that cannot run says why.
  const gemini = await agentCard(page, "Gemini CLI");
  await gemini.getByRole("button", { name: "Test connection" }).click();
  assert.equal(await gemini.getByRole("alert").textContent(), "Could not test the connection: cannot run gemini mcp list: Permission denied");
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("Import servers: a long command line, with the directory and environment it starts with, can be read whole", async () => {
  const long = `cd '/home/me/cloned repo' && GITHUB_TOKEN=… NODE_OPTIONS='--require ./x.js' ${"X=1 ".repeat(80)}npx -y server-filesystem .`;
  const preview = importPreview("cursor", [["fs", "new", long]]);
  const app = await openConnect(state({ importPreviews: { cursor: preview } }));
  const { page } = app;
  const card = await agentCard(page, "Cursor");
  await card.getByRole("button", { name: "Import servers…" }).click();
  const cell = card.getByRole("table").locator(".candidate-transport");
  await cell.waitFor();
  assert.match(await cell.textContent(), /^cd '\/home\/me\/cloned repo' && GITHUB_TOKEN=… NODE_OPTIONS='--require \.\/x\.js'/);
  assert.doesNotMatch(await cell.textContent(), /server-filesystem/);
  await card.getByRole("table").getByRole("button", { name: /^Show all/ }).click();
  assert.match(await cell.textContent(), /npx -y server-filesystem \.$/);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("Import servers: the preview lists what each server would become, the chosen ones are imported and start at once", async () => {
  const preview = cursorImport();
  const app = await openConnect(state({ importPreviews: { cursor: preview } }));
  const { page, backend } = app;
  const desktop = await agentCard(page, "Claude Desktop");
  assert.match(await desktop.textContent(), /~\/\.config\/Claude\/claude_desktop_config\.json \(not found\)/);
  assert.equal(await desktop.getByRole("button", { name: "Import servers…" }).isDisabled(), true);
  assert.equal(await desktop.getByRole("button", { name: "Route through Countersign…" }).isDisabled(), true);

  const card = await agentCard(page, "Cursor");
  assert.match(await card.locator(".client-where").textContent(), /^~\/\.cursor\/mcp\.json$/);
  await card.getByRole("button", { name: "Import servers…" }).click();
  const table = card.getByRole("table");
  await table.waitFor();
  assert.match(await table.locator("caption").textContent(), /Servers in ~\/\.cursor\/mcp\.json/);
  const rows = await table.locator("tbody tr").allTextContents();
  assert.deepEqual(rows, [
    "linearhttps://mcp.linear.app/mcpNew",
    "githubnpx -y @gh/mcpName taken: will be imported as github-cursor (Countersign already has a different server named \"github\")",
    "democountersign-demo-serverAlready there",
    "deskhttp://127.0.0.1:47717/mcp/deskAlready routed through Countersign",
    `old${IMG}https://old.example/sseSkipped (Countersign cannot use it: the old SSE transport is not supported)`,
    `searchhttps://search.example/mcpNew${VARS_WARNING}`,
  ]);
  // Importable ones are checked; the others cannot be.
  const box = (name) => card.getByRole("checkbox", { name: `Import ${name}`, exact: true });
  for (const name of ["linear", "github", "search"]) assert.equal(await box(name).isChecked(), true, name);
  for (const name of ["demo", "desk", `old${IMG}`]) {
    assert.equal(await box(name).isChecked(), false, name);
    assert.equal(await box(name).isDisabled(), true, name);
  }
  assert.match(await card.textContent(), new RegExp(`A note about ${SCRIPT.replace(/[/.()]/g, "\\$&")}`));
  assert.match(await card.textContent(), /Chosen servers are added to ~\/\.config\/countersign\/config\.json; a copy of it is kept first\./);
  assert.equal(await card.getByRole("button", { name: /^Import \d+ servers?$/ }).textContent(), "Import 3 servers");
  await box("search").uncheck();
  assert.equal(await card.getByRole("button", { name: /^Import \d+ servers?$/ }).textContent(), "Import 2 servers");
  // Nothing was written by the preview: the only calls so far are reads.
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "import_servers"), []);

  await card.getByRole("button", { name: "Import 2 servers" }).click();
  const result = card.locator(".agent-result");
  await result.waitFor();
  assert.equal(await result.textContent(),
    "Imported 2 servers into ~/.config/countersign/config.json; Countersign starts them now (see Servers).");
  assert.equal(await page.evaluate(() => document.activeElement?.classList.contains("agent-result")), true);
  assert.match(await card.textContent(), /Renamed: github as github-cursor/);
  assert.match(await card.textContent(), /The config as it was is kept as ~\/\.config\/countersign\/config\.json\.bak-1767225600000\./);
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "import_servers").map((c) => c.args),
    [{ plan: preview.plan, names: ["linear", "github"] }]);
  assert.equal(await page.locator(".connect").locator("img,script").count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("Route through Countersign: the new file text and the backup first, then the rewrite, then Undo", async () => {
  const preview = cursorRewrite();
  const app = await openConnect(state({ rewritePreviews: { cursor: preview } }));
  const { page, backend } = app;
  const card = await agentCard(page, "Cursor");
  await card.getByRole("button", { name: "Route through Countersign…" }).click();
  const pre = card.locator("pre.new-text");
  await pre.waitFor();
  assert.equal(await pre.getAttribute("aria-label"), "New text of ~/.cursor/mcp.json");
  assert.equal(await pre.textContent(), NEW_CURSOR_TEXT);
  const changes = await card.locator(".route-changes li").allTextContents();
  assert.deepEqual(changes, [
    "linear: https://mcp.linear.app/mcp → http://127.0.0.1:47717/mcp/linear",
    "gh (Countersign's github): npx -y @gh/mcp → http://127.0.0.1:47717/mcp/github (Countersign serves it once restarted)",
  ]);
  assert.deepEqual(await card.locator(".route-kept li").allTextContents(), [`mine${IMG}: not in Countersign's config: import it first`]);
  assert.match(await card.locator(".warn-note").textContent(), /can be read by other users/);
  assert.match(await card.textContent(), /Before writing, the current file is copied to ~\/\.cursor\/mcp\.json\.countersign-backup-1767225600000\./);
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "rewrite_agent_config"), [], "the preview writes nothing");

  await card.getByRole("button", { name: "Rewrite ~/.cursor/mcp.json" }).click();
  const result = card.locator(".agent-result");
  await result.getByText(/^Rewrote/).waitFor();
  assert.equal(await result.textContent(), "Rewrote ~/.cursor/mcp.json: 2 servers go through Countersign. Restart Cursor to use it.");
  assert.match(await card.textContent(), /The file as it was is kept as ~\/\.cursor\/mcp\.json\.countersign-backup-1767225600000\./);
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "rewrite_agent_config").map((c) => c.args), [{ plan: preview.plan }]);
  // The card's list of earlier rewrites is read again, without repeating the one shown here.
  const reads = () => backend.calls.filter((c) => c.cmd === "agent_configs").length;
  for (let i = 0; reads() < 2 && i < 100; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(reads(), 2);
  assert.equal(await card.getByRole("button", { name: "Undo" }).count(), 1);

  await card.getByRole("button", { name: "Undo" }).click();
  await card.locator(".agent-result").getByText(/^Restored/).waitFor();
  assert.equal(await card.locator(".agent-result").textContent(),
    "Restored ~/.cursor/mcp.json from ~/.cursor/mcp.json.countersign-backup-1767225600000. Restart Cursor to use it.");
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "undo_rewrite").map((c) => c.args), [{ id: "cursor-1", force: false }]);
  assert.deepEqual(backend.agentConfigs.rewrites, []);
  assert.equal(await card.getByRole("button", { name: "Undo" }).count(), 0);
  assert.equal(await page.locator(".connect").locator("img,script").count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("an earlier rewrite can be undone; when the file changed since, only after Undo anyway", async () => {
  const app = await openConnect(state({
    agentConfigs: agentConfigs({ rewrites: [rewriteView({ id: "vscode-7", client: "vscode", changedSince: true })] }),
  }));
  const { page, backend } = app;
  const card = await agentCard(page, "VS Code");
  const earlier = card.locator(".rewrite-list li");
  await earlier.waitFor();
  assert.match(await earlier.textContent(), /, backup ~\/\.config\/Code\/User\/mcp\.json\.countersign-backup-\d+ \(the file has changed since\)/);
  assert.equal(await (await agentCard(page, "Cursor")).getByRole("button", { name: "Undo" }).count(), 0, "listed under its own host");

  await earlier.getByRole("button", { name: "Undo", exact: true }).click();
  await earlier.getByText(/has changed since Countersign rewrote it; undo anyway/).waitFor();
  assert.equal(await earlier.getByRole("button", { name: "Undo", exact: true }).isDisabled(), true);
  await earlier.getByRole("button", { name: "Undo anyway" }).click();
  await card.locator(".agent-result").getByText(/^Restored/).waitFor();
  assert.match(await card.textContent(), /The file as it was before the undo is kept as ~\/\.config\/Code\/User\/mcp\.json\.countersign-replaced-1767229200000\./);
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "undo_rewrite").map((c) => c.args),
    [{ id: "vscode-7", force: false }, { id: "vscode-7", force: true }]);
  await page.waitForFunction(() => document.querySelectorAll(".rewrite-list li").length === 0);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("Claude Code's per-project servers are offered with their project, and chosen by it", async () => {
  const preview = importPreview("claudeCode", [
    ["desk", "new", "desk-mcp"],
    ["desk", "renamed", "other-desk", "desk-claude-code", "Countersign already has a different server named \"desk\"", [], "/home/me/work/app"],
  ]);
  const app = await openConnect(state({
    agentConfigs: agentConfigs({ found: ["claudeCode"] }),
    importPreviews: { claudeCode: preview },
  }));
  const { page, backend } = app;
  const card = await agentCard(page, "Claude Code");
  await card.getByRole("button", { name: "Import servers…" }).click();
  const table = card.getByRole("table");
  await table.waitFor();
  assert.deepEqual(await table.locator("tbody th").allTextContents(),
    ["desk", "deskproject /home/me/work/app: runs in that folder; tick it only if you trust what is there"]);
  // A project's server is imported only when ticked: it runs that folder's code.
  const inProject = card.getByRole("checkbox", { name: "Import desk (for the project /home/me/work/app)" });
  assert.equal(await inProject.isChecked(), false);
  assert.equal(await card.getByRole("checkbox", { name: "Import desk", exact: true }).isChecked(), true);
  await card.getByRole("checkbox", { name: "Import desk", exact: true }).uncheck();
  await inProject.check();
  await card.getByRole("button", { name: "Import 1 server" }).click();
  await card.locator(".agent-result").waitFor();
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "import_servers").map((c) => c.args.names),
    [["desk@/home/me/work/app"]]);
  await app.close();
});

test("an undo after the host changed the rest of its file puts back only Countersign's entries, and says so", async () => {
  const app = await openConnect(state({
    agentConfigs: agentConfigs({ found: ["claudeCode"], rewrites: [rewriteView({ id: "claudeCode-3", client: "claudeCode", changedSince: true })] }),
  }));
  const { page, backend } = app;
  backend.entriesOnlyUndo = { "claudeCode-3": 2 };
  const card = await agentCard(page, "Claude Code");
  const earlier = card.locator(".rewrite-list li");
  await earlier.getByRole("button", { name: "Undo", exact: true }).click();
  const said = card.locator(".agent-result");
  await said.waitFor();
  assert.match(await said.textContent(),
    /^Put back the 2 entries Countersign had changed in ~\/\.claude\.json, as in ~\/\.claude\.json\.countersign-backup-\d+; the rest of the file, changed since, is kept as it is\. Restart Claude Code to use it\.$/);
  assert.equal(await card.getByRole("button", { name: "Undo anyway" }).count(), 0, "nothing to decide");
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "undo_rewrite").map((c) => c.args), [{ id: "claudeCode-3", force: false }]);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("errors from the agents' files are shown as text: a broken file, nothing to route, a file changed since the preview", async () => {
  const app = await openConnect(state({
    rewritePreviews: {
      cursor: cursorRewrite(),
      vscode: rewritePreview("vscode", { kept: [["desk", "already routed through Countersign"]] }),
    },
  }));
  const { page, backend } = app;
  const vscode = await agentCard(page, "VS Code");
  backend.onAgents = (cmd) => cmd === "preview_import"
    ? { err: { kind: "agentConfig", message: `~/.config/Code/User/mcp.json:4:31: expected value ${IMG}` } }
    : null;
  await vscode.getByRole("button", { name: "Import servers…" }).click();
  const alert = vscode.getByRole("alert");
  await alert.waitFor();
  assert.equal(await alert.textContent(), `Could not read the servers: ~/.config/Code/User/mcp.json:4:31: expected value ${IMG}`);
  assert.equal(await vscode.getByRole("button", { name: "Import servers…" }).isEnabled(), true, "can be tried again");

  await vscode.getByRole("button", { name: "Route through Countersign…" }).click();
  await vscode.getByText(/can be routed through Countersign now/).waitFor();
  assert.match(await vscode.textContent(), /Nothing in ~\/\.config\/Code\/User\/mcp\.json can be routed through Countersign now\.Left as they are:desk: already routed through Countersign/);
  assert.equal(await vscode.getByRole("button", { name: /^Rewrite/ }).count(), 0);

  const cursor = await agentCard(page, "Cursor");
  await cursor.getByRole("button", { name: "Route through Countersign…" }).click();
  backend.onAgents = (cmd) => cmd === "rewrite_agent_config"
    ? { err: { kind: "changedOnDisk", message: "~/.cursor/mcp.json changed since the preview; nothing was written. Open the preview again." } }
    : null;
  await cursor.getByRole("button", { name: "Rewrite ~/.cursor/mcp.json" }).click();
  await cursor.getByText(/Could not rewrite: ~\/\.cursor\/mcp\.json changed since the preview/).waitFor();
  assert.equal(await cursor.getByRole("button", { name: "Rewrite ~/.cursor/mcp.json" }).isDisabled(), true, "a new preview is needed");
  assert.equal(await cursor.getByRole("button", { name: "Cancel" }).isEnabled(), true);

  // The files cannot be looked for at all.
  backend.onAgents = () => ({ err: { kind: "agentConfig", message: "no home directory: agents' config files cannot be found" } });
  await page.getByRole("tabpanel", { name: "Connect agents" }).getByRole("button", { name: "Refresh" }).click();
  await page.getByRole("region", { name: "Import from your agents" })
    .getByText("Could not look for your agents' config files: no home directory: agents' config files cannot be found").waitFor();
  assert.equal(await page.locator(".connect").locator("img,script").count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("screenshot of Connect agents (looked at by a person)", async () => {
  const dir = join(UI_DIR, "test-results");
  mkdirSync(dir, { recursive: true });
  const app = await openConnect(state());
  await app.page.screenshot({ path: join(dir, "connect.png"), fullPage: true });
  await app.page.getByRole("tab", { name: "Settings" }).click();
  await app.close();
  const app2 = await openApp(env, { ...state(), settings: { mutedServers: [], remembered: allowed.slice(0, 2),
    unreadShown: [{ agentName: "Cursor", server: "github", tool: "create_issue", allow: false },
      { agentName: null, server: null, tool: null, allow: null, lostIn: "/home/me/.config/countersign/settings.json.bad" }] } });
  await app2.page.getByRole("tab", { name: "Settings" }).click();
  await app2.page.locator(".allowed-list").waitFor();
  await app2.page.screenshot({ path: join(dir, "settings.png") });
  await app2.close();
  const renamed = await openConnect(state({ gateway: gatewayInfo({ servers: ["demo", "my desk"] }) }));
  const created = await createAgent(renamed.page, "Cursor");
  await created.locator(".agent-new").getByRole("article", { name: "Cursor" }).screenshot({ path: join(dir, "connect-renamed.png") });
  await renamed.close();
  const app3 = await openConnect(state({
    importPreviews: { cursor: cursorImport() },
    rewritePreviews: { vscode: cursorRewrite() },
    agentConfigs: agentConfigs({ rewrites: [rewriteView({ id: "vscode-7", client: "vscode", changedSince: true })] }),
  }));
  const cursor = await agentCard(app3.page, "Cursor");
  await cursor.getByRole("button", { name: "Import servers…" }).click();
  await cursor.getByRole("table").waitFor();
  const vscode = await agentCard(app3.page, "VS Code");
  await vscode.getByRole("button", { name: "Route through Countersign…" }).click();
  await vscode.locator("pre.new-text").waitFor();
  await cursor.getByRole("table").scrollIntoViewIfNeeded();
  await app3.page.screenshot({ path: join(dir, "connect-import.png") });
  await vscode.getByRole("button", { name: /^Rewrite/ }).scrollIntoViewIfNeeded();
  await app3.page.screenshot({ path: join(dir, "connect-rewrite.png") });
  await app3.close();
});
