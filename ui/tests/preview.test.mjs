// A tool call's preview: a tool that takes a boolean dryRun (`ask.preview`) gets a Preview button
// in the approval dialog. It calls `preview_call` once the dialog has armed (it is no yes, but it
// sends the agent's arguments, and a server could ignore dryRun), never answers the question, shows the server's answer as text (clipped with Show all, errors said as
// such), says the preview is the server's word, and a late answer never lands in another question.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";

import { armed, launch, openApp, dialog, waitForAnswers } from "./support/app.mjs";
import { toolCallAsk } from "./support/fixtures.mjs";

const IMG = "<img src=x onerror=window.__pwned=1>";
const SCRIPT = "<script>window.__pwned=1</script>";
const RLO = "\u202E";
const NOTE = "This preview comes from the server: it ran the same call with dryRun: true. A server could ignore dryRun.";

let env;
before(async () => {
  env = await launch();
});
after(async () => {
  await env?.close();
});

const editCall = (o = {}) => toolCallAsk({
  server: "files",
  agent: "Claude Code",
  tool: "edit_file",
  description: "Make line-based edits to a text file.",
  args: { path: "/home/me/notes.txt", edits: [{ oldText: "world", newText: "there" }] },
  preview: true,
  ...o,
});

const previewCalls = (backend) => backend.calls.filter((c) => c.cmd === "preview_call").map((c) => c.args);
const MARKUP = "img,script,iframe,object,embed,svg,a";

