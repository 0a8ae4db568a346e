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
