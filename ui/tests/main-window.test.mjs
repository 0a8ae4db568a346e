// The main window: servers with live state, tools with annotation badges, stderr with refresh,
// running a tool (with the ask dialog on top while it waits), History, and the config banner.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

import { launch, openApp, dialog, waitForAnswers, UI_DIR } from "./support/app.mjs";
import { formAsk, field, server } from "./support/fixtures.mjs";

let env;
before(async () => {
  env = await launch();
});
after(async () => {
  await env?.close();
});

const deleteTicket = {
  name: "delete_ticket",
  title: "Delete a ticket",
  description: "Deletes a ticket for good, after asking the person to confirm.",
  inputSchema: { type: "object", properties: { id: { type: "string" }, force: { type: "boolean" } }, required: ["id"] },
  annotations: { destructiveHint: true, readOnlyHint: false },
};
const listTickets = {
  name: "list_tickets",
  title: null,
  description: "Lists the open tickets.",
  inputSchema: { type: "object", properties: {} },
  annotations: { readOnlyHint: true },
};

const state = () => ({
  servers: [
    server("demo", undefined, { trusted: true }),
    server("remote", { state: "connecting" }, { endpoint: { kind: "http", host: "mcp.example.com", url: "https://mcp.example.com/mcp" } }),
    server("broken", { state: "failed", reason: "spawn failed: No such file or directory" }),
  ],
  tools: { demo: [deleteTicket, listTickets], remote: [] },
  stderr: { demo: ["demo-server starting", "listening on stdio"] },
});

