// "Remember…" in the approval dialog (issue 10 item 2): for how long (the agent's session, 15
// minutes, 1 hour, until tomorrow, always) and for which calls (exact arguments, any, a path
// argument under a folder, a URL argument on a host), then Allow or Deny with it; usable with the
// keyboard alone; a refusal from the backend shown in the dialog. Also: what changed in the tool
// since the person decided (issue 10 item 3), the agent's declared name beside its token's name,
// and History's words for remembered outcomes.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";

import { launch, openApp, dialog, waitForAnswers, armed, centre } from "./support/app.mjs";
import { toolCallAsk } from "./support/fixtures.mjs";

const IMG = "<img src=x onerror=window.__pwned=1>";
const RLO = "\u202E";
const ZWSP = "\u200B";
const HOUR = 3_600_000;

let env;
before(async () => {
  env = await launch();
});
after(async () => {
  await env?.close();
});

const call = (o = {}) => toolCallAsk({ server: "tickets", agent: "Claude Code", tool: "delete_ticket", args: { id: "T-7" }, ...o });

const focused = (page) => page.evaluate(() => {
  const a = document.activeElement;
  if (a instanceof HTMLInputElement && a.type === "radio") return `radio:${a.closest("label")?.textContent?.trim()}`;
  return a?.textContent?.trim();
});

const remembered = (answer) => answer.answer.decision;

