// The ask dialog's lifecycle: Submit / Decline / Escape / close map to accept / decline / cancel;
// focus, accessible name, keyboard-only use; several asks in any order; reload redraws from the
// backend; withdrawals tear the dialog down with a notice; backend errors keep it open; URL asks.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

import { launch, openApp, dialog, waitForAnswers, armed, UI_DIR } from "./support/app.mjs";
import { agentConfigs, formAsk, gatewayInfo, urlAsk, field } from "./support/fixtures.mjs";

let env;
before(async () => {
  env = await launch();
});
after(async () => {
  await env?.close();
});

const simple = (o = {}) => formAsk({
  message: "Delete ticket T-7?",
  fields: [field.text("reason", { title: "Reason", required: true }), field.boolean("confirm", { title: "Confirm deletion" })],
  ...o,
});

const focusedLabel = (page) => page.evaluate(() => {
  const a = document.activeElement;
  return a?.labels?.[0]?.textContent?.trim() ?? a?.textContent?.trim() ?? a?.tagName;
});

test("Submit, Decline, Escape and the close button answer accept, decline, cancel, cancel", async () => {
  const asks = [simple({ id: 1 }), simple({ id: 2 }), simple({ id: 3 }), simple({ id: 4 })];
  const app = await openApp(env, { asks: [asks[0]] });
  const { page, backend } = app;

  await page.keyboard.type("done");
  await dialog(page).getByRole("button", { name: "Submit" }).click();
  await dialog(page).waitFor({ state: "detached" });
  await backend.addAsk(asks[1]);
  await dialog(page).getByRole("button", { name: "Decline" }).click();
  await dialog(page).waitFor({ state: "detached" });
  await backend.addAsk(asks[2]);
  await page.keyboard.press("Escape");
  await dialog(page).waitFor({ state: "detached" });
  await backend.addAsk(asks[3]);
  await dialog(page).getByRole("button", { name: "Close" }).click();
  await dialog(page).waitFor({ state: "detached" });

  const answers = await waitForAnswers(backend, 4);
  assert.deepEqual(answers, [
    { id: 1, answer: { action: "accept", content: { reason: "done", confirm: false } } },
    { id: 2, answer: { action: "decline" } },
    { id: 3, answer: { action: "cancel" } },
    { id: 4, answer: { action: "cancel" } },
  ]);
  // The person's own answers get no alarming notice.
  assert.doesNotMatch(await page.getByRole("status").first().textContent(), /withdrew|timed out/);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("a question that closes on another day says which day, not just the time", async () => {
  const tomorrow = Date.now() + 26 * 3600_000;
  const ask = simple({ server: "ticket-desk", deadlineMs: tomorrow });
  const app = await openApp(env, { asks: [ask] });
  const meta = await app.page.getByRole("dialog").locator(".ask-meta").textContent();
  const year = await app.page.evaluate((ms) => String(new Date(ms).getFullYear()), tomorrow);
  const closes = meta.slice(meta.indexOf("closes at"));
  // The time alone never carries the year; the date does.
  assert.ok(closes.includes(year), closes);
  await app.close();
});

test("the dialog is a modal with an accessible name naming the server, focus in the first field", async () => {
  const ask = simple({ server: "ticket-desk", agent: "Claude Code", deadlineMs: Date.now() + 60_000 });
  const app = await openApp(env, { asks: [ask] });
  const { page } = app;
  const d = page.getByRole("dialog", { name: /ticket-desk asks/ });
  assert.equal(await d.count(), 1);
  assert.equal(await d.evaluate((e) => e.tagName === "DIALOG" && e.open && e.matches(":modal")), true);
  const describedBy = await d.getAttribute("aria-describedby");
  assert.equal(await page.evaluate((id) => document.getElementById(id)?.textContent, describedBy), "Delete ticket T-7?");
  const heading = await d.getByRole("heading").first().textContent();
  assert.match(heading, /ticket-desk asks/);
  const meta = await d.locator(".ask-meta").textContent();
  assert.match(meta, /runs countersign-demo-server --stdio/);
  assert.match(meta, /for agent Claude Code/);
  assert.match(meta, /closes at/);
  assert.equal(await focusedLabel(page), "Reason *");
  // The background is inert while the dialog is open.
  assert.equal(await page.evaluate(() => document.querySelector(".topbar").matches(":modal")), false);
  await app.close();
});

test("an empty form starts on its message, not on Submit; a URL ask starts on the address, not on Open", async () => {
  const app = await openApp(env, { asks: [formAsk({ id: 10, message: "Go ahead?", fields: [] })] });
  const { page, backend } = app;
  // An Enter meant for something else (typed into another window as this one came up) sends nothing.
  assert.equal(await focusedLabel(page), "Go ahead?");
  const submit = dialog(page).getByRole("button", { name: "Submit" });
  await armed(submit);
  await page.keyboard.press("Enter");
  await page.keyboard.press("Space");
  await page.waitForTimeout(100);
  assert.equal(backend.answers.length, 0);
  await submit.click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(answer, { id: 10, answer: { action: "accept", content: {} } });
  await backend.addAsk(urlAsk({ id: 11, url: "https://accounts.example.com/login" }));
  await dialog(page).waitFor();
  assert.equal(await page.evaluate(() => document.activeElement?.className), "url-box");
  await app.close();
});

test("a question that opens while the person types elsewhere in the window does not take their typing", async () => {
  const app = await openApp(env, { gateway: gatewayInfo(), agentConfigs: agentConfigs() });
  const { page, backend } = app;
  await page.getByRole("tab", { name: "Connect agents" }).click();
  const name = page.getByRole("region", { name: "Agents", exact: true }).getByRole("textbox", { name: "Agent name" });
  await name.click();
  await page.keyboard.type("abc");
  await backend.addAsk(simple({ id: 30 }));
  await dialog(page).waitFor();
  // The rest of their typing, and an Enter after the dialog armed, go to no field of the server's.
  await page.keyboard.type("secret");
  await armed(dialog(page).getByRole("button", { name: "Submit" }));
  await page.keyboard.press("Enter");
  await page.waitForTimeout(100);
  assert.equal(backend.answers.length, 0, "nothing was submitted");
  assert.equal(await dialog(page).getByRole("textbox", { name: /Reason/ }).inputValue(), "");
  assert.equal(await focusedLabel(page), "Delete ticket T-7?");
  // Tab reaches the first field, as from the top of the question.
  await page.keyboard.press("Tab");
  assert.equal(await focusedLabel(page), "Reason *");
  await app.close();
});

test("a question withdrawn while the person types in it does not hand their typing to the next", async () => {
  const first = simple({ id: 40, server: "notes", message: "Name the note." });
  const next = simple({ id: 41, server: "tickets", message: "Delete ticket T-7?" });
  const app = await openApp(env, { asks: [first, next] });
  const { page, backend } = app;
  await dialog(page).waitFor();
  assert.equal(await focusedLabel(page), "Reason *");
  await page.keyboard.type("my ");
  // The first server withdraws its question mid-word; the next one takes the dialog.
  await backend.resolve(40, { outcome: "cancelled", reason: "server" });
  await page.locator("section.ask", { hasText: "Name the note." }).waitFor({ state: "detached" });
  await page.keyboard.type("delete");
  await armed(dialog(page).getByRole("button", { name: "Submit" }));
  await page.keyboard.press("Enter");
  await page.waitForTimeout(100);
  assert.equal(backend.answers.length, 0, "nothing was submitted");
  assert.equal(await dialog(page).getByRole("textbox", { name: /Reason/ }).inputValue(), "");
  assert.equal(await focusedLabel(page), "Delete ticket T-7?");
  await app.close();
});

test("keyboard only: type, Tab, Space and Enter complete a form", async () => {
  const ask = formAsk({ id: 20, fields: [
    field.text("name", { title: "Name", required: true }),
    field.single("plan", ["basic", "pro", "team"], { title: "Plan", required: true }),
    field.boolean("terms", { title: "Accept terms" }),
    field.multi("extras", ["support", "backup"], { title: "Extras" }),
    field.number("seats", { title: "Seats", integer: true, minimum: 1 }),
  ] });
  const app = await openApp(env, { asks: [ask] });
  const { page, backend } = app;
  await page.keyboard.type("Ana");
  await page.keyboard.press("Tab");
  await page.keyboard.type("p"); // type-ahead in the closed select: "pro"
  await page.keyboard.press("Tab");
  await page.keyboard.press("Space"); // terms
  await page.keyboard.press("Tab");
  await page.keyboard.press("Tab");
  await page.keyboard.press("Space"); // backup
  await page.keyboard.press("Tab");
  await page.keyboard.type("3");
  await armed(dialog(page).getByRole("button", { name: "Submit" })); // a person takes longer than that
  await page.keyboard.press("Enter"); // implicit submission from the number field
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(answer, { id: 20, answer: { action: "accept", content: {
    name: "Ana", plan: "pro", terms: true, extras: ["backup"], seats: 3,
  } } });
  await dialog(page).waitFor({ state: "detached" });

  // Tab order reaches Decline and Submit after the fields; Enter on Decline declines.
  await backend.addAsk(formAsk({ id: 21, fields: [field.text("x", { title: "X" })] }));
  await dialog(page).waitFor();
  await page.keyboard.press("Tab");
  assert.equal(await focusedLabel(page), "Decline");
  await page.keyboard.press("Enter");
  const answers = await waitForAnswers(backend, 2);
  assert.deepEqual(answers[1], { id: 21, answer: { action: "decline" } });
  await app.close();
});

test("several asks: the count shows and they can be answered in any order", async () => {
  const asks = [
    simple({ id: 31, server: "alpha", message: "First question", receivedAtMs: 1000 }),
    simple({ id: 32, server: "beta", message: "Second question", receivedAtMs: 2000 }),
    simple({ id: 33, server: "gamma", message: "Third question", receivedAtMs: 3000 }),
  ];
  const app = await openApp(env, { asks });
  const { page, backend } = app;
  const d = dialog(page);
  assert.match(await d.getByRole("navigation").textContent(), /3 questions waiting/);
  assert.match(await page.title(), /3 questions waiting/);
  assert.match(await d.getByRole("heading", { level: 2 }).filter({ visible: true }).textContent(), /alpha asks/);
  // Start typing in the first, then answer the third, then the first, then the second.
  await page.keyboard.type("keep me");
  await d.getByRole("button", { name: "List all" }).click();
  await d.getByRole("button", { name: /gamma: Third question/ }).click();
  assert.equal(await page.getByRole("dialog", { name: /gamma asks/ }).count(), 1);
  await page.keyboard.type("third");
  await d.getByRole("button", { name: "Submit" }).filter({ visible: true }).click();
  await waitForAnswers(backend, 1);
  await page.getByRole("dialog", { name: /alpha asks/ }).waitFor();
  assert.match(await d.getByRole("navigation").textContent(), /2 questions waiting/);
  assert.equal(await d.getByLabel("Reason").filter({ visible: true }).inputValue(), "keep me", "what was typed is kept");
  await d.getByRole("button", { name: "Submit" }).filter({ visible: true }).click();
  await page.getByRole("dialog", { name: /beta asks/ }).waitFor();
  assert.equal(await d.getByRole("navigation").isHidden(), true, "one question left: no switcher");
  await d.getByRole("button", { name: "Decline" }).filter({ visible: true }).click();
  await d.waitFor({ state: "detached" });
  const answers = await waitForAnswers(backend, 3);
  assert.deepEqual(answers.map((a) => [a.id, a.answer.action]), [[33, "accept"], [31, "accept"], [32, "decline"]]);
  assert.deepEqual(answers[0].answer.content, { reason: "third", confirm: false });
  assert.deepEqual(answers[1].answer.content, { reason: "keep me", confirm: false });
  await app.close();
});

test("a new ask does not take over the one being filled in", async () => {
  const app = await openApp(env, { asks: [simple({ id: 41, server: "alpha" })] });
  const { page, backend } = app;
  await page.keyboard.type("half");
  await backend.addAsk(simple({ id: 42, server: "beta" }));
  const d = dialog(page);
  await d.getByRole("navigation").waitFor();
  assert.match(await d.getByRole("navigation").textContent(), /2 questions waiting/);
  assert.equal(await page.getByRole("dialog", { name: /alpha asks/ }).count(), 1);
  assert.match(await d.getByRole("status").textContent(), /New question from beta/);
  assert.equal(await focusedLabel(page), "Reason *");
  await page.keyboard.type("-done");
  assert.equal(await d.getByLabel("Reason").filter({ visible: true }).inputValue(), "half-done");
  await app.close();
});

test("reload redraws every pending ask from pending_asks", async () => {
  const asks = [simple({ id: 51, server: "alpha", receivedAtMs: 1 }), simple({ id: 52, server: "beta", receivedAtMs: 2 })];
  const app = await openApp(env, { asks });
  const { page, backend } = app;
  await page.keyboard.type("typed before reload");
  await app.reload();
  const d = dialog(page);
  assert.match(await d.getByRole("navigation").textContent(), /2 questions waiting/);
  assert.equal(await page.getByRole("dialog", { name: /alpha asks/ }).count(), 1);
  assert.equal(backend.calls.filter((c) => c.cmd === "pending_asks").length, 2);
  assert.equal(await focusedLabel(page), "Reason *");
  // One is withdrawn while the page is away; the next load shows only the other.
  backend.asks = backend.asks.filter((a) => a.id !== 51);
  await app.reload();
  assert.equal(await page.getByRole("dialog", { name: /beta asks/ }).count(), 1);
  assert.equal(await d.getByRole("navigation").isHidden(), true);
  // And with nothing pending, no dialog.
  backend.asks = [];
  await app.reload();
  assert.equal(await dialog(page).count(), 0);
  await app.close();
});

test("a withdrawal removes the dialog at once and says why", async () => {
  const reasons = {
    server: "The server withdrew this question.",
    timeout: "This question timed out.",
    agent: "The agent cancelled the call this question belonged to.",
    disconnect: "The server disconnected.",
    shutdown: "Countersign is quitting.",
  };
  const app = await openApp(env, {});
  const { page, backend } = app;
  let id = 60;
  for (const [reason, text] of Object.entries(reasons)) {
    id += 1;
    await backend.addAsk(simple({ id, server: "desk" }));
    await dialog(page).waitFor();
    // Emit and check in the same turn: the handler removes the dialog synchronously.
    const goneAtOnce = await page.evaluate(async ([askId, r]) => {
      await window.__emit("ask-event", { event: "resolved", id: askId, outcome: { outcome: "cancelled", reason: r } });
      return document.querySelector("dialog[open]") === null && document.querySelector(".ask") === null;
    }, [id, reason]);
    assert.equal(goneAtOnce, true, `dialog gone on ${reason}`);
    const notice = page.locator(".toast[role=status]");
    assert.equal(await notice.textContent(), `desk: ${text}`);
  }
  assert.equal(backend.answers.length, 0, "a withdrawn ask is never answered");
  await app.close();
});

test("withdrawing one of several keeps the dialog with the others and notes it inside", async () => {
  const asks = [simple({ id: 71, server: "alpha", receivedAtMs: 1 }), simple({ id: 72, server: "beta", receivedAtMs: 2 })];
  const app = await openApp(env, { asks });
  const { page, backend } = app;
  await backend.resolve(71, { outcome: "cancelled", reason: "timeout" });
  await page.getByRole("dialog", { name: /beta asks/ }).waitFor();
  assert.equal(await dialog(page).getByRole("status").textContent(), "alpha: This question timed out.");
  assert.equal(await focusedLabel(page), "Reason *");
  // A `resolved` for something unknown, and a late `added` for a resolved ask, change nothing.
  await backend.emit("ask-event", { event: "resolved", id: 999, outcome: { outcome: "declined" } });
  await backend.emit("ask-event", { event: "added", ask: asks[0] });
  assert.equal(await page.locator(".ask").count(), 1);
  await app.close();
});

test("backend per-field errors are shown beside the fields and the dialog stays", async () => {
  const ask = formAsk({ id: 80, fields: [
    field.text("topic", { title: "Topic" }),
    field.number("count", { title: "Count" }),
  ] });
  const backend = { asks: [ask] };
  const app = await openApp(env, backend);
  const { page } = app;
  let refuse = true;
  app.backend.onAnswer = () => refuse ? { err: { kind: "answer", message: "invalid answer", error: { kind: "invalid", errors: [
    { field: "", message: "\"extra\" is not a field of this form" },
    { field: "topic", message: "Must be at least 3 characters" },
    { field: "count", message: "Must be at most 8" },
  ] } } } : null;
  const d = dialog(page);
  await page.keyboard.type("ab");
  await d.getByLabel("Count").fill("9");
  await d.getByRole("button", { name: "Submit" }).click();
  await d.getByText("Must be at least 3 characters").waitFor();
  assert.equal(await d.getByLabel("Topic").getAttribute("aria-invalid"), "true");
  const describedBy = await d.getByLabel("Topic").getAttribute("aria-describedby");
  assert.match(await page.evaluate((ids) => ids.split(" ").map((i) => document.getElementById(i).textContent).join("|"), describedBy),
    /Must be at least 3 characters/);
  assert.match(await d.locator(".field-number .field-error").textContent(), /Must be at most 8/);
  assert.match(await d.getByRole("alert").textContent(), /"extra" is not a field of this form/);
  assert.equal(await d.count(), 1);
  assert.equal(await d.getByRole("button", { name: "Submit" }).isEnabled(), true);
  assert.equal(await focusedLabel(page), "Topic");
  // Corrected, it is sent and the dialog goes.
  refuse = false;
  await page.keyboard.type("c");
  await d.getByLabel("Count").fill("8");
  await d.getByRole("button", { name: "Submit" }).click();
  await d.waitFor({ state: "detached" });
  const answers = app.backend.answers;
  assert.equal(answers.length, 2);
  assert.deepEqual(answers[1].answer.content, { topic: "abc", count: 8 });
  await app.close();
});

test("an answer to an ask that is gone removes it with a notice", async () => {
  const app = await openApp(env, { asks: [simple({ id: 90 })] });
  const { page, backend } = app;
  backend.onAnswer = () => ({ err: { kind: "answer", message: "not pending", error: { kind: "notPending" } } });
  await page.keyboard.type("x");
  await dialog(page).getByRole("button", { name: "Submit" }).click();
  await dialog(page).waitFor({ state: "detached" });
  assert.match(await page.locator(".toast").textContent(), /no longer waiting/);
  await app.close();
});

test("Countersign's own sign-in says it is Countersign's; a server's question worded the same does not", async () => {
  const message = "Sign in to notes so Countersign can reach it for you. The sign-in page is at auth.example.com.";
  const url = "https://auth.example.com/authorize?state=s";
  const app = await openApp(env, { asks: [urlAsk({ id: 120, server: "notes", url, message, signIn: true })] });
  const { page, backend } = app;
  const ours = page.getByRole("dialog", { name: "Sign in to notes" });
  await ours.waitFor();
  assert.match(await ours.locator(".ask-meta").textContent(), /^From Countersign · /);
  await ours.getByRole("button", { name: "Decline" }).click();
  await waitForAnswers(backend, 1);
  // The same words from the server itself: titled by the server, no "From Countersign".
  await backend.addAsk(urlAsk({ id: 121, server: "notes", url, message }));
  const theirs = page.getByRole("dialog", { name: "notes asks" });
  await theirs.waitFor();
  assert.doesNotMatch(await theirs.textContent(), /From Countersign/);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("URL ask: shows the full URL and its host, Open accepts, Escape cancels; nothing is linked or fetched", async () => {
  const url = "https://accounts.example.com/oauth/authorize?client_id=abc&state=xyz";
  const app = await openApp(env, { asks: [urlAsk({ id: 100, server: "github", url, message: "Authorize access" })] });
  const { page, backend } = app;
  const requests = [];
  page.on("request", (r) => requests.push(r.url()));
  const d = page.getByRole("dialog", { name: /github asks/ });
  assert.equal(await d.locator(".url-host").textContent(), "accounts.example.com");
  assert.equal(await d.locator(".url-full").textContent(), url);
  assert.equal(await page.locator("a, link[rel=prefetch], link[rel=preconnect]").count(), 0);
  assert.equal(await d.getByRole("button", { name: "Submit" }).count(), 0);
  assert.equal(await d.locator(".url-warnings").count(), 0);
  await d.getByRole("button", { name: "Open" }).click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(answer, { id: 100, answer: { action: "accept", content: null } });
  await page.getByText("Handed to your browser.").waitFor();
  // Later the server reports it finished: the window says so, naming server and host.
  await backend.emit("ask-event", { event: "urlCompleted", id: 100, server: "github", host: "accounts.example.com" });
  await page.getByText("finished at accounts.example.com, the server reports.").waitFor();

  await backend.addAsk(urlAsk({ id: 101, url: "http://xn--pple-43d.com/login", warnings: ["plainHttp", "punycode", "local"] }));
  await dialog(page).waitFor();
  const warnings = await dialog(page).locator(".url-warnings").textContent();
  assert.match(warnings, /Not encrypted/);
  assert.match(warnings, /international characters/);
  assert.match(warnings, /on your computer or your local network/);
  await page.keyboard.press("Escape");
  await dialog(page).waitFor({ state: "detached" });
  await backend.addAsk(urlAsk({ id: 102, url: "javascript:alert(1)" }));
  await dialog(page).waitFor();
  assert.equal(await dialog(page).getByRole("button", { name: "Open" }).isDisabled(), true);
  await dialog(page).getByRole("button", { name: "Decline" }).click();
  const answers = await waitForAnswers(backend, 3);
  assert.deepEqual(answers.slice(1).map((a) => a.answer.action), ["cancel", "decline"]);
  assert.deepEqual(requests.filter((r) => !r.startsWith(env.url.split("/tests/")[0])), []);
  await app.close();
});

test("a select with no default starts empty, and an optional one left empty is omitted", async () => {
  const ask = formAsk({ id: 110, fields: [
    field.single("size", ["S", "M", "L"], { title: "Size" }),
    field.single("color", [["r", "Red"], ["g", "Green"]], { title: "Colour" }),
  ] });
  const app = await openApp(env, { asks: [ask] });
  const { page, backend } = app;
  for (const label of ["Size", "Colour"]) {
    const select = dialog(page).getByLabel(label);
    assert.equal(await select.inputValue(), "");
    assert.equal(await select.evaluate((s) => s.selectedOptions[0].textContent), "Choose…");
  }
  await dialog(page).getByLabel("Colour").selectOption({ label: "Green" });
  await dialog(page).getByRole("button", { name: "Submit" }).click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(answer.answer.content, { color: "g" });
  await app.close();
});

test("screenshots of the dialog (looked at by a person)", async () => {
  const dir = join(UI_DIR, "test-results");
  mkdirSync(dir, { recursive: true });
  const meeting = formAsk({
    id: 120,
    server: "demo",
    agent: "Claude Code",
    endpoint: { kind: "stdio", command: "countersign-demo-server" },
    deadlineMs: Date.now() + 5 * 60_000,
    message: "Book a meeting: fill in the details.",
    fields: [
      field.text("topic", { title: "Topic", description: "What the meeting is about", required: true, minLength: 3, maxLength: 80 }),
      field.text("attendee", { title: "Attendee email", format: "email", required: true }),
      field.text("start", { title: "Start", format: "date-time" }),
      field.number("attendeeCount", { title: "Number of attendees", integer: true, minimum: 1, maximum: 20, default: 2 }),
      field.boolean("sendInvites", { title: "Send invites", default: true }),
      field.single("priority", [["low", "Low"], ["normal", "Normal"], ["high", "High: bump other meetings"]], { title: "Priority", default: "normal" }),
      field.single("timezone", [["UTC", "UTC"], ["Europe/Paris", "Paris"]], { title: "Time zone" }),
      field.multi("equipment", ["projector", "whiteboard", "speakerphone"], { title: "Equipment", minItems: 1, maxItems: 2 }),
    ],
  });
  const second = formAsk({ id: 121, server: "tickets", message: "Delete ticket T-7 \"Printer on fire\"? This cannot be undone.",
    fields: [field.boolean("confirm", { title: "Confirm deletion", description: "Tick to delete the ticket for good.", required: true })] });
  for (const scheme of ["light", "dark"]) {
    const app = await openApp(env, { asks: [meeting, second] }, { colorScheme: scheme });
    await app.page.keyboard.type("Quarterly review");
    await app.page.screenshot({ path: join(dir, scheme === "light" ? "dialog.png" : "dialog-dark.png") });
    if (scheme === "light") {
      await dialog(app.page).getByRole("button", { name: "Submit" }).click();
      await dialog(app.page).getByRole("alert").waitFor();
      await app.page.screenshot({ path: join(dir, "dialog-errors.png") });
    }
    await app.close();
  }
  const app = await openApp(env, { asks: [urlAsk({ id: 122, server: "github", agent: "Cursor",
    message: "Sign in to GitHub to let the server read your repositories.",
    url: "http://xn--gthub-n4a.com/login/oauth/authorize?client_id=Iv1.8a61f9b3a7aba766&scope=repo",
    warnings: ["plainHttp", "punycode"] })] });
  await app.page.screenshot({ path: join(dir, "dialog-url.png") });
  await app.close();
});
