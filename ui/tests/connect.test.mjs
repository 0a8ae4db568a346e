// The Connect agents page (gateway status, Pause / Resume, servers, token file, per-agent
// snippets with Copy) and the Always allowed list in Settings (Revoke).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

import { launch, openApp, UI_DIR } from "./support/app.mjs";
import { gatewayInfo, server } from "./support/fixtures.mjs";

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
  ...o,
});

async function openConnect(backendState, options) {
  const app = await openApp(env, backendState, options);
  await app.page.getByRole("tab", { name: "Connect agents" }).click();
  await app.page.locator(".gateway-state").waitFor();
  return app;
}

test("Connect agents shows where the gateway listens, the servers, the token file and each agent's snippet", async () => {
  const app = await openConnect(state());
  const { page, backend } = app;
  const panel = page.getByRole("tabpanel", { name: "Connect agents" });
  assert.equal(await panel.getByRole("heading", { level: 2 }).textContent(), "Connect agents");
  const gateway = panel.getByRole("region", { name: "Gateway status" });
  assert.match(await gateway.textContent(), /Listening at http:\/\/127\.0\.0\.1:47717/);
  assert.match(await gateway.textContent(), /Token file: \/home\/me\/\.local\/share\/countersign\/gateway-token/);
  assert.equal(await gateway.getByRole("button", { name: "Pause" }).count(), 1);
  const servers = await panel.getByRole("region", { name: "Servers through the gateway" }).getByRole("listitem").allTextContents();
  assert.deepEqual(servers, ["demo http://127.0.0.1:47717/mcp/demo", "tickets http://127.0.0.1:47717/mcp/tickets"]);

  const agents = panel.getByRole("region", { name: "Agents" });
  assert.match(await agents.textContent(), /contain the gateway's token, which grants access to every configured server/);
  const info = backend.gateway;
  for (const client of info.clients) {
    const card = agents.getByRole("article", { name: client.title });
    assert.equal(await card.locator(".client-where").textContent(), client.whereTo);
    assert.equal(await card.locator("pre").textContent(), client.snippet);
    assert.equal(await card.getByRole("button", { name: "Copy" }).count(), 1);
  }
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("Copy puts the snippet on the clipboard; where the clipboard is refused, it selects it for Ctrl+C", async () => {
  const app = await openConnect(state());
  const { page, context, backend } = app;
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(env.url).origin });
  const cursor = backend.gateway.clients.find((c) => c.client === "cursor");
  const card = page.getByRole("article", { name: "Cursor" });
  await card.getByRole("button", { name: "Copy" }).click();
  await card.getByRole("status").getByText("Copied.").waitFor();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), cursor.snippet);

  // The clipboard API refuses: the text is selected and the person is told to press Ctrl+C.
  await page.evaluate(() => {
    navigator.clipboard.writeText = () => Promise.reject(new DOMException("denied", "NotAllowedError"));
  });
  const claude = backend.gateway.clients.find((c) => c.client === "claudeCode");
  const claudeCard = page.getByRole("article", { name: "Claude Code" });
  await claudeCard.getByRole("button", { name: "Copy" }).click();
  await claudeCard.getByRole("status").getByText(/press Ctrl\+C/).waitFor();
  assert.equal(await page.evaluate(() => window.getSelection().toString()), claude.snippet);
  assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("aria-label")), "Claude Code snippet");
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
  const info = gatewayInfo({ servers: [`s${IMG}`] });
  info.tokenPath = `/tmp/${SCRIPT}`;
  info.clients[0].whereTo = `where ${IMG}`;
  const app = await openConnect(state({ gateway: info }));
  const { page } = app;
  const text = await page.locator(".connect").textContent();
  for (const literal of [`s${IMG}`, `/tmp/${SCRIPT}`, `where ${IMG}`, info.clients[0].snippet]) {
    assert.ok(text.includes(literal), literal);
  }
  assert.equal(await page.locator(".connect").locator("img,script").count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  await app.close();
});

const allowed = [
  { agent: "Claude Code", server: "tickets", tool: "delete_ticket" },
  { agent: "Cursor", server: "github", tool: "create_issue" },
  { agent: "", server: `gh${IMG}`, tool: `t${SCRIPT}` },
];

test("Settings lists the always-allowed calls; Revoke forgets one and its row goes", async () => {
  const app = await openApp(env, { ...state(), settings: { mutedServers: [], alwaysAllow: structuredClone(allowed) } });
  const { page, backend } = app;
  await page.getByRole("tab", { name: "Settings" }).click();
  const section = page.getByRole("region", { name: "Always allowed" });
  const rows = section.getByRole("listitem");
  await rows.first().waitFor();
  assert.deepEqual((await rows.allTextContents()).map((t) => t.replace(/Revoke$/, "")), [
    "Claude Code may run delete_ticket on tickets",
    "Cursor may run create_issue on github",
    `An agent with no name may run t${SCRIPT} on gh${IMG}`,
  ]);
  // Each Revoke button is described by its row's sentence.
  const second = rows.nth(1).getByRole("button", { name: "Revoke" });
  const describedBy = await second.getAttribute("aria-describedby");
  assert.equal(await page.evaluate((id) => document.getElementById(id).textContent, describedBy),
    "Cursor may run create_issue on github");

  await second.click();
  await page.waitForFunction(() => document.querySelectorAll(".allowed-list li").length === 2);
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "revoke_always_allow").map((c) => c.args),
    [{ call: allowed[1] }]);
  assert.doesNotMatch(await section.textContent(), /Cursor/);
  assert.match(await section.getByRole("status").textContent(), /Revoked/);
  // Focus moves to the row that took its place.
  assert.equal(await page.evaluate(() => document.activeElement?.closest("li")?.textContent), `An agent with no name may run t${SCRIPT} on gh${IMG}Revoke`);

  // A failed revoke keeps the row and says why.
  backend.onGateway = () => ({ err: { kind: "settings", message: "cannot save settings: read-only" } });
  await rows.first().getByRole("button", { name: "Revoke" }).click();
  await section.getByText("Could not revoke: cannot save settings: read-only").waitFor();
  assert.equal(await rows.count(), 2);
  backend.onGateway = null;

  // The last ones go: the empty state, focus on the heading.
  await rows.first().getByRole("button", { name: "Revoke" }).click();
  await page.waitForFunction(() => document.querySelectorAll(".allowed-list li").length === 1);
  await rows.first().getByRole("button", { name: "Revoke" }).click();
  await section.getByText(/Nothing is always allowed/).waitFor();
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Always allowed");
  assert.deepEqual(backend.settings.alwaysAllow, []);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("Settings with nothing always allowed shows the empty state", async () => {
  const app = await openApp(env, state());
  await app.page.getByRole("tab", { name: "Settings" }).click();
  await app.page.getByRole("region", { name: "Always allowed" }).getByText(/Nothing is always allowed/).waitFor();
  await app.close();
});

test("screenshot of Connect agents (looked at by a person)", async () => {
  const dir = join(UI_DIR, "test-results");
  mkdirSync(dir, { recursive: true });
  const app = await openConnect(state());
  await app.page.screenshot({ path: join(dir, "connect.png"), fullPage: true });
  await app.page.getByRole("tab", { name: "Settings" }).click();
  await app.close();
  const app2 = await openApp(env, { ...state(), settings: { mutedServers: [], alwaysAllow: allowed.slice(0, 2) } });
  await app2.page.getByRole("tab", { name: "Settings" }).click();
  await app2.page.locator(".allowed-list").waitFor();
  await app2.page.screenshot({ path: join(dir, "settings.png") });
  await app2.close();
});