test("the Preview button is there only when the tool takes dryRun, with what it is worth", async () => {
  const app = await openApp(env, { asks: [editCall({ id: 1, preview: false })] });
  const { page, backend } = app;
  const d = dialog(page);
  await d.getByRole("button", { name: "Deny" }).waitFor();
  assert.equal(await d.getByRole("button", { name: /Preview/ }).count(), 0);
  assert.equal(await d.locator(".call-preview").count(), 0);
  assert.doesNotMatch(await d.textContent(), /dryRun/);
  await d.getByRole("button", { name: "Deny" }).click();
  await d.waitFor({ state: "detached" });

  await backend.addAsk(editCall({ id: 2 }));
  const button = d.getByRole("button", { name: "Preview", exact: true });
  await button.waitFor();
  const section = d.getByRole("region", { name: "Preview" });
  assert.match(await section.textContent(), new RegExp(NOTE.replace(/[.:]/g, "\\$&")));
  // The sentence describes the button, so a screen reader hears it with it.
  const note = await button.getAttribute("aria-describedby")
    .then((id) => page.evaluate((i) => document.getElementById(i)?.textContent, id));
  assert.equal(note, NOTE);
  // Focus still starts on Deny; Preview is not a yes, but waits for the arming as yes does.
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Deny");
  await armed(button);
  assert.equal(previewCalls(backend).length, 0, "nothing is previewed until the person asks");
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("Preview waits for the arming, shows a hostile diff as text, and answers nothing", async () => {
  const lines = ["--- /home/me/notes.txt\toriginal", "+++ /home/me/notes.txt\tmodified", "@@ -1 +1 @@",
    `-hello world ${IMG}`, `+hello there ${SCRIPT}${RLO}txt.exe`,
    ...Array.from({ length: 30 }, (_, i) => ` context line ${i}`)];
  const diff = lines.join("\n");
  const app = await openApp(env, {});
  const { page, backend } = app;
  backend.onPreview = () => ({ ok: { text: diff, isError: false, clipped: false } });
  const before = await page.evaluate((m) => document.querySelectorAll(m).length, MARKUP);
  // Clicked in the dialog's first moment (the page's same turn), before it arms, Preview runs
  // nothing: it sends the agent's arguments, and a server could ignore dryRun. Once armed, it runs.
  const ask = editCall({ id: 3 });
  backend.asks.push(ask);
  const unarmed = await page.evaluate(async (a) => {
    await window.__emit("ask-event", { event: "added", ask: a });
    const preview = [...document.querySelectorAll("dialog[open] button")]
      .find((b) => b.textContent.trim() === "Preview");
    const state = preview.getAttribute("aria-disabled");
    preview.click();
    return state;
  }, ask);
  assert.equal(unarmed, "true");
  const d = dialog(page);
  const button = d.getByRole("button", { name: "Preview", exact: true });
  await page.waitForTimeout(100);
  assert.deepEqual(previewCalls(backend), [], "a click as the dialog appears runs nothing");
  await armed(button);
  await button.click();
  const pre = d.locator(".call-preview pre");
  await pre.waitFor();
  assert.deepEqual(previewCalls(backend), [{ id: 3 }]);
  const shown = (s) => s.replaceAll(RLO, "⟨U+202E⟩");
  const clipped = await pre.textContent();
  assert.ok(clipped.startsWith(shown(lines.slice(0, 5).join("\n"))), clipped);
  assert.ok(clipped.endsWith("…"), "35 lines are clipped");
  assert.equal(await pre.locator(".ctrl").count(), 1, "the bidi control is marked");
  await d.locator(".call-preview").getByRole("button", { name: /^Show all/ }).click();
  assert.equal(await pre.textContent(), shown(diff));
  assert.equal(await page.evaluate((m) => document.querySelectorAll(m).length, MARKUP), before);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.doesNotMatch(await d.textContent(), new RegExp(RLO));

  // Nothing was answered: the question waits, its buttons as they were.
  assert.equal(backend.answers.length, 0);
  assert.equal(await d.count(), 1);
  assert.equal(await page.evaluate(() => document.querySelector(".ask")?.getAttribute("aria-busy")), null);
  // Again, by keyboard: Enter on Preview previews again and still answers nothing.
  await d.getByRole("button", { name: "Preview again" }).focus();
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.querySelector(".preview-button")?.textContent === "Preview again"
    && !document.querySelector(".preview-button").disabled);
  assert.equal(previewCalls(backend).length, 2);
  assert.equal(backend.answers.length, 0);
  assert.equal(await d.count(), 1);
  // The person still decides, with the dialog's own buttons, once they arm.
  const once = d.getByRole("button", { name: "Allow once" });
  await armed(once);
  await once.click();
  await d.waitFor({ state: "detached" });
  assert.deepEqual(await waitForAnswers(backend, 1), [{ id: 3, answer: { action: "accept", content: null } }]);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("an error from the server, a failed dry run and an ended question are said as such", async () => {
  const app = await openApp(env, {});
  const { page, backend } = app;
  const replies = [
    { ok: { text: `Error: oldText not found ${IMG}`, isError: true, clipped: false } },
    { err: { kind: "preview", message: "the dry run failed: x", error: { kind: "failed", message: `upstream broke ${SCRIPT}${RLO}` } } },
    { err: { kind: "preview", message: "no preview", error: { kind: "notOffered" } } },
    { ok: { text: "", isError: false, clipped: true } },
  ];
  backend.onPreview = () => replies.shift();
  await backend.addAsk(editCall({ id: 4 }));
  const d = dialog(page);
  const result = d.locator(".call-preview .preview-result");
  const preview = async (name) => {
    await d.getByRole("button", { name, exact: true }).click();
    await page.waitForFunction(() => !document.querySelector(".preview-button")?.disabled
      && document.querySelector(".preview-button")?.textContent === "Preview again");
    return result.textContent();
  };

  assert.equal(await preview("Preview"), `The server answered the dry run with an error:Error: oldText not found ${IMG}`);
  assert.equal(await result.locator("pre.is-error").count(), 1);

  assert.equal(await preview("Preview again"), `The dry run failed: upstream broke ${SCRIPT}⟨U+202E⟩`);
  assert.equal(await result.getByRole("alert").count(), 1);

  assert.equal(await preview("Preview again"), "No preview: this question has ended, or its tool takes no dryRun.");
  assert.match(await preview("Preview again"), /no text.*longer than Countersign keeps; the rest was cut/);

  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(backend.answers.length, 0, "no preview answered the question");
  assert.equal(await d.count(), 1);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("a preview that answers after its question ended never shows in the next one", async () => {
  const app = await openApp(env, {});
  const { page, backend } = app;
  const pending = [];
  backend.onPreview = (args) => new Promise((resolve) => pending.push({ args, resolve }));
  await backend.addAsk(editCall({ id: 5 }));
  const d = dialog(page);
  await d.getByRole("button", { name: "Preview", exact: true }).click();
  await page.waitForFunction(() => document.querySelector(".preview-button")?.textContent === "Previewing…");
  // The agent cancels; another call of the same tool arrives.
  await backend.resolve(5, { outcome: "cancelled", reason: "agent" });
  await d.waitFor({ state: "detached" });
  await backend.addAsk(editCall({ id: 6, args: { path: "/home/me/other.txt", edits: [] } }));
  await d.locator('[data-ask-id="6"]').waitFor();
  pending[0].resolve({ ok: { text: "-hello world\n+hello there\n", isError: false, clipped: false } });
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(pending[0].args.id, 5);
  assert.equal(await d.locator(".call-preview pre").count(), 0);
  assert.doesNotMatch(await d.textContent(), /hello there/);
  await armed(d.getByRole("button", { name: "Preview", exact: true }));
  assert.equal(backend.answers.length, 0);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});
