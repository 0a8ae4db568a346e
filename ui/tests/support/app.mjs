// Launches Debian's Chromium through playwright-core (no browser downloads), serves the built
// harness, and opens the app with a FakeBackend wired into Tauri's mockIPC.
import { chromium } from "playwright-core";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { existsSync } from "node:fs";

import { serve } from "./server.mjs";
import { FakeBackend } from "./fake-backend.mjs";

export const UI_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const HARNESS_DIR = join(UI_DIR, "test-dist");

export const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const ARGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
];

/** One browser and one static server per test file. */
export async function launch() {
  if (!existsSync(join(HARNESS_DIR, "tests", "harness", "index.html"))) {
    throw new Error("ui/test-dist is missing: run `npm run build:harness` (npm test does)");
  }
  const http = await serve(HARNESS_DIR);
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
  return {
    browser,
    url: `${http.origin}/tests/harness/index.html`,
    async close() {
      await browser.close();
      await http.close();
    },
  };
}

/**
 * A fresh context and page showing the app over `backend` (a FakeBackend or its initial state).
 * Returns helpers; `problems()` lists page errors, console errors and CSP violations.
 */
export async function openApp(env, backendOrState = {}, options = {}) {
  const backend = backendOrState instanceof FakeBackend ? backendOrState : new FakeBackend(backendOrState);
  const context = await env.browser.newContext({
    viewport: { width: 1280, height: 800 },
    locale: "en-US",
    timezoneId: options.timezoneId ?? "Europe/Berlin",
    colorScheme: options.colorScheme ?? "light",
  });
  const page = await context.newPage();
  page.setDefaultTimeout(options.timeoutMs ?? 5000);
  const problems = [];
  page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error" && !/favicon/.test(m.location()?.url ?? "")) problems.push(`console: ${m.text()}`);
  });
  await page.addInitScript(() => {
    window.__csp = [];
    document.addEventListener("securitypolicyviolation", (e) => {
      window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`);
    });
  });
  await page.exposeFunction("__backend", (cmd, argsJson) => backend.handle(cmd, JSON.parse(argsJson)));
  backend.emit = (event, payload) => page.evaluate(([e, p]) => window.__emit(e, p), [event, payload]);
  await page.goto(env.url);
  await page.waitForSelector("#app[data-ready]");
  return {
    page,
    context,
    backend,
    async problems() {
      const csp = await page.evaluate(() => window.__csp ?? []);
      return [...problems, ...csp.map((v) => `csp: ${v}`)];
    },
    async reload() {
      await page.reload();
      await page.waitForSelector("#app[data-ready]");
    },
    close: () => context.close(),
  };
}

/** The ask dialog (role dialog), as Playwright's accessibility query finds it. */
export function dialog(page) {
  return page.getByRole("dialog");
}

/** Waits until the backend has recorded `n` answers, then returns them. */
export async function waitForAnswers(backend, n, timeoutMs = 5000) {
  const until = Date.now() + timeoutMs;
  while (backend.answers.length < n) {
    if (Date.now() > until) throw new Error(`expected ${n} answers, got ${backend.answers.length}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return backend.answers;
}

/** Waits until `button` (an accept button) is armed: no longer `aria-disabled`. */
export async function armed(button, timeoutMs = 3000) {
  await button.page().waitForFunction(
    (b) => b.getAttribute("aria-disabled") === "false",
    await button.elementHandle({ timeout: timeoutMs }),
    { timeout: timeoutMs },
  );
}

/** The centre of `locator` in page coordinates, for pressing the mouse there like a person. */
export async function centre(locator) {
  const box = await locator.boundingBox();
  if (!box) throw new Error("not on screen");
  return { x: box.x + box.width / 2, y: box.y + box.height / 2 };
}
