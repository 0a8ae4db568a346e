// Tool-call approval: an agent's call through the gateway shown in the ask dialog. Who (agent),
// where (server, endpoint), what (tool, title, hints, arguments); Allow once / Always allow /
// Deny / Escape map to accept (no content) / remember (allow, always, any arguments) / decline / cancel; focus starts on
// Deny; hostile text stays text; withdrawal and reload behave as for the other asks.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

import { launch, openApp, dialog, waitForAnswers, armed, UI_DIR } from "./support/app.mjs";
import { ALWAYS_ALLOW, formAsk, toolCallAsk, field } from "./support/fixtures.mjs";

const IMG = "<img src=x onerror=window.__pwned=1>";
const SCRIPT = "<script>window.__pwned=1</script>";
const RLO = "\u202E";

let env;
before(async () => {
  env = await launch();
});
after(async () => {
  await env?.close();
});

const deleteCall = (o = {}) => toolCallAsk({
  server: "tickets",
  agent: "Claude Code",
  tool: "delete_ticket",
  title: "Delete a ticket",
  description: "Deletes a ticket for good.",
  annotations: { destructiveHint: true, openWorldHint: true },
  args: { id: "T-7", force: true },
  ...o,
});

const focused = (page) => page.evaluate(() => document.activeElement?.textContent?.trim());

/** The text of the elements an attribute (aria-describedby) points at. */
const referenced = (page, locator, attr) => locator.getAttribute(attr).then((ids) =>
  page.evaluate((list) => list.split(" ").map((id) => document.getElementById(id)?.textContent ?? "").join(" "), ids));

test("a tool call opens a named dialog saying which agent, server, endpoint and tool; focus on Deny", async () => {
  const app = await openApp(env, { asks: [deleteCall({ id: 1, deadlineMs: Date.now() + 60_000 })] });
  const { page } = app;
  const d = page.getByRole("dialog", { name: "Approve a tool call" });
  assert.equal(await d.count(), 1);
  assert.equal(await d.evaluate((e) => e.tagName === "DIALOG" && e.matches(":modal")), true);
  assert.equal(await referenced(page, d, "aria-describedby"), "Claude Code wants to run delete_ticket on tickets.");
  const facts = await d.locator(".call-facts").evaluate((dl) =>
    [...dl.querySelectorAll("dt")].map((dt) => `${dt.textContent}=${dt.nextElementSibling.textContent}`));
  assert.equal(facts[0], "Agent=Claude Code");
  assert.equal(facts[1], "Server=tickets runs countersign-demo-server --stdio");
  assert.match(facts[2], /^Tool=delete_ticket — Delete a ticket/);
  assert.match(facts[2], /Deletes a ticket for good\./);
  assert.match(await d.locator(".ask-meta").textContent(), /closes at/);
  // The annotations are labelled as the server's own claims.
  const hints = d.getByRole("region", { name: "The server says:" });
  assert.match(await hints.textContent(), /destructive.*open world.*nothing has checked them/s);
  assert.equal(await focused(page), "Deny");
  // Always allow says what it remembers and where to undo it.
  const always = d.getByRole("button", { name: "Always allow" });
  const description = await referenced(page, always, "aria-describedby");
  assert.match(description, /remembered for Claude Code running delete_ticket on tickets/);
  assert.match(description, /revoke it in Settings/);
  // There is no form and no Submit.
  assert.equal(await d.getByRole("button", { name: "Submit" }).count(), 0);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("arguments shown whole in a box that scrolls count as seen only once scrolled to their end", async () => {
  // The key that matters sorts last, below the fold of the 24em box Show all opens.
  const args = { ...Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`a${String(i).padStart(2, "0")}`, i])), zzz_exec: "rm -rf ~" };
  const app = await openApp(env, { asks: [deleteCall({ id: 6, args })] });
  const { page } = app;
  const d = dialog(page);
  const once = d.getByRole("button", { name: "Allow once" });
  assert.equal(await once.getAttribute("aria-disabled"), "true", "clipped: not yet");
  await d.getByRole("button", { name: /^Show all/ }).click();
  const pre = d.getByRole("region", { name: "Arguments" }).locator("pre");
  assert.ok(await pre.evaluate((p) => p.scrollHeight > p.clientHeight), "the box scrolls");
  await page.waitForTimeout(700);
  assert.equal(await once.getAttribute("aria-disabled"), "true", "opened, but its end not seen");
  // The person scrolls the box down with the wheel, to "zzz_exec".
  await pre.hover();
  for (let i = 0; i < 20; i += 1) await page.mouse.wheel(0, 400);
  await armed(once);
  await app.close();
});

