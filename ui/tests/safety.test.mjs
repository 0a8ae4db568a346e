// Untrusted text stays text: markup in anything a server, an agent or a config sends shows
// literally and creates no element; the code never parses HTML; the app runs under the strict CSP.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";

import { launch, openApp, dialog, UI_DIR } from "./support/app.mjs";
import { formAsk, urlAsk, field, server } from "./support/fixtures.mjs";

const IMG = "<img src=x onerror=window.__pwned=1>";
const SCRIPT = "<script>window.__pwned=1</script>";
const BOTH = `${IMG}${SCRIPT}`;

let env;
before(async () => {
  env = await launch();
});
after(async () => {
  await env?.close();
});

const elementsNow = (page) => page.evaluate(() => ({
  count: document.querySelectorAll("img,script,iframe,object,embed,svg,a").length,
  pwned: window.__pwned,
}));

test("markup in server, agent, message, titles, descriptions and labels shows as literal text", async () => {
  const ask = formAsk({
    server: `srv${IMG}`,
    agent: `agent${SCRIPT}`,
    endpoint: { kind: "stdio", command: `run ${BOTH}` },
    message: `Hello ${IMG} and ${SCRIPT}`,
    fields: [
      field.text("t", { title: `Title ${IMG}`, description: `Desc ${SCRIPT}`, default: BOTH }),
      field.single("s", [[`v${IMG}`, `Label ${IMG}`], [SCRIPT, null]], { title: `Pick ${SCRIPT}`, description: `D2 ${IMG}` }),
      field.multi("m", [[`x${SCRIPT}`, `Multi ${SCRIPT}`], [IMG, null]], { title: `Many ${IMG}` }),
      field.boolean("b", { title: `Bool ${BOTH}` }),
      field.number(BOTH, { title: null }),
    ],
  });
  const app = await openApp(env, {});
  const { page, backend } = app;
  const before = await elementsNow(page);
  await backend.addAsk(ask);
  const d = dialog(page);
  await d.waitFor();
  // The accessible name is the literal server name.
  assert.equal(await page.getByRole("dialog", { name: `srv${IMG} asks` }).count(), 1);
  const text = await d.textContent();
  for (const literal of [
    `srv${IMG}`, `agent${SCRIPT}`, `run ${BOTH}`, `Hello ${IMG} and ${SCRIPT}`, `Title ${IMG}`, `Desc ${SCRIPT}`,
    `Pick ${SCRIPT}`, `D2 ${IMG}`, `Many ${IMG}`, `Multi ${SCRIPT}`, `Bool ${BOTH}`,
  ]) {
    assert.ok(text.includes(literal), `shows literally: ${literal}`);
  }
  assert.deepEqual(await d.getByLabel("Pick").evaluate((s) => [...s.options].map((o) => o.textContent)),
    ["Choose…", `Label ${IMG}`, SCRIPT]);
  assert.equal(await d.getByLabel("Title").inputValue(), BOTH);
  assert.equal(await d.getByLabel(BOTH, { exact: true }).count(), 1, "a field named by markup falls back to its name as text");

  // Backend errors carrying markup are text too.
  backend.onAnswer = () => ({ err: { kind: "answer", message: BOTH, error: { kind: "invalid", errors: [
    { field: "", message: `Form ${IMG}` }, { field: "t", message: `Field ${SCRIPT}` },
  ] } } });
  await d.getByLabel("Pick").selectOption({ index: 1 });
  await d.getByRole("button", { name: "Submit" }).click();
  await d.getByText(`Field ${SCRIPT}`).waitFor();
  assert.ok((await d.getByRole("alert").textContent()).includes(`Form ${IMG}`));
  const [answer] = backend.answers;
  assert.equal(answer.answer.content.t, BOTH, "the default goes back as the same string");
  assert.equal(answer.answer.content.s, `v${IMG}`);

  // A withdrawal notice naming the server.
  await backend.resolve(ask.id, { outcome: "cancelled", reason: "server" });
  assert.equal(await page.locator(".toast").textContent(), `srv${IMG}: The server withdrew this question.`);

  assert.deepEqual(await elementsNow(page), before);
  assert.equal(before.pwned, undefined);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("markup in a URL ask, tools, stderr, run output, history and config errors shows as text", async () => {
  const app = await openApp(env, {
    servers: [
      server(`bad${IMG}`, { state: "failed", reason: `crashed ${SCRIPT}` }, { endpoint: { kind: "http", host: `h${IMG}`, url: `https://x/${SCRIPT}` } }),
      server("demo"),
    ],
    tools: {
      demo: [{ name: `tool${IMG}`, title: `T ${SCRIPT}`, description: `D ${IMG}`,
        inputSchema: { type: "object", properties: { [SCRIPT]: { type: "string" } }, required: [SCRIPT] },
        annotations: { title: IMG, destructiveHint: true } }],
    },
    stderr: { demo: [`line ${IMG}`, `line ${SCRIPT}`] },
    history: {
      asks: [{ run: "r1", ask: formAsk({ server: `hs${IMG}`, message: `hm ${SCRIPT}` }),
        outcome: { outcome: "accepted", content: { k: IMG } }, resolvedAtMs: Date.now(), delivered: true, interrupted: false }],
      refused: [{ server: `rs${SCRIPT}`, reason: `because ${IMG}`, atMs: Date.now() }],
      gated: [{ server: "s", agent: `ga${IMG}`, tool: `gt${SCRIPT}`, allowed: true, why: "rule: allow", atMs: Date.now(), count: 1, others: false }],
      skipped: 0,
    },
    config: { path: `/cfg/${IMG}`, errors: [{ file: `f${SCRIPT}`, line: 1, column: 2, server: IMG, message: `m ${SCRIPT}` }] },
  });
  const { page, backend } = app;
  const before = await elementsNow(page);
  assert.equal(before.pwned, undefined);
  assert.ok((await page.locator(".banners").textContent()).includes(`m ${SCRIPT}`));
  assert.ok((await page.locator(".server-list").textContent()).includes(`bad${IMG}`));
  await page.getByRole("button", { name: /bad/ }).click();
  assert.ok((await page.locator(".server-detail").textContent()).includes(`crashed ${SCRIPT}`));
  await page.getByRole("button", { name: /^demo/ }).click();
  await page.locator(".tool").waitFor();
  const toolText = await page.locator(".tool").textContent();
  for (const literal of [`tool${IMG}`, `T ${SCRIPT}`, `D ${IMG}`]) assert.ok(toolText.includes(literal), literal);
  await page.locator(".stderr pre").waitFor();
  assert.equal(await page.locator(".stderr pre").textContent(), `line ${IMG}\nline ${SCRIPT}`);

  backend.onRunTool = () => ({ ok: { isError: false, content: [{ type: "text", text: `out ${IMG}` }, { type: "html", html: SCRIPT }], structuredContent: { s: IMG } } });
  await page.getByRole("button", { name: "Run…" }).click();
  assert.equal(await page.getByLabel("Arguments (JSON)").inputValue(), JSON.stringify({ [SCRIPT]: "" }, null, 2));
  await page.getByRole("button", { name: "Run", exact: true }).click();
  await page.locator(".run-result pre").first().waitFor();
  const out = await page.locator(".run-result").textContent();
  assert.ok(out.includes(`out ${IMG}`));
  assert.ok(out.includes(JSON.stringify(SCRIPT)));

  await page.getByRole("tab", { name: "History" }).click();
  await page.locator(".history-table").first().waitFor();
  const history = await page.locator(".history").textContent();
  for (const literal of [`hs${IMG}`, `hm ${SCRIPT}`, `rs${SCRIPT}`, `because ${IMG}`, `ga${IMG}`, `gt${SCRIPT}`]) assert.ok(history.includes(literal), literal);

  await backend.addAsk(urlAsk({ server: IMG, message: SCRIPT, url: `https://example.com/?q=${IMG}` }));
  await dialog(page).waitFor();
  assert.ok((await dialog(page).textContent()).includes(`https://example.com/?q=${IMG}`));

  assert.deepEqual(await elementsNow(page), before);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

function files(dir, pred) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path, pred) : pred(path) ? [path] : [];
  });
}

