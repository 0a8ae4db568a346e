// A queue, not a wall: with many questions waiting, the dialog keeps the shown question's own
// buttons in view; a compact queue says "3 of 200", steps previous / next, lists them all on
// demand in a box that scrolls by itself, and declines every question from the shown one's server
// (tool calls: denies them) with one button. Server names there are untrusted text.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";

import { launch, openApp, dialog, waitForAnswers } from "./support/app.mjs";
import { formAsk, toolCallAsk, field } from "./support/fixtures.mjs";

const TAG = "<img src=x onerror=__pwned=1>";
const RLO = "\u202E";
const ZWSP = "\u200B";

let env;
before(async () => {
  env = await launch();
});
after(async () => {
  await env?.close();
});

/** `n` questions from `server`, forms and tool calls alternating, oldest first. */
function flood(server, n, firstId = 1) {
  return Array.from({ length: n }, (_, i) => {
    const id = firstId + i;
    return i % 2 === 0
      ? formAsk({ id, server, message: `Question ${id}`, fields: [field.text("x", { title: "X" })], receivedAtMs: id })
      : toolCallAsk({ id, server, tool: `tool_${id}`, args: { n: id }, receivedAtMs: id });
  });
}

/** Whether each of `names`' buttons of the shown question lies wholly inside the window. */
const inWindow = (page, names) => page.evaluate((list) => {
  const shown = document.querySelector(".ask:not([hidden])");
  return Object.fromEntries(list.map((name) => {
    const b = [...shown.querySelectorAll("button")].find((x) => x.textContent === name);
    const r = b.getBoundingClientRect();
    const inside = r.width > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= window.innerHeight && r.right <= window.innerWidth;
    // And nothing covers it: the element at its centre is the button.
    const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return [name, inside && b.contains(top)];
  }));
}, names);

