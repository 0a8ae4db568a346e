// What is shown is what runs: a tool call's arguments are shown from the text the backend will
// forward (`argumentsText`), so numbers JavaScript would round read as sent, in the dialog and in
// History; invisible characters (zero-width, joiners, tag characters, soft hyphen, BOM, ...) are
// shown by name wherever untrusted text goes; clipped arguments must be shown whole before Allow.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";

import { launch, openApp, dialog, waitForAnswers, armed, centre } from "./support/app.mjs";
import { formAsk, toolCallAsk, field } from "./support/fixtures.mjs";

let env;
before(async () => {
  env = await launch();
});
after(async () => {
  await env?.close();
});

// 2^53 + 1: JSON.parse reads it as 9007199254740992.
const BIG_TEXT = '{\n  "n": 9007199254740993,\n  "price": 0.1000000000000000055511151231257827,\n  "z": "last",\n  "a": "first"\n}';
const BIG_PARSED = JSON.parse(BIG_TEXT);

/** Every character the dialog must never show raw. */
const INVISIBLE = /[\u00AD\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]|[\u{E0000}-\u{E007F}]/u;

test("a big integer in the arguments is shown as sent, not as JavaScript rounds it", async () => {
  assert.equal(BIG_PARSED.n, 9007199254740992, "the premise: JavaScript rounds it");
  const ask = toolCallAsk({ id: 1, args: BIG_PARSED, argumentsText: BIG_TEXT });
  const app = await openApp(env, { asks: [ask] });
  const { page, backend } = app;
  const d = dialog(page);
  const pre = d.getByRole("region", { name: "Arguments" }).locator("pre");
  assert.equal(await pre.textContent(), BIG_TEXT);
  assert.match(await d.textContent(), /9007199254740993/);
  assert.doesNotMatch(await d.textContent(), /9007199254740992/);
  await d.getByRole("button", { name: "Allow once" }).click();
  await waitForAnswers(backend, 1);

  // A record from before `argumentsText` existed: the parsed arguments, as JavaScript has them.
  await backend.addAsk(toolCallAsk({ id: 2, args: { id: "T-9" }, argumentsText: "" }));
  await d.waitFor();
  assert.equal(await d.locator(".call-args pre").textContent(), '{\n  "id": "T-9"\n}');
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("History shows a call's arguments from the forwarded text: big integers exact, key order kept", async () => {
  const now = Date.UTC(2026, 0, 5, 9, 0, 0);
  const entry = (id, ask) => ({ run: "r", ask: { ...ask, receivedAtMs: now - id * 1000 }, outcome: { outcome: "accepted", content: null }, resolvedAtMs: now, delivered: true, interrupted: false });
  const text = '{\n  "n": 9007199254740993,\n  "note": "two  spaces\\n and a \\"quote\\"",\n  "list": [\n    1,\n    2\n  ]\n}';
  const app = await openApp(env, { history: { asks: [
    entry(1, toolCallAsk({ id: 1, tool: "big", args: JSON.parse(text), argumentsText: text })),
    entry(2, toolCallAsk({ id: 2, tool: "old", args: { id: "T-7" }, argumentsText: "" })),
    entry(3, toolCallAsk({ id: 3, tool: "more", args: { id: "T-9" }, alsoSentText: '{\n  "x-force": true\n}' })),
  ], refused: [], gated: [], skipped: 0 } });
  const { page } = app;
  await page.getByRole("tab", { name: "History" }).click();
  const rows = page.locator(".history-table tbody tr");
  await rows.first().waitFor();
  const [big, old, more] = await rows.allTextContents();
  assert.ok(big.includes('{"n":9007199254740993,"note":"two  spaces\\n and a \\"quote\\"","list":[1,2]}'), big);
  assert.ok(old.includes('{"id":"T-7"}'), old);
  assert.ok(more.includes('{"id":"T-9"}, also sent {"x-force":true}'), more);
  await app.close();
});

test("zero-width and other invisible characters are shown by name in the tool, arguments, names and labels", async () => {
  const ZWSP = "\u200B";
  const tool = `dele${ZWSP}te_ticket`;
  const argsObj = { path: `/home/me/notes\u200D.txt`, tag: "ok\u{E0069}\u{E0067}", hy: "soft\u00ADhyphen", bom: "\uFEFFx",
    wj: "a\u2060b", mvs: "c\u180Ed", inv: "f\u2062(x)" };
  const ask = toolCallAsk({ id: 10, server: `tick${ZWSP}ets`, agent: `Cla\u200Cude`, tool, title: `Delete\u2063 it`,
    description: `Deletes.\u200B`, args: argsObj });
  const app = await openApp(env, { asks: [ask] });
  const { page, backend } = app;
  const d = dialog(page);
  const text = await d.textContent();
  assert.doesNotMatch(text, INVISIBLE, "no invisible character is shown raw");
  assert.ok(text.includes("dele⟨U+200B⟩te_ticket"), "tool name");
  assert.ok(text.includes("tick⟨U+200B⟩ets"), "server name");
  assert.ok(text.includes("Cla⟨U+200C⟩ude"), "agent name");
  const args = await d.locator(".call-args pre").textContent();
  for (const named of ["notes⟨U+200D⟩.txt", "ok⟨U+E0069⟩⟨U+E0067⟩", "soft⟨U+00AD⟩hyphen", "⟨U+FEFF⟩x", "a⟨U+2060⟩b",
    "c⟨U+180E⟩d", "f⟨U+2062⟩(x)"]) {
    assert.ok(args.includes(named), `arguments show ${named}`);
  }
  assert.equal(await d.locator(".call-args .ctrl").count(), 8);
  assert.equal(await d.locator(".call-args .ctrl").first().getAttribute("title"), "invisible character");
  // Ordinary emoji keep their presentation selector; nothing else was marked.
  await d.getByRole("button", { name: "Deny" }).click();
  await d.waitFor({ state: "detached" });

  // A form: the message, a field's title and an option label (a plain `<option>` string) too.
  await backend.addAsk(formAsk({ id: 11, message: `Pay\u200B now ❤️`, fields: [
    field.single("to", [["a", `Ali\u200Bce`], ["b", "Bob"]], { title: `Recip\u2060ient` }),
  ] }));
  await d.waitFor();
  const formText = await d.textContent();
  assert.doesNotMatch(formText, INVISIBLE);
  assert.ok(formText.includes("Pay⟨U+200B⟩ now ❤️"), "the emoji's U+FE0F is left alone");
  assert.ok(formText.includes("Recip⟨U+2060⟩ient"));
  assert.deepEqual(await d.locator("select").evaluate((s) => [...s.options].map((o) => o.textContent)),
    ["Choose…", "Ali⟨U+200B⟩ce", "Bob"]);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("clipped arguments: Allow works only once they have been shown whole, and says so beside the buttons", async () => {
  const args = { id: "T-7", tags: Array.from({ length: 40 }, (_, i) => `tag-${i}`), last: "rm -rf /" };
  const app = await openApp(env, { asks: [toolCallAsk({ id: 20, server: "tickets", args })] });
  const { page, backend } = app;
  const d = dialog(page);
  const once = d.getByRole("button", { name: "Allow once" });
  const always = d.getByRole("button", { name: "Always allow" });
  const note = d.getByText("Show all of the arguments (above) to allow this call.");
  assert.equal(await note.isVisible(), true);
  assert.doesNotMatch(await d.locator(".call-args pre").textContent(), /rm -rf/, "the end is clipped");
  // Long past the arming delay, the Allow buttons still do nothing.
  await page.waitForTimeout(900);
  for (const button of [always, once]) {
    const at = await centre(button);
    await page.mouse.click(at.x, at.y);
  }
  await once.focus();
  await page.keyboard.press("Enter");
  await page.keyboard.press("Space");
  await page.waitForTimeout(100);
  assert.deepEqual(backend.answers, [], "nothing allowed unseen");
  for (const button of [once, always]) {
    assert.equal(await button.getAttribute("aria-disabled"), "true");
    assert.match(await button.evaluate((b) => b.getAttribute("aria-describedby").split(" ").map((id) => document.getElementById(id).textContent).join(" ")),
      /Show all of the arguments/);
  }

  await d.getByRole("button", { name: /^Show all/ }).click();
  assert.match(await d.locator(".call-args pre").textContent(), /rm -rf \//);
  // Whole, but in a box that scrolls: seen once the person scrolled to its end.
  await page.waitForTimeout(100);
  assert.equal(await note.isVisible(), true, "its end is below the box's fold");
  await d.locator(".call-args pre").hover();
  for (let i = 0; i < 10; i += 1) await page.mouse.wheel(0, 400);
  await note.waitFor({ state: "hidden" });
  // Folding it again does not take the permission back: it has been seen.
  await d.getByRole("button", { name: "Show less" }).click();
  await armed(once);
  await once.click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(answer, { id: 20, answer: { action: "accept", content: null } });

  // Deny never waits for it.
  await backend.addAsk(toolCallAsk({ id: 21, server: "tickets", args }));
  await d.waitFor();
  await d.getByRole("button", { name: "Deny" }).click();
  const answers = await waitForAnswers(backend, 2);
  assert.deepEqual(answers[1], { id: 21, answer: { action: "decline" } });
  await app.close();
});

test("fields sent beyond the arguments are shown apart, under their own name, and must be seen whole before Allow", async () => {
  const alsoSentText = JSON.stringify({ "x-force": true, "x-note": "y".repeat(700) }, null, 2);
  const app = await openApp(env, { asks: [toolCallAsk({ id: 30, server: "tickets", args: { id: "T-7" }, alsoSentText })] });
  const { page, backend } = app;
  const d = dialog(page);
  assert.equal(await d.getByRole("region", { name: "Arguments" }).locator("pre").textContent(), '{\n  "id": "T-7"\n}');
  const also = d.getByRole("region", { name: "Also sent with the call" });
  assert.match(await also.textContent(), /which the agent added and the server receives too/);
  assert.match(await also.locator("pre").textContent(), /"x-force": true/);
  const once = d.getByRole("button", { name: "Allow once" });
  const note = d.getByText("Show all of the arguments and of what is also sent (above) to allow this call.");
  assert.equal(await note.isVisible(), true, "the arguments are whole, what is also sent is not");
  await page.waitForTimeout(900);
  const at = await centre(once);
  await page.mouse.click(at.x, at.y);
  await page.waitForTimeout(100);
  assert.deepEqual(backend.answers, [], "nothing allowed unseen");
  assert.equal(await once.getAttribute("aria-disabled"), "true");
  await also.getByRole("button", { name: /^Show all/ }).click();
  await note.waitFor({ state: "hidden" });
  await armed(once);
  await once.click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(answer, { id: 30, answer: { action: "accept", content: null } });

  // A call without such fields has no such section.
  await backend.addAsk(toolCallAsk({ id: 31, server: "tickets", args: { id: "T-8" } }));
  await d.waitFor();
  assert.equal(await d.getByRole("region", { name: "Also sent with the call" }).count(), 0);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});