test("servers are listed with live state, endpoint and trust", async () => {
  const app = await openApp(env, state());
  const { page, backend } = app;
  const items = page.locator(".server-item");
  assert.equal(await items.count(), 3);
  const demo = await items.nth(0).textContent();
  assert.match(demo, /demo/);
  assert.match(demo, /Ready/);
  assert.match(demo, /demo-server/);
  assert.match(demo, /trusted/);
  assert.match(await items.nth(1).textContent(), /remote.*Connecting….*mcp\.example\.com/);
  assert.match(await items.nth(2).textContent(), /broken.*Failed/);
  assert.doesNotMatch(await items.nth(1).textContent(), /trusted/);

  await backend.emit("session-event", { server: "remote", state: { state: "reconnecting", attempt: 2, nextInMs: 4000, reason: "connection refused" }, revision: 2 });
  assert.match(await items.nth(1).textContent(), /Reconnecting \(attempt 2\)/);
  await page.getByRole("button", { name: /^remote/ }).click();
  assert.match(await page.locator(".detail-header").textContent(), /connection refused — next try in 4 s/);
  assert.match(await page.locator(".detail-header").textContent(), /At mcp\.example\.com \(https:\/\/mcp\.example\.com\/mcp\)/);
  await backend.emit("session-event", { server: "remote", state: { state: "ready", protocolVersion: "2025-11-25", serverName: "remote-srv", serverVersion: "2.0" }, revision: 3 });
  assert.match(await items.nth(1).textContent(), /Ready/);
  assert.match(await page.locator(".detail-header").textContent(), /remote-srv 2\.0, protocol 2025-11-25/);
  // Becoming ready reloads the tools of the server shown.
  await page.getByText("This server offers no tools.").waitFor();
  assert.ok(backend.calls.filter((c) => c.cmd === "list_tools" && c.args.server === "remote").length >= 2);

  // A server the window does not know yet: the list is read again.
  backend.servers.push(server("newcomer"));
  await backend.emit("session-event", { server: "newcomer", state: { state: "connecting" }, revision: 4 });
  await page.getByRole("button", { name: /^newcomer/ }).waitFor();
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("a server's tools show title, description and annotation badges; stderr refreshes", async () => {
  const app = await openApp(env, state());
  const { page, backend } = app;
  await page.getByRole("button", { name: /^demo/ }).click();
  const del = page.getByRole("article", { name: "delete_ticket" });
  await del.waitFor();
  assert.match(await del.textContent(), /Delete a ticket/);
  assert.match(await del.textContent(), /Deletes a ticket for good/);
  assert.equal(await del.locator(".badge").allTextContents().then((b) => b.join(",")), "destructive");
  assert.equal(await page.getByRole("article", { name: "list_tickets" }).locator(".badge").allTextContents().then((b) => b.join(",")), "read-only");
  assert.equal(await page.locator(".stderr pre").textContent(), "demo-server starting\nlistening on stdio");
  backend.stderr.demo.push("ticket T-7 deleted");
  await page.getByRole("button", { name: "Refresh" }).click();
  await page.getByText(/ticket T-7 deleted/).waitFor();

  // An unknown server's tools: the error is shown where the tools would be.
  await page.getByRole("button", { name: /^broken/ }).click();
  await page.getByText(/Could not list tools: unknown server broken/).waitFor();
  assert.match(await page.locator(".server-detail").textContent(), /spawn failed: No such file or directory/);
  await app.close();
});

test("run a tool: JSON arguments pre-filled from required properties, result shown, errors listed", async () => {
  const app = await openApp(env, state());
  const { page, backend } = app;
  await page.getByRole("button", { name: /^demo/ }).click();
  const del = page.getByRole("article", { name: "delete_ticket" });
  await del.getByRole("button", { name: "Run…" }).click();
  const args = del.getByLabel("Arguments (JSON)");
  assert.equal(await args.inputValue(), '{\n  "id": ""\n}');
  assert.equal(await page.evaluate(() => document.activeElement?.tagName), "TEXTAREA");

  // Not JSON: nothing is sent.
  await args.fill("{ id: ");
  await del.getByRole("button", { name: "Run", exact: true }).click();
  await del.getByText(/Not valid JSON/).waitFor();
  assert.equal(backend.calls.filter((c) => c.cmd === "run_tool").length, 0);

  // Refused by the schema check: the list of problems.
  backend.onRunTool = () => ({ err: { kind: "invalidArguments", message: "The arguments do not fit the tool's input schema", errors: ["/id: 7 is not of type \"string\""] } });
  await args.fill('{"id": 7}');
  await del.getByRole("button", { name: "Run", exact: true }).click();
  await del.getByText('/id: 7 is not of type "string"').waitFor();

  // Works: text items as text, others as JSON.
  backend.onRunTool = () => ({ ok: { isError: false, content: [
    { type: "text", text: "Deleted T-7" },
    { type: "image", data: "AAAA", mimeType: "image/png" },
  ], structuredContent: { deleted: "T-7" } } });
  await args.fill('{"id": "T-7"}');
  await del.getByRole("button", { name: "Run", exact: true }).click();
  await del.getByText("Deleted T-7").waitFor();
  const result = await del.locator(".run-result").textContent();
  assert.match(result, /"type": "image"/);
  assert.match(result, /"deleted": "T-7"/);
  const run = backend.calls.filter((c) => c.cmd === "run_tool").at(-1);
  const { runId, ...rest } = run.args;
  assert.deepEqual(rest, { server: "demo", tool: "delete_ticket", arguments: { id: "T-7" } });
  assert.match(runId, /^[0-9a-f-]{36}$/);

  // A tool error.
  backend.onRunTool = () => ({ ok: { isError: true, content: [{ type: "text", text: "No ticket T-9" }], structuredContent: null } });
  await args.fill('{"id": "T-9"}');
  await del.getByRole("button", { name: "Run", exact: true }).click();
  await del.getByText("No ticket T-9").waitFor();
  assert.match(await del.locator(".run-result").textContent(), /The tool reported an error/);
  await app.close();
});

test("a tool whose schema fits is run from a form, typed into like a question; JSON stays one click away", async () => {
  const setPriority = {
    name: "set_priority",
    title: "Set a ticket's priority",
    description: "Changes the priority.",
    inputSchema: { type: "object", properties: { id: { type: "string" }, urgent: { type: "boolean" }, level: { type: "integer", minimum: 1, maximum: 5 } }, required: ["id", "level"] },
    annotations: null,
    form: { fields: [
      field.text("id", { title: "Ticket", required: true }),
      field.boolean("urgent", { title: "Urgent" }),
      field.number("level", { title: "Level", integer: true, minimum: 1, maximum: 5, required: true }),
    ] },
  };
  const app = await openApp(env, { ...state(), tools: { ...state().tools, demo: [setPriority] } });
  const { page, backend } = app;
  await page.getByRole("button", { name: /^demo/ }).click();
  const card = page.getByRole("article", { name: "set_priority" });
  await card.getByRole("button", { name: "Run…" }).click();
  const ticket = card.getByRole("textbox", { name: /Ticket/ });
  assert.equal(await ticket.evaluate((e) => e === document.activeElement), true, "focus starts in the first field");
  assert.equal(await card.getByLabel("Arguments (JSON)").isHidden(), true);

  // A required field left empty: nothing runs, the field says why.
  await card.getByRole("button", { name: "Run", exact: true }).click();
  await card.getByText("Some fields need a look").waitFor();
  assert.equal(backend.calls.filter((c) => c.cmd === "run_tool").length, 0);

  await ticket.fill("T-7");
  await page.keyboard.press("Tab");
  await page.keyboard.press("Space");
  await card.getByRole("spinbutton", { name: /Level/ }).fill("3");
  await card.getByRole("button", { name: "Run", exact: true }).click();
  await card.getByText("ok").waitFor();
  const run = backend.calls.filter((c) => c.cmd === "run_tool").at(-1);
  assert.deepEqual(run.args.arguments, { id: "T-7", urgent: true, level: 3 });

  // The JSON view carries the form's values over.
  await card.getByRole("button", { name: "Write the arguments as JSON" }).click();
  const json = card.getByLabel("Arguments (JSON)");
  assert.deepEqual(JSON.parse(await json.inputValue()), { id: "T-7", urgent: true, level: 3 });
  assert.equal(await card.getByRole("button", { name: "Use the form" }).isVisible(), true);
  await app.close();
});

test("a run the app never received does not stay Running… for ever; the app refuses it if it turns up late", async () => {
  const app = await openApp(env, state());
  const { page, backend } = app;
  await page.getByRole("button", { name: /^demo/ }).click();
  const del = page.getByRole("article", { name: "delete_ticket" });
  await del.getByRole("button", { name: "Run…" }).click();
  await del.getByLabel("Arguments (JSON)").fill('{"id": "T-7"}');
  backend.loseRuns = true;
  await del.getByRole("button", { name: "Run", exact: true }).click();
  await del.getByText("Running…").waitFor();
  await del.getByText(/Not run: Countersign did not receive this run, so nothing was sent/).waitFor({ timeout: 15_000 });
  assert.equal(await del.getByRole("button", { name: "Run", exact: true }).isEnabled(), true);
  assert.equal(await del.getByRole("button", { name: "Cancel" }).isVisible(), false);
  const lost = backend.calls.find((c) => c.cmd === "run_tool").args.runId;
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "run_arrived").map((c) => c.args), [{ runId: lost }]);
  // The app took the lost run's id: were the command delivered now, it would be refused.
  backend.loseRuns = false;
  assert.deepEqual(await backend.handle("run_tool", { server: "demo", tool: "delete_ticket", arguments: { id: "T-7" }, runId: lost }),
    { err: { kind: "session", message: "this run was already started" } });
  // Running again is a new run, and it goes through.
  await del.getByRole("button", { name: "Run", exact: true }).click();
  await del.getByText("Done.").waitFor();
  await app.close();
});