test("by keyboard alone: Remember…, 1 hour, these exact arguments, Allow and remember", async () => {
  const app = await openApp(env, { asks: [call({ id: 1 })] });
  const { page, backend } = app;
  const d = dialog(page);
  assert.equal(await focused(page), "Deny");
  const toggle = d.getByRole("button", { name: "Remember…" });
  assert.equal(await toggle.getAttribute("aria-expanded"), "false");
  // The panel is closed: none of its controls are there to be hit by accident.
  assert.equal(await d.getByRole("radio").count(), 0);

  await page.keyboard.press("Shift+Tab");
  assert.equal(await focused(page), "Remember…");
  await page.keyboard.press("Enter");
  assert.equal(await toggle.getAttribute("aria-expanded"), "true");
  // Two labelled radio groups.
  const lasting = d.getByRole("group", { name: "For how long" });
  const covering = d.getByRole("group", { name: "For which calls" });
  assert.deepEqual(await lasting.getByRole("radio").evaluateAll((rs) => rs.map((r) => r.closest("label").textContent.trim())),
    ["This agent's session", "15 minutes", "1 hour", "Until tomorrow (midnight)", "Always"]);
  assert.deepEqual(await covering.getByRole("radio").evaluateAll((rs) => rs.map((r) => r.closest("label").textContent.trim())),
    ["These exact arguments", "Any arguments"], "no path or URL argument, no such choice");
  assert.equal(await lasting.getByRole("radio", { name: "This agent's session" }).isChecked(), true);
  assert.equal(await covering.getByRole("radio", { name: "These exact arguments" }).isChecked(), true);

  await page.keyboard.press("Tab");
  assert.equal(await focused(page), "radio:This agent's session");
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("ArrowDown");
  assert.equal(await focused(page), "radio:1 hour");
  assert.equal(await lasting.getByRole("radio", { name: "1 hour" }).isChecked(), true);
  await page.keyboard.press("Tab");
  assert.equal(await focused(page), "radio:These exact arguments");
  await page.keyboard.press("Tab");
  assert.equal(await focused(page), "Deny and remember");
  await page.keyboard.press("Tab");
  assert.equal(await focused(page), "Allow and remember");
  await armed(d.getByRole("button", { name: "Allow and remember" }));
  const from = Date.now();
  await page.keyboard.press("Enter");
  const [answer] = await waitForAnswers(backend, 1);
  const to = Date.now();
  const untilMs = remembered(answer).lasting.untilMs;
  assert.ok(untilMs >= from + HOUR - 50 && untilMs <= to + HOUR + 50, `until ${untilMs} is an hour from ${from}..${to}`);
  assert.deepEqual(answer, { id: 1, answer: { action: "remember", decision: {
    allow: true, lasting: { kind: "until", untilMs }, covering: { kind: "exactArguments", arguments: "" } } } });
  await d.waitFor({ state: "detached" });
  assert.match(await page.locator(".toast").textContent(),
    /^tickets: Allowed and remembered: until .+, exactly \{"id":"T-7"\} \(revocable in Settings\)\.$/);
  // The arguments are the agent's words: shown as its text, not as the app's sentence.
  assert.equal(await page.locator(".toast .untrusted").last().textContent(), 'exactly {"id":"T-7"}');
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("Allow and remember waits for arming and for clipped arguments to be shown, like Allow once", async () => {
  const args = { id: "T-7", note: "x".repeat(2000) };
  const app = await openApp(env, { asks: [call({ id: 2, args })] });
  const { page, backend } = app;
  const d = dialog(page);
  await d.getByRole("button", { name: "Remember…" }).click();
  const allow = d.getByRole("button", { name: "Allow and remember" });
  // Long past the arming delay, the arguments are still clipped: a click and Enter do nothing,
  // and the button says why.
  await page.waitForTimeout(800);
  assert.equal(await allow.getAttribute("aria-disabled"), "true");
  const at = await centre(allow);
  await page.mouse.click(at.x, at.y);
  await allow.focus();
  await page.keyboard.press("Enter");
  await page.waitForTimeout(100);
  assert.equal(backend.answers.length, 0);
  assert.match(await allow.evaluate((b) => document.getElementById(b.getAttribute("aria-describedby")).textContent),
    /Show all of the arguments/);
  await d.getByRole("button", { name: /^Show all/ }).click();
  // Whole, in a box that scrolls: seen once scrolled to its end.
  await d.locator(".call-args pre").hover();
  for (let i = 0; i < 10; i += 1) await page.mouse.wheel(0, 400);
  await armed(allow);
  await allow.click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(remembered(answer), { allow: true, lasting: { kind: "session" }, covering: { kind: "exactArguments", arguments: "" } });
  await app.close();
});

test("a path argument offers its folder (editable, checked as absolute and holding the path); a URL argument its host", async () => {
  const args = { path: "/home/me/p/a.txt", url: "https://API.github.com:8443/repos/x?y=1", note: "hello", name: "x.txt", n: 3 };
  const app = await openApp(env, { asks: [call({ id: 3, tool: "write_file", args })] });
  const { page, backend } = app;
  const d = dialog(page);
  await d.getByRole("button", { name: "Remember…" }).click();
  const covering = d.getByRole("group", { name: "For which calls" });
  assert.deepEqual(await covering.getByRole("radio").evaluateAll((rs) => rs.map((r) => r.closest("label").textContent.trim())),
    ["These exact arguments", "Any arguments", "Any path under /home/me/p (path)", "Any URL on api.github.com:8443 (url)"]);
  const folder = covering.getByRole("textbox", { name: "Folder for “path”" });
  assert.equal(await folder.inputValue(), "/home/me/p");
  await covering.getByRole("radio", { name: /Any path under/ }).check();
  await d.getByRole("group", { name: "For how long" }).getByRole("radio", { name: "Always" }).check();
  const allow = d.getByRole("button", { name: "Allow and remember" });
  await armed(allow);

  // Not absolute: said beside the field, nothing sent.
  await folder.fill("home/me");
  assert.equal(await covering.getByRole("radio", { name: /Any path under home\/me/ }).isChecked(), true, "the label follows the field");
  await allow.click();
  const error = d.getByRole("alert").filter({ hasText: /absolute path/ });
  await error.waitFor();
  assert.equal(await folder.getAttribute("aria-invalid"), "true");
  assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("aria-label")), "Folder for “path”");
  // A folder that does not hold the call's path.
  await folder.fill("/home/you");
  await allow.click();
  await d.getByRole("alert").filter({ hasText: "/home/me/p/a.txt is not under /home/you" }).waitFor();
  assert.equal(backend.answers.length, 0);
  // A wider folder, written loosely: sent normalized.
  await folder.fill("/home/./me/");
  await allow.click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(answer.answer, { action: "remember", decision: {
    allow: true, lasting: { kind: "always" }, covering: { kind: "pathUnder", argument: "path", prefix: "/home/me", also: [] } } });
  await d.waitFor({ state: "detached" });
  assert.match(await page.locator(".toast").textContent(), /Allowed and remembered: always, “path”: any path under \/home\/me/);

  // The URL's host, with its port (not the scheme's default); and a remembered deny needs no
  // arming.
  await backend.addAsk(call({ id: 4, tool: "fetch", args }));
  await d.waitFor();
  await d.getByRole("button", { name: "Remember…" }).click();
  await d.getByRole("radio", { name: "15 minutes" }).check();
  await d.getByRole("radio", { name: /Any URL on api\.github\.com:8443/ }).check();
  const from = Date.now();
  await d.getByRole("button", { name: "Deny and remember" }).click();
  const answers = await waitForAnswers(backend, 2);
  const to = Date.now();
  const decision = remembered(answers[1]);
  assert.ok(decision.lasting.untilMs >= from + 15 * 60_000 - 50 && decision.lasting.untilMs <= to + 15 * 60_000 + 50);
  assert.deepEqual(decision, { allow: false, lasting: { kind: "until", untilMs: decision.lasting.untilMs },
    covering: { kind: "urlHost", argument: "url", host: "api.github.com:8443", also: [] } });
  await d.waitFor({ state: "detached" });
  assert.match(await page.locator(".toast").textContent(), /^tickets: Denied and remembered: until .*, “url”: any URL on api\.github\.com:8443/);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("a host choice names the port when not the scheme's default, as core keeps and compares it", async () => {
  const offered = async (args) => {
    const app = await openApp(env, { asks: [call({ id: 23, tool: "fetch", args })] });
    const d = dialog(app.page);
    await d.getByRole("button", { name: "Remember…" }).click();
    const labels = await d.getByRole("group", { name: "For which calls" }).getByRole("radio")
      .evaluateAll((rs) => rs.map((r) => r.closest("label").textContent.trim()));
    return { app, d, labels };
  };
  // A dev server on :3000: the choice is for localhost:3000, and the backend takes it.
  const { app, d, labels } = await offered({ url: "http://localhost:3000/" });
  assert.deepEqual(labels, ["These exact arguments", "Any arguments", "Any URL on localhost:3000 (url)"]);
  await d.getByRole("radio", { name: /Any URL on localhost:3000/ }).check();
  const allow = d.getByRole("button", { name: "Allow and remember" });
  await armed(allow);
  await allow.click();
  const [answer] = await waitForAnswers(app.backend, 1);
  assert.deepEqual(remembered(answer).covering, { kind: "urlHost", argument: "url", host: "localhost:3000", also: [] });
  await d.waitFor({ state: "detached" });
  assert.match(await app.page.locator(".toast").textContent(), /“url”: any URL on localhost:3000/);
  assert.deepEqual(await app.problems(), []);
  await app.close();
  // The scheme's default port, named or not, is the host alone.
  for (const url of ["https://a.example/x", "https://A.example:443/x"]) {
    const o = await offered({ url });
    assert.deepEqual(o.labels.slice(2), ["Any URL on a.example (url)"], url);
    await o.app.close();
  }
  // Another port of the same host beside it (the Docker API): no one host holds both.
  const o = await offered({ url: "http://localhost:3000/", then: "http://localhost:2375/containers/create" });
  assert.deepEqual(o.labels, ["These exact arguments", "Any arguments"]);
  await o.app.close();
});

test("a text starting with / (after spaces, too) is a path whatever follows, as core holds it", async () => {
  for (const [args, offered] of [
    // `//etc` is `/etc` to the kernel: held to the folder, so only / holds both.
    [{ path: "/home/me/p/a", opts: { dest: "//etc/cron.d/x\n" } }, "Any paths under / (path, opts)"],
    // `/*/..` is `/` to Node's `path.resolve`.
    [{ path: "/home/me/p/a", out: "/*/../etc/x y" }, "Any paths under / (path, out)"],
    // A comment is not told from a path.
    [{ path: "/home/me/p/a", content: "// note" }, "Any paths under / (path, content)"],
    // A server that trims reads /etc/passwd, one that does not a relative path: no folder.
    [{ path: "/home/me/p/a", x: "  /etc/passwd" }, null],
    [{ path: "/home/me/p/a", x: "\n~/.ssh/authorized_keys" }, null],
    [{ path: "/home/me/p/a", note: "a note" }, "Any path under /home/me/p (path)"],
  ]) {
    const app = await openApp(env, { asks: [call({ id: 24, tool: "write_file", args })] });
    const d = dialog(app.page);
    await d.getByRole("button", { name: "Remember…" }).click();
    const labels = await d.getByRole("group", { name: "For which calls" }).getByRole("radio")
      .evaluateAll((rs) => rs.map((r) => r.closest("label").textContent.trim()));
    assert.deepEqual(labels, ["These exact arguments", "Any arguments", ...(offered ? [offered] : [])], JSON.stringify(args));
    await app.close();
  }
});

test("an address written without a scheme beside a URL offers no host, as core holds it on none", async () => {
  for (const bare of ["evil.example/x", "www.evil.example", "localhost:3000/admin", "git@evil.example:me/r.git",
    "user:pw@evil.example/x", "evil.example./x", "[2001:db8::1]/x", "127.1/x", "0x7f.0.0.1/x", "evil_x.example/x",
    "evil.example\\x", " evil.example/x", "evil.example/x\n", "evil.xn--p1ai/x"]) {
    const args = { url: "https://api.github.com/repos", mirror: bare, name: "notes.txt" };
    const app = await openApp(env, { asks: [call({ id: 21, tool: "fetch", args })] });
    const d = dialog(app.page);
    await d.getByRole("button", { name: "Remember…" }).click();
    const covering = d.getByRole("group", { name: "For which calls" });
    const offered = await covering.getByRole("radio").evaluateAll((rs) => rs.map((r) => r.closest("label").textContent.trim()));
    assert.ok(!offered.some((o) => o.startsWith("Any URL")), `${bare}: ${offered}`);
    await app.close();
  }
  // A file name with a dot is no address: the host is offered.
  const app = await openApp(env, { asks: [call({ id: 22, tool: "fetch", args: { url: "https://api.github.com/repos", name: "notes.txt" } })] });
  const d = dialog(app.page);
  await d.getByRole("button", { name: "Remember…" }).click();
  await d.getByRole("radio", { name: /Any URL on api\.github\.com/ }).waitFor();
  await app.close();
});

test("a call with two paths offers one folder holding both; two URLs on different hosts offer no host", async () => {
  const args = { source: "/home/me/p/a.txt", destination: "/home/me/q/b.txt", from: "https://a.example/x", to: "https://b.example/y" };
  const app = await openApp(env, { asks: [call({ id: 14, tool: "move_file", args })] });
  const { page, backend } = app;
  const d = dialog(page);
  await d.getByRole("button", { name: "Remember…" }).click();
  const covering = d.getByRole("group", { name: "For which calls" });
  assert.deepEqual(await covering.getByRole("radio").evaluateAll((rs) => rs.map((r) => r.closest("label").textContent.trim())),
    ["These exact arguments", "Any arguments", "Any paths under /home/me (source, destination)"]);
  const folder = covering.getByRole("textbox", { name: "Folder for “source”, “destination”" });
  assert.equal(await folder.inputValue(), "/home/me");
  await covering.getByRole("radio", { name: /Any paths under/ }).check();
  const allow = d.getByRole("button", { name: "Allow and remember" });
  await armed(allow);
  // A folder holding the source but not the destination: said, nothing sent.
  await folder.fill("/home/me/p");
  await allow.click();
  await d.getByRole("alert").filter({ hasText: "/home/me/q/b.txt is not under /home/me/p" }).waitFor();
  assert.equal(backend.answers.length, 0);
  await folder.fill("/home/me");
  await allow.click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(remembered(answer).covering, { kind: "pathUnder", argument: "source", prefix: "/home/me", also: [] });
  await d.waitFor({ state: "detached" });
  // The backend names every path the decision holds.
  assert.match(await page.locator(".toast").textContent(), /“source”, “destination”: any path under \/home\/me/);

  // A path relative to wherever the server runs: no folder can hold it, so none is offered.
  await backend.addAsk(call({ id: 15, tool: "move_file", args: { source: "/home/me/a", destination: "../../etc/x" } }));
  await d.waitFor();
  await d.getByRole("button", { name: "Remember…" }).click();
  assert.deepEqual(await d.getByRole("group", { name: "For which calls" }).getByRole("radio")
    .evaluateAll((rs) => rs.map((r) => r.closest("label").textContent.trim())), ["These exact arguments", "Any arguments"]);
  await d.getByRole("button", { name: "Deny", exact: true }).click();
  await d.waitFor({ state: "detached" });

  // A URL the browser reads as on one host and curl on another: no host is offered.
  await backend.addAsk(call({ id: 16, tool: "fetch", args: { url: "http://api.github.com\\@evil.example/" } }));
  await d.waitFor();
  await d.getByRole("button", { name: "Remember…" }).click();
  assert.deepEqual(await d.getByRole("group", { name: "For which calls" }).getByRole("radio")
    .evaluateAll((rs) => rs.map((r) => r.closest("label").textContent.trim())), ["These exact arguments", "Any arguments"]);
  await d.getByRole("button", { name: "Deny", exact: true }).click();
  await d.waitFor({ state: "detached" });
  // Nor when another address beside it has a line break the browser would drop.
  await backend.addAsk(call({ id: 18, tool: "fetch", args: { url: "https://api.github.com/", to: "https://evil.example/\n" } }));
  await d.waitFor();
  await d.getByRole("button", { name: "Remember…" }).click();
  assert.deepEqual(await d.getByRole("group", { name: "For which calls" }).getByRole("radio")
    .evaluateAll((rs) => rs.map((r) => r.closest("label").textContent.trim())), ["These exact arguments", "Any arguments"]);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("a path nested in the arguments is held by the folder offered, as core holds it", async () => {
  const args = { path: "/home/me/p/a.txt", options: { backup: { to: "/home/me/q/a.bak" } } };
  const app = await openApp(env, { asks: [call({ id: 17, tool: "write_file", args })] });
  const { page, backend } = app;
  const d = dialog(page);
  await d.getByRole("button", { name: "Remember…" }).click();
  const covering = d.getByRole("group", { name: "For which calls" });
  assert.deepEqual(await covering.getByRole("radio").evaluateAll((rs) => rs.map((r) => r.closest("label").textContent.trim())),
    ["These exact arguments", "Any arguments", "Any paths under /home/me (path, options)"]);
  await covering.getByRole("radio", { name: /Any paths under/ }).check();
  const folder = covering.getByRole("textbox", { name: "Folder for “path”, “options”" });
  await folder.fill("/home/me/p");
  const allow = d.getByRole("button", { name: "Allow and remember" });
  await armed(allow);
  await allow.click();
  await d.getByRole("alert").filter({ hasText: "/home/me/q/a.bak is not under /home/me/p" }).waitFor();
  assert.equal(backend.answers.length, 0);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("“Until tomorrow” is the next midnight in the person's time zone", async () => {
  for (const timezoneId of ["Asia/Kolkata", "America/Los_Angeles"]) {
    const app = await openApp(env, { asks: [call({ id: 5 })] }, { timezoneId });
    const { page, backend } = app;
    const d = dialog(page);
    await d.getByRole("button", { name: "Remember…" }).click();
    await d.getByRole("radio", { name: "Until tomorrow (midnight)" }).check();
    await d.getByRole("radio", { name: "Any arguments" }).check();
    const allow = d.getByRole("button", { name: "Allow and remember" });
    await armed(allow);
    const now = Date.now();
    await allow.click();
    const [answer] = await waitForAnswers(backend, 1);
    const { untilMs } = remembered(answer).lasting;
    const inZone = (ms) => new Intl.DateTimeFormat("en-CA", { timeZone: timezoneId, year: "numeric", month: "2-digit",
      day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" }).format(new Date(ms));
    const [today] = inZone(now).split(", ");
    const tomorrow = new Date(`${today}T12:00:00Z`);
    tomorrow.setUTCDate(tomorrow.getUTCDate() + 1);
    assert.equal(inZone(untilMs), `${tomorrow.toISOString().slice(0, 10)}, 00:00:00`, timezoneId);
    assert.ok(untilMs > now && untilMs - now <= 25 * HOUR);
    assert.deepEqual(remembered(answer).covering, { kind: "anyArguments" });
    await app.close();
  }
});

test("the backend's refusal of a remembered choice is shown in the dialog, which stays", async () => {
  const app = await openApp(env, { asks: [call({ id: 6 })] });
  const { page, backend } = app;
  backend.onAnswer = (id, answer) => answer.action === "remember"
    ? { err: { kind: "answer", message: "malformed", error: { kind: "malformed", message: `that moment has already passed ${IMG}` } } }
    : null;
  const d = dialog(page);
  await d.getByRole("button", { name: "Remember…" }).click();
  await d.getByRole("radio", { name: "1 hour" }).check();
  const allow = d.getByRole("button", { name: "Allow and remember" });
  await armed(allow);
  await allow.click();
  await d.getByRole("alert").getByText(`that moment has already passed ${IMG}`).waitFor();
  assert.equal(await d.count(), 1);
  assert.equal(await allow.isEnabled(), true);
  assert.equal(await d.locator("img").count(), 0);
  // The person can still answer otherwise.
  await d.getByRole("button", { name: "Deny", exact: true }).click();
  await d.waitFor({ state: "detached" });
  assert.deepEqual(backend.answers.map((a) => a.answer.action), ["remember", "decline"]);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  await app.close();
});

test("what changed in the tool since the person decided is shown first, as text, clipped", async () => {
  const longAfter = JSON.stringify({ destructiveHint: true, note: "y".repeat(600) });
  const changed = [
    { field: "description", before: JSON.stringify("Deletes a ticket."), after: JSON.stringify(`Deletes ${IMG} every${ZWSP}thing ${RLO}fdp.exe`) },
    { field: "annotations", before: "null", after: longAfter },
    { field: `x${IMG}`, before: "1", after: "2" },
  ];
  const app = await openApp(env, {});
  const { page, backend } = app;
  await backend.addAsk(call({ id: 7, changed }));
  const d = page.getByRole("dialog", { name: "Approve a tool call" });
  await d.waitFor();
  const region = d.getByRole("region", { name: "This tool changed since you last decided about it" });
  assert.match(await d.locator(".call-summary").textContent(), /The tool changed since you last decided about it\.$/);
  // Before the facts: the first thing after the summary.
  assert.equal(await d.locator(".call-summary + .call-changed").count(), 1);
  assert.deepEqual(await region.locator("dt").allTextContents(), ["description", "annotations", `x${IMG}`]);
  const pres = region.locator("pre");
  assert.equal(await pres.nth(0).textContent(), '"Deletes a ticket."');
  assert.equal(await pres.nth(1).textContent(), `"Deletes ${IMG} every⟨U+200B⟩thing ⟨U+202E⟩fdp.exe"`);
  assert.equal(await region.locator(".ctrl").count(), 2);
  // Long values are clipped with Show all.
  assert.ok((await pres.nth(3).textContent()).endsWith("…"));
  await region.getByRole("button", { name: /^Show all/ }).click();
  assert.equal(await pres.nth(3).textContent(), longAfter);
  assert.equal(await d.locator("img").count(), 0);
  assert.doesNotMatch(await d.textContent(), new RegExp(`${RLO}|${ZWSP}`));
  // Nothing changed: no such section.
  await d.getByRole("button", { name: "Deny", exact: true }).click();
  await d.waitFor({ state: "detached" });
  await backend.addAsk(call({ id: 8 }));
  await d.waitFor();
  assert.equal(await d.locator(".call-changed").count(), 0);
  assert.doesNotMatch(await d.locator(".call-summary").textContent(), /changed/);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("a decision given for the server configured otherwise under the same name: the dialog says so, and what it runs now", async () => {
  const app = await openApp(env, {});
  const { page, backend } = app;
  await backend.addAsk(call({ id: 12, serverChanged: true, endpoint: { kind: "stdio", command: `npx evil-fs${RLO}exe.` } }));
  const d = page.getByRole("dialog", { name: "Approve a tool call" });
  await d.waitFor();
  const region = d.getByRole("region", { name: "This server is configured differently since you last decided" });
  assert.match(await d.locator(".call-summary").textContent(), /This server is configured differently since you last decided about this tool\.$/);
  assert.match(await region.textContent(), /so it may be another server, and the decision no longer applies\. It now runs npx evil-fs⟨U\+202E⟩exe\.\.$/);
  assert.doesNotMatch(await d.textContent(), new RegExp(RLO));
  // Decided on its own, never in a batch with other calls.
  await backend.addAsk(call({ id: 13 }));
  await d.getByRole("button", { name: "Deny", exact: true }).click();
  const answers = await waitForAnswers(backend, 1);
  assert.deepEqual(answers.map((a) => [a.id, a.answer.action]), [[12, "decline"]]);
  await d.waitFor();
  assert.equal(await d.locator(".call-changed").count(), 0);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("a call in no agent session is not offered this agent's session: a time is chosen first", async () => {
  const app = await openApp(env, { asks: [call({ id: 16, sessionless: true })] });
  const { page, backend } = app;
  const d = page.getByRole("dialog", { name: "Approve a tool call" });
  await d.getByRole("button", { name: "Remember…" }).click();
  const lasting = d.getByRole("group", { name: "For how long" });
  assert.deepEqual(await lasting.getByRole("radio").evaluateAll((rs) => rs.map((r) => r.closest("label").textContent.trim())),
    ["15 minutes", "1 hour", "Until tomorrow (midnight)", "Always"]);
  assert.equal(await lasting.getByRole("radio", { name: "15 minutes" }).isChecked(), true);
  await armed(d.getByRole("button", { name: "Allow and remember" }));
  await d.getByRole("button", { name: "Allow and remember" }).click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.equal(remembered(answer).lasting.kind, "until");
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("a tool the server did not list: the dialog says so, and it is decided on its own", async () => {
  const app = await openApp(env, {});
  const { page, backend } = app;
  await backend.addAsk(call({ id: 14, tool: "Delete_Ticket", unlisted: true }));
  const d = page.getByRole("dialog", { name: "Approve a tool call" });
  await d.waitFor();
  assert.match(await d.locator(".call-summary").textContent(), /The server did not list a tool by this name\.$/);
  const region = d.getByRole("region", { name: "Not a tool this server listed" });
  assert.match(await region.textContent(), /has no Delete_Ticket, or Countersign could not read its list\..*may run another of its tools under it\./);
  // Decided on its own, never in a batch with the calls after it.
  await backend.addAsk(call({ id: 15 }));
  await d.getByRole("button", { name: "Deny", exact: true }).click();
  const answers = await waitForAnswers(backend, 1);
  assert.deepEqual(answers.map((a) => [a.id, a.answer.action]), [[14, "decline"]]);
  await d.waitFor();
  assert.equal(await region.count(), 0);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("the agent is its token's name; the name it calls itself is shown beside when different", async () => {
  const app = await openApp(env, { asks: [call({ id: 9, agent: "Claude Code", declared: `Cursor${IMG}${RLO}` })] });
  const { page, backend } = app;
  const d = dialog(page);
  const agentFact = () => d.locator(".call-facts dd").first().textContent();
  assert.equal(await agentFact(), `Claude Code (calls itself Cursor${IMG}⟨U+202E⟩)`);
  assert.equal(await d.locator(".call-summary").textContent(), "Claude Code wants to run delete_ticket on tickets.");
  assert.equal(await d.locator("img").count(), 0);
  await d.getByRole("button", { name: "Deny", exact: true }).click();
  await d.waitFor({ state: "detached" });
  for (const [id, declared] of [[10, "Claude Code"], [11, null]]) {
    await backend.addAsk(call({ id, agent: "Claude Code", declared }));
    await d.waitFor();
    assert.equal(await agentFact(), "Claude Code");
    await d.getByRole("button", { name: "Deny", exact: true }).click();
    await d.waitFor({ state: "detached" });
  }
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  await app.close();
});

test("a History line with a moment no date can hold shows a dash, and the rest of History still draws", async () => {
  const now = Date.UTC(2026, 0, 5, 12, 0, 0);
  const entry = (id, at) => ({ run: "r", ask: call({ id, receivedAtMs: at }), outcome: { outcome: "declined" },
    resolvedAtMs: at, delivered: true, interrupted: false });
  const app = await openApp(env, { history: { asks: [entry(1, 99999999999999999), entry(2, now)], refused: [
    { server: "tickets", reason: "r", atMs: 99999999999999999, unrecorded: 0 }], gated: [], skipped: 0 } });
  const { page } = app;
  await page.getByRole("tab", { name: "History" }).click();
  const rows = page.locator(".history-table").first().locator("tbody tr");
  await rows.nth(1).waitFor();
  assert.match(await rows.first().textContent(), /—/);
  assert.match(await rows.nth(1).textContent(), /Jan 5, 2026/);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("History words remembered outcomes and says which remembered decision decided a call", async () => {
  const now = Date.UTC(2026, 0, 5, 12, 0, 0);
  const entry = (id, outcome, o = {}) => ({ run: "r", ask: call({ id, receivedAtMs: now - id * 1000, ...o }), outcome, resolvedAtMs: now, delivered: true, interrupted: false });
  const app = await openApp(env, { history: { asks: [
    entry(1, { outcome: "remembered", decision: { allow: true, lasting: { kind: "session" },
      covering: { kind: "pathUnder", argument: "path", prefix: "/p" } } }, { declared: "cursor-agent" }),
    entry(2, { outcome: "remembered", decision: { allow: false, lasting: { kind: "always" }, covering: { kind: "anyArguments" } } }),
    entry(3, { outcome: "remembered", decision: { allow: true, lasting: { kind: "until", untilMs: Date.UTC(2026, 0, 5, 13, 0, 0) },
      covering: { kind: "exactArguments", arguments: `{"id":"${IMG}"}` } } }),
    entry(4, { outcome: "alwaysAllowed" }),
  ], refused: [], gated: [
    { server: "tickets", agent: "Claude Code", tool: "delete_ticket", allowed: true, why: "remembered #3: allow for the agent's session, path under /p", atMs: now, count: 1, others: false },
    { server: "tickets", agent: "Claude Code", tool: "delete_ticket", allowed: false, why: "remembered #4: deny always, any arguments", atMs: now - 1, count: 1, others: false },
  ], skipped: 0 } });
  const { page } = app;
  await page.getByRole("tab", { name: "History" }).click();
  const rows = page.locator(".history-table").first().locator("tbody tr");
  await rows.first().waitFor();
  const outcomes = await rows.evaluateAll((trs) => trs.map((tr) => tr.children[3].textContent.replace(/\s/g, " ")));
  assert.deepEqual(outcomes, [
    "Allowed and remembered: for the agent's session, “path”: any path under /p",
    "Denied and remembered: always, any arguments",
    `Allowed and remembered: until Jan 5, 2026, 2:00:00 PM, exactly {"id":"${IMG}"}`,
    "Always allowed",
  ]);
  assert.match(await rows.first().textContent(), /for Claude Code \(calls itself cursor-agent\)/);
  const gated = page.locator(".history-table").nth(1).locator("tbody tr");
  assert.deepEqual(await gated.evaluateAll((trs) => trs.map((tr) => `${tr.children[4].textContent}: ${tr.children[5].textContent}`)), [
    "Allowed: remembered #3: allow for the agent's session, path under /p",
    "Refused: remembered #4: deny always, any arguments",
  ]);
  assert.equal(await page.locator(".history img").count(), 0);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});
