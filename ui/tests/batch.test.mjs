// Several at once (issue 10 item 5): with more than one tool call waiting from one agent to one
// server, "Decide together (N)" lists them with a checkbox each (none ticked), "Allow selected"
// (ticked: accept; every other call listed: decline) and "Deny all". Nothing is allowed that was
// not on the screen: a call arriving while the list is open joins it unticked and re-arms Allow
// selected; a withdrawn call leaves the list and is never answered; clipped arguments must be
// shown whole before their checkbox can be ticked; Allow selected arms like every yes. Escape
// leaves without answering. Calls from another agent (or server) are never in the same list.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";

import { launch, openApp, dialog, waitForAnswers, armed, centre } from "./support/app.mjs";
import { toolCallAsk } from "./support/fixtures.mjs";

const TAG = "<img src=x onerror=window.__pwned=1>";
const RLO = "\u202E";
const ZWSP = "\u200B";

let env;
before(async () => {
  env = await launch();
});
after(async () => {
  await env?.close();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A call from `agent` to `server` running `tool` with `{id: "T-<id>"}`. */
const call = (id, o = {}) => toolCallAsk({
  id, server: "tickets", agent: "Claude Code", tool: `close_ticket`, args: { id: `T-${id}` }, receivedAtMs: id, ...o,
});

/** The batch's checkbox for the call with `id`. */
const box = (page, id) => page.locator(`.batch-line[data-ask-id="${id}"] input[type=checkbox]`);
const allowSelected = (page) => dialog(page).getByRole("button", { name: "Allow selected" });
const sorted = (ids) => [...ids].sort((a, b) => a - b);

/** Answers by action: {accept: [ids], decline: [ids]}. */
function byAction(answers) {
  const out = {};
  for (const { id, answer } of answers) (out[answer.action] ??= []).push(id);
  for (const k of Object.keys(out)) out[k] = sorted(out[k]);
  return out;
}

async function openBatch(page, n) {
  await dialog(page).getByRole("button", { name: `Decide together (${n})` }).click();
  await page.locator(".batch").waitFor();
}

test("five calls, three ticked: Allow selected allows exactly those three and denies the other two", async () => {
  const asks = [1, 2, 3, 4, 5].map((id) => call(id));
  const app = await openApp(env, { asks });
  const { page, backend } = app;
  const d = dialog(page);
  // The queue offers the batch beside Decline all.
  await openBatch(page, 5);
  assert.equal(await page.getByRole("dialog", { name: "Decide together" }).count(), 1);
  assert.match(await d.locator(".batch-summary").textContent(), /^Claude Code wants to run 5 tool calls on tickets\.$/);
  assert.equal(await d.getByRole("navigation", { name: "Waiting questions" }).isVisible(), false, "the queue steps aside");
  const lines = await d.locator(".batch-line label").allTextContents();
  assert.deepEqual(lines.map((l) => l.trim()), [1, 2, 3, 4, 5].map((id) => `close_ticket { "id": "T-${id}" }`));
  // None ticked; Allow selected is disabled with nothing ticked, Deny all is not.
  for (const id of [1, 2, 3, 4, 5]) assert.equal(await box(page, id).isChecked(), false);
  await sleep(600);
  assert.equal(await allowSelected(page).getAttribute("aria-disabled"), "true", "nothing ticked: nothing to allow");
  const at = await centre(allowSelected(page));
  await page.mouse.click(at.x, at.y);
  await sleep(100);
  assert.equal(backend.answers.length, 0);

  // Each checkbox is named by its tool and its arguments.
  await d.getByRole("checkbox", { name: 'close_ticket { "id": "T-2" }' }).check();
  await box(page, 4).check();
  await box(page, 5).check();
  assert.match(await d.locator(".batch-tally").textContent(), /3 of 5 ticked/);
  await armed(allowSelected(page));
  await allowSelected(page).click();
  const answers = await waitForAnswers(backend, 5);
  await d.waitFor({ state: "detached" });
  assert.equal(answers.length, 5);
  assert.deepEqual(byAction(answers), { accept: [2, 4, 5], decline: [1, 3] });
  for (const a of answers) {
    if (a.answer.action === "accept") assert.deepEqual(a.answer, { action: "accept", content: null });
  }
  assert.equal(await page.locator(".toast").textContent(), "tickets: Allowed 3 calls once, denied 2.");
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("the summary counts what went out: an Allow the log could not record, or for a call already gone, is not 'Allowed'", async () => {
  const asks = [1, 2, 3].map((id) => call(id));
  const app = await openApp(env, { asks });
  const { page, backend } = app;
  // The disk is full for call 1's answer; call 2 was withdrawn the moment it was answered.
  backend.onAnswer = (id) => {
    if (id === 1) {
      backend.asks = backend.asks.filter((a) => a.id !== 1);
      return { ok: { outcome: "cancelled", reason: "auditFailed" } };
    }
    if (id === 2) {
      backend.asks = backend.asks.filter((a) => a.id !== 2);
      return { err: { kind: "answer", message: "not pending", error: { kind: "notPending" } } };
    }
    return null;
  };
  await openBatch(page, 3);
  for (const id of [1, 2, 3]) await box(page, id).check();
  await armed(allowSelected(page));
  await allowSelected(page).click();
  await waitForAnswers(backend, 3);
  await dialog(page).waitFor({ state: "detached" });
  await page.waitForFunction(() => document.querySelector(".toast")?.textContent !== "");
  assert.equal(await page.locator(".toast").textContent(),
    "tickets: Allowed 1 call once, denied 0. 1 went out as no: Countersign could not record its answer (see History). 1 had ended before the answer.");
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("Deny all denies every call listed, at once (a no needs no arming)", async () => {
  const asks = [1, 2, 3, 4, 5].map((id) => call(id));
  const app = await openApp(env, { asks });
  const { page, backend } = app;
  await openBatch(page, 5);
  await box(page, 3).check();
  await dialog(page).getByRole("button", { name: "Deny all" }).click();
  const answers = await waitForAnswers(backend, 5);
  await dialog(page).waitFor({ state: "detached" });
  assert.deepEqual(byAction(answers), { decline: [1, 2, 3, 4, 5] });
  assert.equal(await page.locator(".toast").textContent(), "tickets: Denied 5 calls.");
  await app.close();
});

test("a call arriving while the list is open joins it unticked, re-arms Allow selected, and is allowed only once ticked", async () => {
  const app = await openApp(env, { asks: [call(1), call(2), call(3)] });
  const { page, backend } = app;
  const d = dialog(page);
  await openBatch(page, 3);
  await box(page, 1).check();
  await box(page, 2).check();
  await box(page, 3).check();
  const allow = allowSelected(page);
  await armed(allow);
  const at = await centre(allow);

  // Round one: the new call is shown unticked; a click right after it came does nothing.
  await backend.addAsk(call(4, { args: { id: "T-4", note: "arrived late" } }));
  assert.equal(await allow.getAttribute("aria-disabled"), "true", "the list changed: armed afresh");
  await page.mouse.click(at.x, at.y);
  await sleep(100);
  assert.equal(backend.answers.length, 0, "a click within 500 ms of the change did nothing");
  assert.equal(await box(page, 4).isChecked(), false, "joins unticked");
  assert.match(await page.locator('.batch-line[data-ask-id="4"]').textContent(), /new: arrived while this list was open/);
  assert.match(await d.locator(".batch-summary").textContent(), /4 tool calls/);
  assert.match(await d.getByRole("status").first().textContent(), /joined the list, unticked/);
  // Allow selected does not cover it: it is denied with the other unticked ones.
  await armed(allow);
  await allow.click();
  let answers = await waitForAnswers(backend, 4);
  assert.deepEqual(byAction(answers), { accept: [1, 2, 3], decline: [4] });
  await d.waitFor({ state: "detached" });

  // Round two: a call that arrives and is ticked after it appeared is allowed.
  backend.calls = [];
  await backend.addAsk(call(11));
  await backend.addAsk(call(12));
  await openBatch(page, 2);
  await box(page, 11).check();
  await armed(allow);
  await backend.addAsk(call(13));
  assert.equal(await allow.getAttribute("aria-disabled"), "true");
  await box(page, 13).check();
  await armed(allow);
  await allow.click();
  answers = await waitForAnswers(backend, 3);
  assert.deepEqual(byAction(answers), { accept: [11, 13], decline: [12] });
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("a call withdrawn while the list is open leaves it and is never answered", async () => {
  const app = await openApp(env, { asks: [call(1), call(2), call(3), call(4)] });
  const { page, backend } = app;
  const d = dialog(page);
  await openBatch(page, 4);
  for (const id of [1, 2, 3]) await box(page, id).check();
  const allow = allowSelected(page);
  await armed(allow);
  await backend.resolve(2, { outcome: "cancelled", reason: "agentCancelled" });
  assert.equal(await page.locator('.batch-line[data-ask-id="2"]').count(), 0, "gone from the list at once");
  assert.match(await d.locator(".batch-summary").textContent(), /3 tool calls/);
  assert.equal(await allow.getAttribute("aria-disabled"), "true", "the list changed: armed afresh");
  await armed(allow);
  await allow.click();
  const answers = await waitForAnswers(backend, 3);
  await sleep(200);
  assert.equal(backend.answers.length, 3);
  assert.deepEqual(byAction(answers), { accept: [1, 3], decline: [4] });
  assert.ok(!backend.answers.some((a) => a.id === 2), "the withdrawn call was never answered");

  // Withdrawn down to none: the list closes by itself, answering nothing.
  backend.calls = [];
  await backend.addAsk(call(21));
  await backend.addAsk(call(22));
  await openBatch(page, 2);
  await backend.resolve(21, { outcome: "cancelled", reason: "agentCancelled" });
  await backend.resolve(22, { outcome: "cancelled", reason: "agentCancelled" });
  await d.waitFor({ state: "detached" });
  assert.equal(backend.answers.length, 0);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("Allow selected arms: a click within 500 ms of the list opening does nothing; one after answers", async () => {
  const app = await openApp(env, { asks: [call(1), call(2)] });
  const { page, backend } = app;
  // Where Allow selected will be, found once (Escape leaves without answering).
  await openBatch(page, 2);
  const at = await centre(allowSelected(page));
  const tickAt = await centre(box(page, 1));
  await page.keyboard.press("Escape");
  await page.locator(".batch").waitFor({ state: "detached" });
  assert.equal(backend.answers.length, 0, "Escape answered nothing");

  let unarmed;
  for (let attempt = 0; ; attempt += 1) {
    const start = Date.now();
    await dialog(page).getByRole("button", { name: "Decide together (2)" }).click();
    await page.mouse.click(tickAt.x, tickAt.y);
    await page.mouse.click(at.x, at.y);
    // Read within the same early moment (after it, the list may have armed).
    unarmed = await allowSelected(page).getAttribute("aria-disabled");
    const took = Date.now() - start;
    await sleep(150);
    assert.equal(backend.answers.length, 0, "the early click did nothing");
    if (took < 400 || attempt === 4) {
      assert.ok(took < 400, `clicked within ${took} ms`);
      break;
    }
    await page.keyboard.press("Escape");
    await page.locator(".batch").waitFor({ state: "detached" });
  }
  assert.equal(await box(page, 1).isChecked(), true);
  assert.equal(unarmed, "true");
  await armed(allowSelected(page));
  await page.mouse.click(at.x, at.y);
  const answers = await waitForAnswers(backend, 2);
  assert.deepEqual(byAction(answers), { accept: [1], decline: [2] });
  await app.close();
});

test("by keyboard: Tab reaches checkboxes and buttons, Space ticks, Escape goes back answering nothing", async () => {
  const app = await openApp(env, { asks: [call(1), call(2), call(3)] });
  const { page, backend } = app;
  const d = dialog(page);
  await d.getByRole("button", { name: "Decide together (3)" }).focus();
  await page.keyboard.press("Enter");
  await page.locator(".batch").waitFor();
  const focused = () => page.evaluate(() => {
    const a = document.activeElement;
    return a instanceof HTMLInputElement ? `box ${a.closest(".batch-line").dataset.askId}` : a?.textContent?.trim();
  });
  assert.equal(await focused(), "box 1", "focus starts on the first line's checkbox");
  await page.keyboard.press(" ");
  assert.equal(await box(page, 1).isChecked(), true, "Space ticks");
  const order = [];
  for (let i = 0; i < 8; i += 1) {
    await page.keyboard.press("Tab");
    order.push(await focused());
  }
  assert.deepEqual(order, ["Show all", "box 2", "Show all", "box 3", "Show all", "Back", "Deny all", "Allow selected"]);
  // Each Show all is described by its line's tool and arguments.
  const described = await page.locator('.batch-line[data-ask-id="2"] .batch-toggle').evaluate((b) =>
    b.getAttribute("aria-describedby").split(" ").map((id) => document.getElementById(id).textContent).join(" "));
  assert.equal(described, 'close_ticket { "id": "T-2" }');
  await armed(allowSelected(page));
  // Escape leaves the list, answering nothing: back to the question it was opened from.
  await page.keyboard.press("Escape");
  await page.locator(".batch").waitFor({ state: "detached" });
  await sleep(100);
  assert.equal(backend.answers.length, 0);
  assert.equal(await page.locator('[data-ask-id="1"].ask:not([hidden])').count(), 1);
  assert.equal(await page.evaluate(() => document.activeElement?.textContent?.trim()), "Deny", "focus back on Deny");
  // Opened again: nothing ticked any more, and it works by Enter on Allow selected once armed.
  await d.getByRole("button", { name: "Decide together (3)" }).click();
  assert.equal(await box(page, 1).isChecked(), false);
  await page.keyboard.press(" ");
  await allowSelected(page).focus();
  await armed(allowSelected(page));
  await page.keyboard.press("Enter");
  const answers = await waitForAnswers(backend, 3);
  assert.deepEqual(byAction(answers), { accept: [1], decline: [2, 3] });
  await app.close();
});

test("clipped arguments must be shown whole before their checkbox can be ticked", async () => {
  const long = { id: "T-2", note: "x".repeat(300) };
  const app = await openApp(env, { asks: [call(1), call(2, { args: long })] });
  const { page, backend } = app;
  await openBatch(page, 2);
  const line = page.locator('.batch-line[data-ask-id="2"]');
  assert.ok((await line.locator("label").textContent()).endsWith("…"), "the summary is clipped");
  assert.equal(await box(page, 2).isDisabled(), true);
  assert.match(await line.textContent(), /Show all of its arguments to tick it/);
  const toggle = line.getByRole("button", { name: /^Show all/ });
  assert.equal(await toggle.getAttribute("aria-expanded"), "false");
  await toggle.click();
  assert.equal(await line.locator("pre").textContent(), JSON.stringify(long, null, 2));
  // Once its end is seen (an observer's callback, so not at once).
  await page.waitForFunction(() => !document.querySelector('.batch-line[data-ask-id="2"] input[type=checkbox]').disabled);
  await box(page, 2).check();
  await armed(allowSelected(page));
  await allowSelected(page).click();
  const answers = await waitForAnswers(backend, 2);
  assert.deepEqual(byAction(answers), { accept: [2], decline: [1] });
  await app.close();
});

test("arguments longer than the list's box must be scrolled to their end before their checkbox can be ticked", async () => {
  const long = { ...Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`a${String(i).padStart(2, "0")}`, i])), zzz_exec: "rm -rf ~" };
  const app = await openApp(env, { asks: [call(1), call(2, { args: long })] });
  const { page } = app;
  await openBatch(page, 2);
  const line = page.locator('.batch-line[data-ask-id="2"]');
  await line.getByRole("button", { name: /^Show all/ }).click();
  const pre = line.locator("pre");
  assert.ok(await pre.evaluate((p) => p.scrollHeight > p.clientHeight), "the box scrolls");
  await page.waitForTimeout(200);
  assert.equal(await box(page, 2).isDisabled(), true, "opened, but its end not seen");
  await pre.hover();
  for (let i = 0; i < 20; i += 1) await page.mouse.wheel(0, 400);
  await page.waitForFunction(() => !document.querySelector('.batch-line[data-ask-id="2"] input[type=checkbox]').disabled);
  await app.close();
});

test("hostile tool names and arguments are text, with invisible characters shown, in the lines and their names", async () => {
  const tool = `${TAG}${RLO}exe.txt${ZWSP}`;
  const args = { path: `/tmp/${TAG}${RLO}gpj.exe`, z: `a${ZWSP}b` };
  const app = await openApp(env, { asks: [
    call(1, { tool, args }),
    call(2, { tool, args, agent: `Claude Code` }),
  ] });
  const { page, backend } = app;
  const d = dialog(page);
  const before = await page.evaluate(() => document.querySelectorAll("img,script,iframe,object,embed,svg,a").length);
  await openBatch(page, 2);
  const shownTool = `${TAG}⟨U+202E⟩exe.txt⟨U+200B⟩`;
  const shownArgs = `{ "path": "/tmp/${TAG}⟨U+202E⟩gpj.exe", "z": "a⟨U+200B⟩b" }`;
  assert.equal((await page.locator('.batch-line[data-ask-id="1"] label').textContent()).trim(), `${shownTool} ${shownArgs}`);
  assert.equal(await d.getByRole("checkbox", { name: `${shownTool} ${shownArgs}` }).count(), 2, "named by tool and arguments");
  assert.doesNotMatch(await d.locator(".batch-list").textContent(), /[\u202E\u200B]/);
  await page.locator('.batch-line[data-ask-id="1"]').getByRole("button", { name: "Show all" }).click();
  assert.match(await page.locator('.batch-line[data-ask-id="1"] pre').textContent(), /⟨U\+202E⟩gpj\.exe/);
  assert.equal(await page.evaluate(() => document.querySelectorAll("img,script,iframe,object,embed,svg,a").length), before);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  await d.getByRole("button", { name: "Deny all" }).click();
  await waitForAnswers(backend, 2);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("two tokens the person gave one name are two agents: never in one list", async () => {
  const asks = [
    call(1, { agentId: "a1" }),
    call(2, { agentId: "b2" }),
    call(3, { agentId: "a1" }),
    call(4, { agentId: "b2" }),
  ];
  const app = await openApp(env, { asks });
  const { page } = app;
  await openBatch(page, 2);
  assert.deepEqual(await page.locator(".batch-line").evaluateAll((ls) => ls.map((l) => Number(l.dataset.askId))), [1, 3]);
  // Named as the person named the token; its id only keeps the lists apart.
  assert.match(await dialog(page).locator(".batch-summary").textContent(), /^Claude Code wants to run 2 tool calls on tickets\.$/);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("calls from two agents, or to two servers, are never in one list", async () => {
  const asks = [
    call(1, { agent: "Claude Code" }),
    call(2, { agent: "Cursor" }),
    call(3, { agent: "Claude Code" }),
    call(4, { agent: "Cursor" }),
    call(5, { agent: "Claude Code", server: "wiki" }),
    call(6, { agent: "Claude Code" }),
    // The agent's declared name decides nothing: this one is Cursor's token, calling itself Claude Code.
    call(7, { agent: "Cursor", declared: "Claude Code" }),
    // An agent that gave no name is never batched.
    call(8, { agent: "" }),
    call(9, { agent: "" }),
  ];
  const app = await openApp(env, { asks });
  const { page, backend } = app;
  const d = dialog(page);
  await openBatch(page, 3);
  assert.deepEqual(await page.locator(".batch-line").evaluateAll((ls) => ls.map((l) => Number(l.dataset.askId))), [1, 3, 6]);
  // A call from the other agent arriving now does not join.
  await backend.addAsk(call(10, { agent: "Cursor" }));
  assert.equal(await page.locator(".batch-line").count(), 3);
  await d.getByRole("button", { name: "Deny all" }).click();
  let answers = await waitForAnswers(backend, 3);
  assert.deepEqual(byAction(answers), { decline: [1, 3, 6] });
  // Shown next: Cursor's call, with its own list of Cursor's calls only.
  await page.locator('[data-ask-id="2"].ask:not([hidden])').waitFor();
  await openBatch(page, 4);
  assert.deepEqual(await page.locator(".batch-line").evaluateAll((ls) => ls.map((l) => Number(l.dataset.askId))), [2, 4, 7, 10]);
  await page.keyboard.press("Escape");
  await page.locator(".batch").waitFor({ state: "detached" });
  // The wiki call and the unnamed agent's calls offer no list.
  for (const id of [5, 8]) {
    while (!(await page.locator(`[data-ask-id="${id}"].ask:not([hidden])`).count())) {
      await d.getByRole("button", { name: "Next question" }).click();
    }
    assert.equal(await d.getByRole("button", { name: /^Decide together/ }).isVisible(), false, `no list for ${id}`);
  }
  answers = backend.answers;
  assert.equal(answers.length, 3);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});