test("a run that reached the app keeps running past the arrival check", async () => {
  const app = await openApp(env, state());
  const { page, backend } = app;
  let finish;
  backend.onRunTool = () => new Promise((resolve) => {
    finish = resolve;
  });
  await page.getByRole("button", { name: /^demo/ }).click();
  const del = page.getByRole("article", { name: "delete_ticket" });
  await del.getByRole("button", { name: "Run…" }).click();
  await del.getByLabel("Arguments (JSON)").fill('{"id": "T-7"}');
  await del.getByRole("button", { name: "Run", exact: true }).click();
  const checked = Date.now();
  while (!backend.calls.some((c) => c.cmd === "run_arrived") && Date.now() - checked < 15_000) {
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(backend.calls.some((c) => c.cmd === "run_arrived"), "the arrival was checked");
  assert.equal(await del.locator(".run-status").textContent(), "Running…");
  finish({ ok: { isError: false, content: [{ type: "text", text: "Deleted T-7" }], structuredContent: null } });
  await del.getByText("Deleted T-7").waitFor();
  assert.equal(await del.locator(".run-status").textContent(), "Done.");
  await app.close();
});

test("while a run waits, its confirmation dialog appears on top; the result lands afterwards", async () => {
  const app = await openApp(env, state());
  const { page, backend } = app;
  let finish;
  backend.onRunTool = () => new Promise((resolve) => {
    finish = resolve;
  });
  await page.getByRole("button", { name: /^demo/ }).click();
  const del = page.getByRole("article", { name: "delete_ticket" });
  await del.getByRole("button", { name: "Run…" }).click();
  await del.getByLabel("Arguments (JSON)").fill('{"id": "T-7"}');
  await del.getByRole("button", { name: "Run", exact: true }).click();
  await del.getByText("Running…").waitFor();
  assert.equal(await del.getByRole("button", { name: "Run", exact: true }).isDisabled(), true);

  await backend.addAsk(formAsk({ id: 500, server: "demo", message: "Delete ticket T-7, \"Printer on fire\"? This cannot be undone.",
    fields: [field.boolean("confirm", { title: "Confirm deletion", required: true })] }));
  const d = page.getByRole("dialog", { name: /demo asks/ });
  await d.waitFor();
  await page.keyboard.press("Space");
  await d.getByRole("button", { name: "Submit" }).click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(answer, { id: 500, answer: { action: "accept", content: { confirm: true } } });
  await d.waitFor({ state: "detached" });
  finish({ ok: { isError: false, content: [{ type: "text", text: "Deleted T-7" }], structuredContent: null } });
  await del.getByText("Deleted T-7").waitFor();
  assert.equal(await del.getByRole("button", { name: "Run", exact: true }).isEnabled(), true);
  await app.close();
});

test("a running tool shows the server's progress and the time, and Cancel stops it", async () => {
  const app = await openApp(env, state());
  const { page, backend } = app;
  let finish;
  backend.onRunTool = () => new Promise((resolve) => {
    finish = resolve;
  });
  await page.getByRole("button", { name: /^demo/ }).click();
  const del = page.getByRole("article", { name: "delete_ticket" });
  await del.getByRole("button", { name: "Run…" }).click();
  await del.getByLabel("Arguments (JSON)").fill('{"id": "T-7"}');
  await del.getByRole("button", { name: "Run", exact: true }).click();
  await del.getByText("Running…").waitFor();
  const { runId } = backend.calls.filter((c) => c.cmd === "run_tool").at(-1).args;

  // The server reports progress: a bar with its numbers, and its words as text.
  await backend.emit("run-progress", { runId, progress: 3, total: 10, message: "<b>copying</b> files" });
  const bar = del.getByRole("progressbar", { name: "Progress of delete_ticket" });
  await bar.waitFor();
  assert.equal(await bar.evaluate((b) => [b.value, b.max].join("/")), "3/10");
  assert.match(await del.locator(".run-progress-message").textContent(), /<b>copying<\/b> files/);
  assert.equal(await del.locator(".run-progress-message b").count(), 0, "the server's words are text");
  // Another run's progress is not this one's.
  await backend.emit("run-progress", { runId: "someone-else", progress: 9, total: 10, message: "other" });
  assert.equal(await bar.evaluate((b) => b.value), 3);
  await page.waitForFunction(() => /\d+ s/.test(document.querySelector(".run-elapsed")?.textContent ?? ""));

  await del.getByRole("button", { name: "Cancel" }).click();
  await del.getByText("Cancelling…").waitFor();
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "cancel_run").map((c) => c.args), [{ runId }]);
  finish({ err: { kind: "session", message: "the call was cancelled" } });
  await del.getByText("Cancelled.").waitFor();
  assert.equal(await del.getByRole("button", { name: "Cancel" }).isHidden(), true);
  assert.equal(await bar.isHidden(), true);
  assert.equal(await del.getByRole("button", { name: "Run", exact: true }).isEnabled(), true);
  await app.close();
});