test("200 questions: '3 of 200', previous / next, the shown question's buttons on screen", async () => {
  const app = await openApp(env, { asks: flood("flood", 200) });
  const { page } = app;
  const d = dialog(page);
  const nav = d.getByRole("navigation", { name: "Waiting questions" });
  assert.deepEqual(await inWindow(page, ["Submit", "Decline"]), { Submit: true, Decline: true });
  assert.match(await nav.textContent(), /200 questions waiting/);
  assert.match(await nav.textContent(), /1 of 200/);
  // No wall: one button per question is not drawn until asked for.
  assert.equal(await d.locator(".queue-tab").filter({ visible: true }).count(), 0);
  const navBox = await nav.boundingBox();
  assert.ok(navBox.height < 120, `the queue is compact (${navBox.height}px)`);

  await d.getByRole("button", { name: "Next question" }).click();
  await d.getByRole("button", { name: "Next question" }).click();
  assert.match(await nav.textContent(), /3 of 200/);
  assert.equal(await page.getByRole("dialog", { name: /flood asks/ }).locator(".ask:not([hidden]) .ask-message").textContent(), "Question 3");
  assert.deepEqual(await inWindow(page, ["Submit", "Decline"]), { Submit: true, Decline: true });
  await d.getByRole("button", { name: "Next question" }).click();
  assert.match(await nav.textContent(), /4 of 200/);
  assert.deepEqual(await inWindow(page, ["Deny", "Allow once", "Always allow"]), { Deny: true, "Allow once": true, "Always allow": true });
  await d.getByRole("button", { name: "Previous question" }).click();
  await d.getByRole("button", { name: "Previous question" }).click();
  await d.getByRole("button", { name: "Previous question" }).click();
  await d.getByRole("button", { name: "Previous question" }).click();
  assert.match(await nav.textContent(), /200 of 200/, "wraps around");

  // The list on demand scrolls in its own bounded box; the buttons stay on screen.
  const toggle = d.getByRole("button", { name: "List all" });
  await toggle.click();
  assert.equal(await toggle.getAttribute("aria-expanded"), "true");
  const box = d.locator(".queue-list");
  const sizes = await box.evaluate((b) => ({ client: b.clientHeight, scroll: b.scrollHeight, vh: window.innerHeight }));
  assert.ok(sizes.client <= sizes.vh * 0.35, `bounded (${sizes.client}px of ${sizes.vh}px)`);
  assert.ok(sizes.scroll > sizes.client, "scrolls inside");
  assert.equal(await d.locator(".queue-tab").count(), 200);
  assert.deepEqual(await inWindow(page, ["Deny", "Allow once"]), { Deny: true, "Allow once": true });
  await d.getByRole("button", { name: "flood: Question 151" }).click();
  assert.match(await nav.textContent(), /151 of 200/);
  assert.equal(await box.isHidden(), true, "choosing one folds the list");
  assert.deepEqual(await inWindow(page, ["Submit", "Decline"]), { Submit: true, Decline: true });
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("Decline all from <server> declines every question from it, denies its calls, and leaves the others", async () => {
  const asks = [...flood("flood", 200), ...flood("calm", 2, 1001)];
  const app = await openApp(env, { asks });
  const { page, backend } = app;
  const d = dialog(page);
  const all = d.getByRole("button", { name: "Decline all from flood (200)" });
  await all.click();
  const answers = await waitForAnswers(backend, 200);
  await sleepUntil(() => page.locator(".ask").count().then((n) => n === 2));
  assert.equal(answers.length, 200);
  assert.deepEqual(new Set(answers.map((a) => a.answer.action)), new Set(["decline"]), "forms declined, tool calls denied");
  assert.deepEqual(answers.map((a) => a.id).sort((a, b) => a - b), asks.slice(0, 200).map((a) => a.id));
  assert.match(await d.getByRole("status").textContent(), /flood: Declined 200 questions\./);
  // The other server's questions wait on, with their own Decline all.
  assert.match(await d.getByRole("navigation").textContent(), /2 questions waiting.*1 of 2/s);
  assert.equal(await page.getByRole("dialog", { name: /calm asks/ }).count(), 1);
  await d.getByRole("button", { name: "Decline all from calm (2)" }).click();
  await d.waitFor({ state: "detached" });
  assert.equal(backend.answers.length, 202);
  assert.match(await page.locator(".toast").textContent(), /calm: Declined 2 questions\./);
  await app.close();
});

test("hostile server names in the queue stay text, with invisible characters shown", async () => {
  const server = `srv${TAG}${RLO}txt.exe${ZWSP}`;
  const shown = `srv${TAG}⟨U+202E⟩txt.exe⟨U+200B⟩`;
  // The list entries name the server in 40 characters: cut whole, never inside a ⟨U+…⟩.
  const short = `srv${TAG}…`;
  const app = await openApp(env, { asks: flood(server, 3) });
  const { page, backend } = app;
  const d = dialog(page);
  const before = await page.evaluate(() => document.querySelectorAll("img,script,iframe,object,embed,svg,a").length);
  const declineAll = d.getByRole("button", { name: /^Decline all from/ });
  assert.equal(await declineAll.textContent(), `Decline all from ${shown} (3)`);
  assert.equal(await declineAll.locator(".ctrl").count(), 2);
  await d.getByRole("button", { name: "List all" }).click();
  const tabs = await d.locator(".queue-tab").allTextContents();
  assert.deepEqual(tabs, [`${short}: Question 1`, `${short}: run tool_2`, `${short}: Question 3`]);
  assert.doesNotMatch(await d.locator(".queue").textContent(), /[\u202E\u200B]/);
  await declineAll.click();
  await waitForAnswers(backend, 3);
  await d.waitFor({ state: "detached" });
  assert.equal(await page.locator(".toast").textContent(), `${shown}: Declined 3 questions.`);
  assert.equal(await page.evaluate(() => document.querySelectorAll("img,script,iframe,object,embed,svg,a").length), before);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

async function sleepUntil(check, timeoutMs = 5000) {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}