test("no HTML parsing sinks in the source or the built bundle", () => {
  const sinks = /\b(innerHTML|outerHTML|insertAdjacentHTML|document\.write|createContextualFragment|DOMParser|srcdoc)\b|\beval\s*\(|new Function\s*\(/;
  const sources = files(join(UI_DIR, "src"), (p) => /\.(ts|js|css|html)$/.test(p));
  const bundle = files(join(UI_DIR, "dist"), (p) => /\.(js|html|css)$/.test(p));
  assert.ok(sources.length > 5 && bundle.length >= 2, "source and dist exist (run npm run build)");
  const hits = [...sources, ...bundle].flatMap((file) =>
    readFileSync(file, "utf8").split("\n").flatMap((line, i) =>
      sinks.test(line) ? [`${relative(UI_DIR, file)}:${i + 1}: ${line.trim().slice(0, 120)}`] : []));
  assert.deepEqual(hits, []);
});

test("the built page has no inline script or style (the CSP allows neither)", () => {
  for (const html of files(join(UI_DIR, "dist"), (p) => p.endsWith(".html"))) {
    const text = readFileSync(html, "utf8");
    for (const tag of text.match(/<script\b[^>]*>/g) ?? []) assert.match(tag, /\bsrc=/, `${html}: ${tag}`);
    assert.doesNotMatch(text, /<style\b/);
    assert.doesNotMatch(text, /\sstyle=/);
    assert.doesNotMatch(text, /\son[a-z]+=/i);
    assert.doesNotMatch(text, /(src|href)="(https?:)?\/\//, "no remote origins");
  }
});

test("the tests run under the app's strict CSP (an injected inline handler is blocked and reported)", async () => {
  const app = await openApp(env, {});
  const { page } = app;
  // Deliberately bypass the app to prove the policy is live in this harness.
  await page.evaluate((markup) => {
    const holder = document.createElement("div");
    holder.setHTMLUnsafe?.(markup);
    document.body.append(holder);
  }, IMG);
  await page.waitForTimeout(300);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.ok((await app.problems()).some((p) => /^csp: script-src/.test(p)), "the violation is reported");
  await app.close();
});