test("a decision that could not be saved is told at the top as it happens, and goes once a change is saved", async () => {
  const app = await openApp(env, state());
  const { page, backend } = app;
  assert.equal(await page.getByRole("region", { name: "About Countersign's files" }).count(), 0);
  // As core words it (App::config_info), woken by the settings' failed save.
  backend.config = { ...backend.config, notices: [
    "Countersign could not save your last change to its settings: cannot save settings to /home/me/.config/countersign/settings.json: No space left on device (os error 28); your \"never\" is kept until Countersign quits. This note goes once a change is saved.",
  ] };
  await backend.emit("config-event", null);
  const region = page.getByRole("region", { name: "About Countersign's files" });
  await region.waitFor();
  assert.match(await region.textContent(), /could not save your last change.*No space left on device.*kept until Countersign quits/);
  const dir = join(UI_DIR, "test-results");
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, "unsaved.png") });
  backend.config = { ...backend.config, notices: [] };
  await backend.emit("config-event", null);
  await region.waitFor({ state: "detached" });
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("History's Verify says the audit log is intact, or names the first bad record; files made private are noticed", async () => {
  const log = "/home/me/.local/share/countersign/audit.jsonl";
  const app = await openApp(env, {
    ...state(),
    config: { path: "/home/me/.config/countersign/config.json", errors: [], notices: [
      "Made private: /home/me/.config/countersign/config.json could be read by other users (mode 0644); it is now 0600.",
    ] },
    verification: { files: [log], records: 12, unchained: 0, startsAfterRotation: false, problem: {
      file: log, line: 3, kind: "changed", message: "line 3 was changed: the record after it was linked to different text",
    } },
  });
  const { page } = app;
  assert.match(await page.getByRole("region", { name: "About Countersign's files" }).textContent(),
    /Made private: .*config\.json could be read by other users \(mode 0644\); it is now 0600/);
  await page.getByRole("tab", { name: "History" }).click();
  await page.getByRole("button", { name: "Verify" }).click();
  await page.locator(".history-verdict.error").waitFor();
  assert.match(await page.locator(".history-verdict").textContent(),
    /tampered with or damaged: line 3 was changed.*\(.*audit\.jsonl, line 3\)/);
  app.backend.verification = { files: [`${log}.1`, log], records: 12, unchained: 2, startsAfterRotation: false, problem: null };
  await page.getByRole("button", { name: "Verify" }).click();
  await page.locator(".history-verdict.ok").waitFor();
  assert.match(await page.locator(".history-verdict").textContent(),
    /intact: 12 records in 2 files.*2 older records from before the chain began cannot be checked/);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("History lists asks newest first with outcomes, and refused requests", async () => {
  const now = Date.UTC(2025, 10, 25, 12, 0, 0);
  const older = formAsk({ id: 1, server: "demo", message: "Older question", receivedAtMs: now - 60_000 });
  const newer = formAsk({ id: 2, server: "github", agent: "Cursor", message: "Newer question", receivedAtMs: now });
  const url = { ...formAsk({ id: 3, server: "auth", message: "Sign in", receivedAtMs: now - 30_000 }), kind: "url", url: "https://id.example.com/x", elicitationId: "e" };
  const unsent = formAsk({ id: 1, server: "demo", message: "Unsent answer", receivedAtMs: now - 90_000 });
  const cut = formAsk({ id: 2, server: "demo", message: "Cut short", receivedAtMs: now - 85_000 });
  const app = await openApp(env, { ...state(), history: {
    asks: [
      { run: "r", ask: older, outcome: { outcome: "accepted", content: { confirm: true } }, resolvedAtMs: now - 50_000, delivered: true, interrupted: false },
      { run: "r", ask: newer, outcome: { outcome: "cancelled", reason: "timeout" }, resolvedAtMs: now + 60_000, delivered: false, interrupted: false },
      { run: "r", ask: url, outcome: null, resolvedAtMs: null, delivered: false, interrupted: false },
      // An earlier run killed twice: after recording a decline it never sent, and before
      // recording anything.
      { run: "q", ask: unsent, outcome: { outcome: "declined" }, resolvedAtMs: now - 80_000, delivered: false, interrupted: false },
      { run: "q", ask: cut, outcome: null, resolvedAtMs: null, delivered: false, interrupted: true },
    ],
    refused: [{ server: "weird", reason: "properties.x.type: \"object\" is not supported", atMs: now, unrecorded: 0 },
      { server: "noisy", reason: "too many", atMs: now - 1000, unrecorded: 980 }],
    gated: [
      { server: "demo", agent: "Claude Code", tool: "list_tickets", allowed: true, why: "rule: allow", atMs: now - 1000, count: 1, others: false },
      { server: "demo", agent: null, tool: "book_meeting", allowed: false, why: "rule: deny", atMs: now, count: 1, others: false },
      // An agent past its budget: its calls counted by kind.
      { server: "demo", agent: "Flood", tool: "list_tickets", allowed: true, why: "rule: allow", atMs: now - 2000, count: 980, others: false },
      { server: "demo", agent: "Flood", tool: "", allowed: false, why: "", atMs: now - 3000, count: 7, others: true },
    ],
    skipped: 2,
  } });
  const { page } = app;
  await page.getByRole("tab", { name: "History" }).click();
  assert.equal(await page.getByRole("tab", { name: "History" }).getAttribute("aria-selected"), "true");
  const rows = page.locator(".history-table").first().locator("tbody tr");
  await rows.first().waitFor();
  const texts = await rows.allTextContents();
  assert.equal(texts.length, 5);
  assert.match(texts[0], /github.*for Cursor.*Newer question.*Cancelled: This question timed out\./);
  assert.doesNotMatch(texts[0], /Not on record as sent/, "a withdrawal sends the server nothing to doubt");
  assert.match(texts[1], /auth.*Sign in.*Open https:\/\/id\.example\.com\/x.*No outcome recorded/);
  assert.match(texts[2], /demo.*Older question.*Accepted.*"confirm":true/);
  assert.doesNotMatch(texts[2], /Not on record as sent/);
  assert.match(texts[3], /Cut short.*No answer: Countersign stopped before recording one, so none was sent/);
  assert.match(texts[4], /Unsent answer.*Declined.*Not on record as sent.*may not have received it/);
  assert.match(await page.locator(".history-table").nth(1).textContent(), /weird.*is not supported/);
  assert.match(await page.locator(".history-table").nth(1).textContent(),
    /noisy.*too many \(and 980 more from this server before it, counted but not written\)/);
  const gated = await page.locator(".history-table").nth(2).locator("tbody tr").allTextContents();
  assert.equal(gated.length, 4);
  assert.match(gated[0], /an unnamed agent.*demo.*book_meeting.*Refused.*rule: deny/);
  assert.doesNotMatch(gated[0], /calls/);
  assert.match(gated[1], /Claude Code.*demo.*list_tickets.*Allowed.*rule: allow/);
  assert.match(gated[2], /Flood.*demo.*list_tickets.*Allowed, 980 calls up to then.*rule: allow/);
  assert.match(gated[3], /Flood.*demo.*other tools and requests.*Allowed or refused, 7 calls up to then.*counted together/);
  assert.match(await page.locator(".history").textContent(), /2 lines of the log could not be read/);
  // Keyboard: arrows move between the tabs.
  await page.keyboard.press("ArrowLeft");
  assert.equal(await page.getByRole("tab", { name: "Servers" }).getAttribute("aria-selected"), "true");
  assert.equal(await page.locator("#panel-history").isHidden(), true);
  await app.close();
});

test("config errors are shown in a banner; the window screenshot", async () => {
  const app = await openApp(env, { ...state(), config: { path: "/home/me/.config/countersign/config.json", errors: [
    { file: "/home/me/.config/countersign/config.json", line: 12, column: 5, server: "broken", message: "missing \"command\"" },
  ] } });
  const { page } = app;
  const banner = page.getByRole("region", { name: "Config problems" });
  assert.match(await banner.textContent(), /config\.json:12:5 \(server broken\): missing "command"/);
  await page.getByRole("button", { name: /^demo/ }).click();
  await page.getByRole("article", { name: "delete_ticket" }).getByRole("button", { name: "Run…" }).click();
  const dir = join(UI_DIR, "test-results");
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, "main-window.png") });
  await app.close();
});