test("arguments are pretty JSON, clipped, with a Show all toggle", async () => {
  const args = { id: "T-7", note: "x".repeat(50), tags: Array.from({ length: 30 }, (_, i) => `tag-${i}`) };
  const app = await openApp(env, { asks: [deleteCall({ id: 2, args })] });
  const { page } = app;
  const d = dialog(page);
  const full = JSON.stringify(args, null, 2);
  const pre = d.getByRole("region", { name: "Arguments" }).locator("pre");
  const clipped = await pre.textContent();
  assert.ok(clipped.length < full.length, "clipped");
  assert.ok(clipped.startsWith('{\n  "id": "T-7",\n  "note": '), "pretty-printed");
  assert.ok(clipped.endsWith("…"));
  const toggle = d.getByRole("button", { name: /^Show all/ });
  assert.equal(await toggle.getAttribute("aria-expanded"), "false");
  await toggle.click();
  assert.equal(await pre.textContent(), full);
  const less = d.getByRole("button", { name: "Show less" });
  assert.equal(await less.getAttribute("aria-expanded"), "true");
  await less.click();
  assert.equal(await pre.textContent(), clipped);

  // Small arguments are shown whole, with no toggle; none at all says so.
  await page.keyboard.press("Escape");
  await d.waitFor({ state: "detached" });
  await app.backend.addAsk(deleteCall({ id: 3, args: { id: "T-8" } }));
  await d.waitFor();
  assert.equal(await d.locator(".call-args pre").textContent(), '{\n  "id": "T-8"\n}');
  assert.equal(await d.getByRole("button", { name: /^Show all/ }).count(), 0);
  await page.keyboard.press("Escape");
  await d.waitFor({ state: "detached" });
  // Line and paragraph separators are shown by name, never as line breaks: 300 of them would
  // push a later argument far below the Allow bar, uncounted by the clip, with nothing to show.
  await app.backend.addAsk(deleteCall({ id: 5, args: { a: `x${"\u2028".repeat(300)}`, command: "rm -rf ~" } }));
  await d.waitFor();
  assert.ok((await d.locator(".call-args pre").textContent()).startsWith('{\n  "a": "x⟨U+2028⟩⟨U+2028⟩'));
  assert.equal(await d.getByRole("button", { name: /^Show all/ }).count(), 1, "clipped");
  assert.equal(await d.getByRole("button", { name: "Allow once" }).getAttribute("aria-disabled"), "true");
  await page.keyboard.press("Escape");
  await d.waitFor({ state: "detached" });
  await app.backend.addAsk(deleteCall({ id: 4, args: null, annotations: null, description: null, title: null }));
  await d.waitFor();
  assert.equal(await d.locator(".call-args").textContent(), "ArgumentsNo arguments.");
  assert.equal(await d.locator(".call-hints").count(), 0, "no claims, no hints section");
  await app.close();
});

