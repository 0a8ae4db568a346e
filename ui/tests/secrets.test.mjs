// Fields the backend flagged as secrets (passwords, tokens, PINs): a warning that MCP forbids
// servers to ask for them and that the value goes to the server, a masked input with a Show
// toggle that has an accessible name, hostile titles shown as text, and the typed value sent.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";

import { launch, openApp, dialog, waitForAnswers } from "./support/app.mjs";
import { formAsk, field } from "./support/fixtures.mjs";

let env;
before(async () => {
  env = await launch();
});
after(async () => {
  await env?.close();
});

const HOSTILE = `<img src=x onerror="window.__pwned=1">API token`;

test("a secret field warns, is masked, and its Show toggle shows and hides it", async () => {
  const ask = formAsk({ server: "desk", message: "Connect your account.", fields: [
    field.text("user", { title: "User name", required: true }),
    field.text("token", { title: HOSTILE, secret: true, required: true }),
  ] });
  const app = await openApp(env, { asks: [ask] });
  const { page, backend } = app;
  const d = dialog(page);

  // The toggle's name contains the label too: the input is the one that is an input.
  const secret = d.getByLabel(HOSTILE).and(d.locator("input"));
  assert.equal(await secret.getAttribute("type"), "password");
  // The warning is on the secret field only, and read out with it.
  const warnings = d.locator(".secret-warning");
  assert.equal(await warnings.count(), 1);
  const warning = await warnings.textContent();
  assert.match(warning, /MCP forbids servers to ask for these in a form/);
  assert.match(warning, /what you type here goes to the server/);
  const described = await secret.evaluate((e) => (e.getAttribute("aria-describedby") ?? "").split(" ")
    .map((id) => document.getElementById(id)?.textContent ?? "").join("|"));
  assert.match(described, /MCP forbids/);
  assert.equal(await d.getByLabel("User name").getAttribute("type"), "text");

  // The hostile title is text: no element made from it, nothing ran.
  assert.equal(await d.locator(".field-label", { hasText: "API token" }).textContent(), HOSTILE + " *");
  assert.equal(await d.locator("img").count(), 0);

  const toggle = d.getByRole("button", { name: `Show ${HOSTILE}` });
  assert.equal(await toggle.getAttribute("aria-pressed"), "false");
  await secret.click();
  await page.keyboard.type("ghp_s3cret");
  await toggle.click();
  assert.equal(await secret.getAttribute("type"), "text");
  assert.equal(await toggle.getAttribute("aria-pressed"), "true");
  assert.equal(await toggle.textContent(), "Hide");
  assert.equal(await secret.inputValue(), "ghp_s3cret");
  await toggle.click();
  assert.equal(await secret.getAttribute("type"), "password");
  assert.equal(await toggle.getAttribute("aria-pressed"), "false");

  await d.getByLabel("User name").click();
  await page.keyboard.type("ana");
  await d.getByRole("button", { name: "Submit" }).click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(answer.answer.content, { user: "ana", token: "ghp_s3cret" });
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("a secret number (a PIN) is masked, checked as a number, and sent as one", async () => {
  const ask = formAsk({ fields: [
    field.number("pin", { title: "PIN", integer: true, minimum: 0, maximum: 9999, secret: true, required: true }),
  ] });
  const app = await openApp(env, { asks: [ask] });
  const { page, backend } = app;
  const d = dialog(page);
  const pin = d.getByLabel("PIN").and(d.locator("input"));
  assert.equal(await pin.getAttribute("type"), "password");
  assert.equal(await d.locator(".secret-warning").count(), 1);

  await pin.click();
  await page.keyboard.type("12a");
  await d.getByRole("button", { name: "Submit" }).click();
  assert.match(await d.getByRole("alert").textContent(), /whole number/);
  await page.waitForTimeout(100);
  assert.equal(backend.answers.length, 0, "nothing is sent while the PIN is not a number");

  // Hexadecimal is not a decimal number, though JavaScript's Number reads "0x10" as 16.
  await pin.fill("0x10");
  await d.getByRole("button", { name: "Submit" }).click();
  assert.match(await d.getByRole("alert").textContent(), /whole number/);
  assert.equal(backend.answers.length, 0);

  await pin.fill("12345");
  await d.getByRole("button", { name: "Submit" }).click();
  assert.match(await d.getByRole("alert").textContent(), /at most 9999/);
  assert.equal(backend.answers.length, 0);

  await pin.fill("4711");
  await d.getByRole("button", { name: "Submit" }).click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(answer.answer.content, { pin: 4711 });
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("fields that are not secrets get no warning and no toggle", async () => {
  const ask = formAsk({ fields: [
    field.text("note", { title: "Note" }),
    field.number("tokens", { title: "Max tokens", integer: true }),
  ] });
  const app = await openApp(env, { asks: [ask] });
  const d = dialog(app.page);
  assert.equal(await d.locator(".secret-warning").count(), 0);
  assert.equal(await d.getByRole("button", { name: /^Show / }).count(), 0);
  assert.equal(await d.getByLabel("Note").getAttribute("type"), "text");
  assert.equal(await d.getByLabel("Max tokens").getAttribute("type"), "number");
  await app.close();
});

test("a server's default is never filled in masked, and one the input cannot show is said below it", async () => {
  const RLO = "\u202E";
  const long = `Meeting notes for the quarterly review, ${"and more ".repeat(10)}end`;
  const ask = formAsk({ fields: [
    field.text("password", { title: "Password", secret: true, default: "hunter2" }),
    field.number("pin", { title: "PIN", integer: true, secret: true, default: 1234 }),
    field.text("file", { title: "File name", default: `report${RLO}fdp.exe` }),
    field.text("notes", { title: "Notes", default: long }),
    field.text("plain", { title: "Plain", default: "ok" }),
    field.text("to", { title: "To", default: `alice${"\u2003".repeat(40)},bob@ev.il` }),
    field.text("essay", { title: "Essay", default: "x".repeat(400) }),
  ] });
  const app = await openApp(env, { asks: [ask] });
  const { page, backend } = app;
  const d = dialog(page);
  assert.equal(await d.getByLabel("Password").and(d.locator("input")).inputValue(), "");
  assert.equal(await d.getByLabel("PIN").and(d.locator("input")).inputValue(), "");
  assert.match(await d.locator(".field-hint").allTextContents().then((t) => t.join("|")), /The server suggested a value; it is left out, type your own/);
  const hints = await d.locator(".field-hint").allTextContents();
  assert.ok(hints.some((h) => h === "Filled in by the server: report⟨U+202E⟩fdp.exe"), hints.join("|"));
  assert.ok(hints.some((h) => h.startsWith("Filled in by the server: Meeting notes")), hints.join("|"));
  assert.ok(!hints.some((h) => h.includes("Filled in by the server: ok")));
  // Short, but wide blanks push its end past the field's: said below it.
  assert.ok(hints.some((h) => h.startsWith("Filled in by the server: alice") && h.endsWith(",bob@ev.il")), hints.join("|"));
  assert.equal(await d.getByLabel("Essay").inputValue(), "");
  assert.ok(hints.some((h) => h === "The server suggested a long value; it is left out, type your own"), hints.join("|"));
  assert.doesNotMatch(await d.textContent(), new RegExp(RLO));
  // Left alone, the visible defaults are sent; the masked ones are not.
  await d.getByRole("button", { name: "Submit" }).click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(answer.answer.content, { file: `report${RLO}fdp.exe`, notes: long, plain: "ok",
    to: `alice${"\u2003".repeat(40)},bob@ev.il` });
  await app.close();
});