test("an edit of the config file redraws the servers, and one that was not applied says where", async () => {
  const app = await openApp(env, state());
  const { page, backend } = app;
  const list = page.getByRole("navigation", { name: "Servers" });
  await list.getByRole("button", { name: /^demo/ }).waitFor();
  const added = { ...backend.servers[0], name: "added-later" };
  await backend.editConfig({ servers: [...backend.servers, added] });
  await list.getByRole("button", { name: /^added-later/ }).waitFor();

  await backend.editConfig({ errors: [
    { file: "/home/me/.config/countersign/config.json", line: 4, column: 3, server: null, message: "trailing comma" },
  ] });
  const banner = page.getByRole("alert").filter({ hasText: "Problems in the config file" });
  await banner.waitFor();
  assert.match(await banner.textContent(), /last edit was not applied.*config\.json:4:3: trailing comma/);
  assert.equal(await list.getByRole("button", { name: /^added-later/ }).count(), 1, "the servers stay as they ran");

  // Fixed, with the first server removed: the banner goes, and so does the server.
  await backend.editConfig({ servers: [added] });
  await page.getByRole("region", { name: "Config problems" }).waitFor({ state: "detached" });
  await list.getByRole("button", { name: /^demo/ }).waitFor({ state: "detached" });
  await app.close();
});