test("Allow once, Always allow, Deny, Escape and Close answer accept, remember (always), decline, cancel, cancel", async () => {
  const app = await openApp(env, { asks: [deleteCall({ id: 11 })] });
  const { page, backend } = app;
  const d = dialog(page);
  await d.getByRole("button", { name: "Allow once" }).click();
  await d.waitFor({ state: "detached" });
  assert.equal(await page.locator(".toast").textContent(), "tickets: Allowed once.");
  await backend.addAsk(deleteCall({ id: 12 }));
  await d.getByRole("button", { name: "Always allow" }).click();
  await d.waitFor({ state: "detached" });
  assert.equal(await page.locator(".toast").textContent(), "tickets: Allowed and remembered: always, any arguments (revocable in Settings).");
  await backend.addAsk(deleteCall({ id: 13 }));
  await d.getByRole("button", { name: "Deny" }).click();
  await d.waitFor({ state: "detached" });
  assert.equal(await page.locator(".toast").textContent(), "tickets: Denied.");
  await backend.addAsk(deleteCall({ id: 14 }));
  await d.waitFor();
  await page.keyboard.press("Escape");
  await d.waitFor({ state: "detached" });
  await backend.addAsk(deleteCall({ id: 15 }));
  await d.getByRole("button", { name: "Close" }).click();
  await d.waitFor({ state: "detached" });
  // Enter on the initial focus denies.
  await backend.addAsk(deleteCall({ id: 16 }));
  await d.waitFor();
  assert.equal(await focused(page), "Deny");
  await page.keyboard.press("Enter");
  await d.waitFor({ state: "detached" });
  // Tab then Enter allows once: the narrower yes comes first, "Always allow" after it (it came
  // first, and that keyboard path remembered an allow for any arguments, always).
  await backend.addAsk(deleteCall({ id: 17 }));
  await armed(d.getByRole("button", { name: "Allow once" }));
  assert.equal(await focused(page), "Deny");
  await page.keyboard.press("Tab");
  assert.equal(await focused(page), "Allow once");
  await page.keyboard.press("Tab");
  assert.equal(await focused(page), "Always allow");
  await page.keyboard.press("Shift+Tab");
  await page.keyboard.press("Enter");
  await d.waitFor({ state: "detached" });

  const answers = await waitForAnswers(backend, 7);
  assert.deepEqual(answers, [
    { id: 11, answer: { action: "accept", content: null } },
    { id: 12, answer: ALWAYS_ALLOW },
    { id: 13, answer: { action: "decline" } },
    { id: 14, answer: { action: "cancel" } },
    { id: 15, answer: { action: "cancel" } },
    { id: 16, answer: { action: "decline" } },
    { id: 17, answer: { action: "accept", content: null } },
  ]);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("while the answer is in flight the buttons are disabled; an IPC error keeps the dialog", async () => {
  const app = await openApp(env, { asks: [deleteCall({ id: 21 })] });
  const { page, backend } = app;
  let release;
  backend.onAnswer = () => new Promise((resolve) => {
    release = resolve;
  });
  const d = dialog(page);
  await d.getByRole("button", { name: "Allow once" }).click();
  await page.waitForFunction(() => document.querySelector(".ask")?.getAttribute("aria-busy") === "true");
  for (const name of ["Allow once", "Always allow", "Deny"]) {
    assert.equal(await d.getByRole("button", { name }).isDisabled(), true, name);
  }
  release({ err: { kind: "session", message: "the shell is gone" } });
  await d.getByRole("alert").getByText(/The answer was not sent: the shell is gone/).waitFor();
  assert.equal(await d.getByRole("button", { name: "Deny" }).isEnabled(), true);
  assert.equal(await d.count(), 1);
  await app.close();
});

test("withdrawn (the agent cancelled), it is torn down at once; reload redraws it; it queues with forms", async () => {
  const app = await openApp(env, {});
  const { page, backend } = app;
  await backend.addAsk(deleteCall({ id: 31 }));
  await dialog(page).waitFor();
  const goneAtOnce = await page.evaluate(async () => {
    await window.__emit("ask-event", { event: "resolved", id: 31, outcome: { outcome: "cancelled", reason: "agent" } });
    return document.querySelector("dialog[open]") === null && document.querySelector(".ask") === null;
  });
  assert.equal(goneAtOnce, true);
  assert.equal(await page.locator(".toast").textContent(), "tickets: The agent cancelled the call this question belonged to.");
  assert.equal(backend.answers.length, 0);

  // Answered elsewhere with Always allow (e.g. the same call's other ask): said as such.
  await backend.addAsk(deleteCall({ id: 32 }));
  await dialog(page).waitFor();
  await backend.resolve(32, { outcome: "alwaysAllowed" });
  await dialog(page).waitFor({ state: "detached" });
  assert.equal(await page.locator(".toast").textContent(), "tickets: This call was allowed (Always allow).");

  // A form first, then a tool call: the switcher names the call; reload keeps both.
  backend.asks = [
    formAsk({ id: 33, server: "demo", message: "Pick a plan", fields: [field.text("plan", { title: "Plan" })], receivedAtMs: 1 }),
    deleteCall({ id: 34, receivedAtMs: 2 }),
  ];
  await app.reload();
  const d = dialog(page);
  assert.match(await d.getByRole("navigation").textContent(), /2 questions waiting/);
  await d.getByRole("button", { name: "List all" }).click();
  await d.getByRole("button", { name: "tickets: run delete_ticket" }).click();
  await page.getByRole("dialog", { name: "Approve a tool call" }).waitFor();
  assert.equal(await focused(page), "Deny");
  await d.getByRole("button", { name: "Always allow" }).filter({ visible: true }).click();
  await page.getByRole("dialog", { name: /demo asks/ }).waitFor();
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(answer, { id: 34, answer: ALWAYS_ALLOW });
  await app.close();
});

test("markup and bidi controls from the server and the agent show as text", async () => {
  const ask = toolCallAsk({
    id: 41,
    server: `srv${IMG}`,
    agent: `agent${SCRIPT}${RLO}`,
    endpoint: { kind: "stdio", command: `run ${IMG}` },
    tool: `tool${IMG}${RLO}exe.txt`,
    title: `Title ${SCRIPT}`,
    description: `Desc ${IMG} ${RLO}gnp.exe`,
    annotations: { title: IMG, readOnlyHint: true, [SCRIPT]: IMG },
    args: { [IMG]: `${SCRIPT}${RLO}fdp.exe`, nested: { html: IMG } },
  });
  const app = await openApp(env, {});
  const { page, backend } = app;
  const before = await page.evaluate(() => document.querySelectorAll("img,script,iframe,object,embed,svg,a").length);
  await backend.addAsk(ask);
  const d = page.getByRole("dialog", { name: "Approve a tool call" });
  await d.waitFor();
  const text = await d.textContent();
  const shown = (s) => s.replaceAll(RLO, "⟨U+202E⟩");
  for (const literal of [`srv${IMG}`, `agent${SCRIPT}`, `run ${IMG}`, shown(`tool${IMG}${RLO}exe.txt`),
    `Title ${SCRIPT}`, shown(`Desc ${IMG} ${RLO}gnp.exe`)]) {
    assert.ok(text.includes(literal), `shows literally: ${literal}`);
  }
  const args = await d.locator(".call-args pre").textContent();
  assert.equal(args, shown(JSON.stringify(ask.arguments, null, 2)));
  assert.equal(await d.locator(".call-args .ctrl").count(), 1, "the bidi control is marked");
  assert.equal(await d.locator(".call-facts .ctrl").count(), 3, "in the agent's name, the tool's name and its description too");
  assert.doesNotMatch(text, new RegExp(RLO), "no raw bidi control anywhere in the dialog");
  assert.match(await d.locator(".call-hints").textContent(), /read-only/);
  await d.getByRole("button", { name: "Deny" }).click();
  await d.waitFor({ state: "detached" });
  assert.equal(await page.locator(".toast").textContent(), `srv${IMG}: Denied.`);
  assert.equal(await page.evaluate(() => document.querySelectorAll("img,script,iframe,object,embed,svg,a").length), before);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("History words tool-call outcomes as approvals", async () => {
  const now = Date.UTC(2025, 10, 25, 12, 0, 0);
  const entry = (id, outcome, delivered = true) => ({ run: "r", ask: deleteCall({ id, receivedAtMs: now - id * 1000 }), outcome, resolvedAtMs: now, delivered, interrupted: false });
  const app = await openApp(env, { history: { asks: [
    entry(1, { outcome: "alwaysAllowed" }),
    entry(2, { outcome: "accepted", content: null }),
    entry(3, { outcome: "declined" }, false),
    entry(4, { outcome: "cancelled", reason: "person" }),
    entry(5, { outcome: "cancelled", reason: "agent" }),
    // Allowed, but Countersign has no record of the call going out (it stopped first, or
    // the agent never made the call again).
    entry(6, { outcome: "accepted", content: null }, false),
  ], refused: [], gated: [], skipped: 0 } });
  const { page } = app;
  await page.getByRole("tab", { name: "History" }).click();
  const rows = page.locator(".history-table tbody tr");
  await rows.first().waitFor();
  const texts = await rows.allTextContents();
  assert.equal(texts.length, 6);
  assert.match(texts[0], /tickets.*for Claude Code.*Run delete_ticket.*Delete a ticket.*\{"id":"T-7","force":true\}.*Always allowed/);
  assert.match(texts[1], /Allowed once/);
  assert.match(texts[2], /Denied/);
  assert.match(texts[3], /Denied \(dismissed\)/);
  assert.match(texts[4], /Cancelled: The agent cancelled/);
  assert.match(texts[5], /Allowed once.*Not on record as carried out: the call may not have run/);
  for (const t of texts.slice(0, 5)) assert.doesNotMatch(t, /Not on record/, "a denial has nothing to carry out");
  await app.close();
});

test("screenshots of the tool-call dialog (looked at by a person)", async () => {
  const dir = join(UI_DIR, "test-results");
  mkdirSync(dir, { recursive: true });
  const ask = deleteCall({
    id: 50,
    deadlineMs: Date.now() + 5 * 60_000,
    description: "Deletes a ticket for good. Its comments and attachments are removed too; this cannot be undone.",
    annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
    args: { id: "T-7", force: true, reason: "Duplicate of T-3", notify: ["ana@example.com", "bo@example.com"],
      audit: { requestedBy: "Claude Code", ticket: { title: "Printer on fire", priority: "high", labels: ["hardware", "urgent"] } } },
  });
  for (const scheme of ["light", "dark"]) {
    const app = await openApp(env, { asks: [ask] }, { colorScheme: scheme });
    await app.page.screenshot({ path: join(dir, scheme === "light" ? "dialog-toolcall.png" : "dialog-toolcall-dark.png") });
    await app.close();
  }
});