test("a server's notifications are muted from its page; a failed save puts the box back", async () => {
  const app = await openApp(env, state());
  const { page, backend } = app;
  await page.getByRole("button", { name: /^demo/ }).click();
  const box = page.getByRole("checkbox", { name: "Desktop notifications when demo asks" });
  assert.equal(await box.isChecked(), true);
  await box.click();
  await page.waitForFunction(() => document.querySelector(".mute-status")?.textContent?.includes("Muted"));
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "set_muted").map((c) => c.args), [{ server: "demo", muted: true }]);
  assert.equal(await box.isChecked(), false);

  backend.onSetting = () => ({ err: { kind: "settings", message: "cannot save settings to /x: read-only" } });
  await box.click();
  await page.waitForFunction(() => document.querySelector(".mute-status")?.textContent?.includes("read-only"));
  assert.equal(await box.isChecked(), false, "still muted, as saved");
  await app.close();
});

test("a remote server that asks for a sign-in: Sign in waits for the browser, a failure says why, Sign out", async () => {
  const remote = server("notes", { state: "signInRequired", reason: "the server asks you to sign in" }, {
    endpoint: { kind: "http", host: "notes.example.com", url: "https://notes.example.com/mcp" },
    signIn: { signedIn: false, keptIn: "secretService", scopes: [] },
  });
  const app = await openApp(env, { ...state(), servers: [remote] });
  const { page, backend } = app;
  assert.match(await page.locator(".server-item").first().textContent(), /notes.*Sign-in needed/);
  const group = page.getByRole("group", { name: "Sign-in" });
  assert.match(await group.textContent(), /notes asks you to sign in.*only if you agree.*keyring/);
  await page.getByText("Its tools are listed once you have signed in.").waitFor();
  assert.equal(backend.calls.filter((c) => c.cmd === "list_tools").length, 0, "no listing before the sign-in");

  // The first attempt fails (the person declined the address): the reason is shown.
  let finish;
  backend.onSignIn = (cmd) => cmd === "sign_in" && new Promise((resolve) => (finish = resolve));
  await group.getByRole("button", { name: "Sign in" }).click();
  await page.getByText("Waiting for you to sign in in your browser…").waitFor();
  assert.equal(await group.getByRole("button", { name: "Sign in" }).isDisabled(), true);
  // The reason can quote a server's words: shown as untrusted text, its bidi override named.
  finish({ err: { kind: "session", message: "server \"notes\" needs you to sign in: you declined to sign in \u202Egpj.exe" } });
  await page.waitForFunction(() => document.querySelector(".sign-in-status")?.textContent?.includes("you declined"));
  assert.match(await page.locator(".sign-in-status").textContent(), /you declined to sign in ⟨U\+202E⟩gpj\.exe/);
  assert.equal(await group.getByRole("button", { name: "Sign in" }).isDisabled(), false);

  // Then it succeeds: the session becomes ready and the page says where the tokens are kept.
  backend.onSignIn = null;
  const notes = backend.servers.find((s) => s.name === "notes");
  notes.state = { state: "ready", protocolVersion: "2025-11-25", serverName: "notes", serverVersion: "1" };
  notes.signIn.scopes = ["notes:read"];
  await group.getByRole("button", { name: "Sign in" }).click();
  notes.stateRevision = 2;
  await backend.emit("session-event", { server: "notes", state: notes.state, revision: 2 });
  const signedIn = page.getByRole("group", { name: "Sign-in" });
  await page.waitForFunction(() => document.querySelector(".detail-sign-in")?.textContent?.includes("Signed in"));
  assert.match(await signedIn.textContent(), /Signed in \(notes:read\)\. Kept in your desktop's keyring\./);
  // Sign out: the server asks again, and the page offers Sign in, and says what became of the
  // tokens at the authorization server, though the view was drawn anew for the new state.
  await signedIn.getByRole("button", { name: "Sign out" }).click();
  await page.getByRole("group", { name: "Sign-in" }).getByRole("button", { name: "Sign in" }).waitFor();
  assert.match(await page.locator(".server-item").first().textContent(), /Sign-in needed/);
  await page.waitForFunction(() => document.querySelector(".sign-in-status")?.textContent?.includes("revoked"));
  assert.equal(await page.getByRole("group", { name: "Sign-in" }).getByRole("status").textContent(),
    " Signed out; notes.example.com revoked Countersign's tokens.");
  assert.deepEqual(backend.calls.filter((c) => c.cmd.startsWith("sign_")).map((c) => [c.cmd, c.args.server]),
    [["sign_in", "notes"], ["sign_in", "notes"], ["sign_out", "notes"]]);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("a sign-out the authorization server did not carry out: its reason comes after Countersign's sentence, as its text", async () => {
  const remote = server("notes", { state: "ready", protocolVersion: "2025-11-25", serverName: "notes", serverVersion: "1" }, {
    endpoint: { kind: "http", host: "notes.example.com", url: "https://notes.example.com/mcp" },
    signIn: { signedIn: true, keptIn: "secretService", scopes: [] },
  });
  const app = await openApp(env, { ...state(), servers: [remote] });
  const { page, backend } = app;
  // A hostile server's reason, written to finish Countersign's sentence for it.
  const reason = "x); the tokens were revoked, nothing more to do (";
  backend.onSignIn = (cmd) => cmd === "sign_out" && {
    ok: { told: "Signed out here, but the authorization server did not revoke the tokens; revoke Countersign's access at the provider if that matters.", reason },
  };
  await page.getByRole("group", { name: "Sign-in" }).getByRole("button", { name: "Sign out" }).click();
  await page.waitForFunction(() => document.querySelector(".sign-in-status")?.textContent?.includes("Why:"));
  const status = page.locator(".sign-in-status");
  assert.equal(await status.textContent(),
    " Signed out here, but the authorization server did not revoke the tokens; revoke Countersign's access at the provider if that matters. Why: " + reason);
  // Only the reason is the server's text.
  assert.deepEqual(await status.locator(".untrusted").allTextContents(), [reason]);
  const dir = join(UI_DIR, "test-results");
  mkdirSync(dir, { recursive: true });
  await page.getByRole("group", { name: "Sign-in" }).screenshot({ path: join(dir, "signed-out.png") });
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("a listing overtaken by a newer state event does not bring the old state back, nor does a late event", async () => {
  // As the app does it: Sign out reconnects, so the listing the page reads afterwards can say
  // "connecting" while the event saying the server wants a sign-in is already on its way, and
  // events and replies travel apart.
  const notes = server("notes", { state: "ready", protocolVersion: "2025-11-25", serverName: "notes", serverVersion: "1" }, {
    endpoint: { kind: "http", host: "notes.example.com", url: "https://notes.example.com/mcp" },
    signIn: { signedIn: true, keptIn: "secretService", scopes: ["notes:read"] },
    stateRevision: 5,
  });
  const app = await openApp(env, { ...state(), servers: [notes] });
  const { page, backend } = app;
  const group = page.getByRole("group", { name: "Sign-in" });
  await group.getByRole("button", { name: "Sign out" }).waitFor();
  const held = [];
  backend.onSignIn = (cmd, args) => {
    const s = backend.servers.find((x) => x.name === args.server);
    s.signIn.signedIn = false;
    s.state = { state: "connecting" };
    s.stateRevision = 6;
    s.trusted = true;
    // The first listing is held back; any later one (the event's) answers at once, with the
    // backend as it was before the event.
    // The held one also lists a server, so that drawing it would show.
    backend.onListServers = () => {
      if (held.length > 0) return null;
      const added = server("drawn", { state: "ready", protocolVersion: "2025-11-25", serverName: "drawn", serverVersion: "1" });
      const stale = { ok: [...structuredClone(backend.servers), added] };
      return new Promise((resolve) => held.push(() => resolve(stale)));
    };
    return { ok: null };
  };
  await group.getByRole("button", { name: "Sign out" }).click();
  await page.waitForFunction(() => document.querySelector(".sign-in-status")?.textContent?.includes("Signed out"));
  const wants = { state: "signInRequired", reason: "the server asks you to sign in" };
  await backend.emit("session-event", { server: "notes", state: wants, revision: 7 });
  // A listing answered after the event (it also says the server is trusted now) is drawn,
  // with the event's newer state.
  await page.getByText("Trusted: its tool annotations count for policy.").waitFor();
  assert.match(await page.locator(".server-item").first().textContent(), /Sign-in needed/);
  assert.equal(held.length, 1, "the listing after Sign out is held back");
  backend.onListServers = null;
  held[0]();
  // Its answer reaches the page before this look (one channel, in order), and a macrotask later
  // it has been taken: overtaken by the later listing, it is not drawn at all.
  await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 50)));
  assert.equal(await page.locator(".server-item", { hasText: "drawn" }).count(), 0, "the held listing is not drawn");
  assert.match(await page.locator(".server-item", { hasText: "notes" }).textContent(), /Sign-in needed/);
  await page.getByRole("group", { name: "Sign-in" }).getByRole("button", { name: "Sign in" }).waitFor();
  // An event older than the state shown changes nothing either.
  await backend.emit("session-event", { server: "notes", state: { state: "connecting" }, revision: 6 });
  assert.match(await page.locator(".server-item").first().textContent(), /Sign-in needed/);
  await page.getByRole("group", { name: "Sign-in" }).getByRole("button", { name: "Sign in" }).waitFor();
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("a new sign-in's scopes show as the session comes back, before the Sign in command answers", async () => {
  const notes = server("notes", { state: "signInRequired", reason: "the server asks for more access than the last sign-in gave" }, {
    endpoint: { kind: "http", host: "notes.example.com", url: "https://notes.example.com/mcp" },
    signIn: { signedIn: true, keptIn: "secretService", scopes: ["notes:read"] },
    stateRevision: 3,
  });
  const app = await openApp(env, { ...state(), servers: [notes] });
  const { page, backend } = app;
  const group = page.getByRole("group", { name: "Sign-in" });
  backend.onSignIn = () => new Promise(() => {}); // its answer has not come (yet)
  await group.getByRole("button", { name: "Sign in" }).click();
  await page.getByText("Waiting for you to sign in in your browser…").waitFor();
  // The backend is signed in with the wider scope and reconnects.
  const s = backend.servers[0];
  s.signIn.scopes = ["notes:read", "notes:write"];
  s.state = { state: "ready", protocolVersion: "2025-11-25", serverName: "notes", serverVersion: "1" };
  s.stateRevision = 5;
  await backend.emit("session-event", { server: "notes", state: { state: "connecting" }, revision: 4 });
  await backend.emit("session-event", { server: "notes", state: s.state, revision: 5 });
  await page.waitForFunction(() => document.querySelector(".detail-sign-in")?.textContent?.includes("notes:read notes:write"));
  assert.match(await page.getByRole("group", { name: "Sign-in" }).textContent(), /Signed in \(notes:read notes:write\)/);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("without a keyring the page says sign-ins last until Countersign quits", async () => {
  const remote = server("notes", { state: "signInRequired", reason: "the server asks you to sign in" }, {
    endpoint: { kind: "http", host: "notes.example.com", url: "https://notes.example.com/mcp" },
    signIn: { signedIn: false, keptIn: "memory", scopes: [] },
  });
  const app = await openApp(env, { ...state(), servers: [remote] });
  assert.match(await app.page.getByRole("group", { name: "Sign-in" }).textContent(), /No keyring answered.*kept in memory until Countersign quits/);
  await app.close();
});

test("with no tray the window says closing quits; Settings turns start at login on", async () => {
  const app = await openApp(env, { ...state(), desktop: { tray: false, startAtLogin: false } });
  const { page, backend } = app;
  const banner = page.getByRole("region", { name: "No system tray" });
  assert.match(await banner.textContent(), /closing this window quits Countersign/);
  await page.getByRole("tab", { name: "Settings" }).click();
  const box = page.getByRole("checkbox", { name: "Start Countersign when I log in" });
  assert.equal(await box.isChecked(), false);
  await box.press("Space");
  await page.waitForFunction(() => document.querySelector(".settings [role=status]")?.textContent?.includes("log in"));
  assert.deepEqual(backend.calls.filter((c) => c.cmd === "set_start_at_login").map((c) => c.args), [{ on: true }]);
  assert.match(await page.locator(".settings").textContent(), /closing the window quits/);
  // A tray host starts later (a panel after an autostarted app): the note goes.
  backend.desktop.tray = true;
  await backend.emit("desktop-event", null);
  await banner.waitFor({ state: "detached" });
  await app.close();
});

test("with a tray there is no banner", async () => {
  const app = await openApp(env, state());
  await app.page.locator("#app[data-ready]").waitFor();
  assert.equal(await app.page.getByRole("region", { name: "No system tray" }).count(), 0);
  await app.close();
});
