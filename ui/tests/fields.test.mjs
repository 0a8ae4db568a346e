// Every field kind of the 2025-11-25 elicitation schema: rendered with the right native input,
// filled in the way a person would (click, type, select, check), and sent back exactly,
// including date-time conversion to RFC 3339 and optional fields left out.
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

const everyKind = () => formAsk({
  server: "desk",
  message: "Book a meeting: fill in the details.",
  fields: [
    field.text("topic", { title: "Topic", description: "What the meeting is about", required: true, minLength: 3, maxLength: 80 }),
    field.text("attendee", { title: "Attendee email", format: "email", required: true }),
    field.text("agenda", { title: "Agenda link", format: "uri", default: "https://wiki.example.com/agenda" }),
    field.text("link", { title: "Extra link", format: "uri" }),
    field.text("day", { title: "Day", format: "date" }),
    field.text("start", { title: "Start", format: "date-time" }),
    field.text("summer", { title: "Summer start", format: "date-time" }),
    field.text("deadline", { title: "Deadline", format: "date-time", default: "2025-06-01T12:00:00Z" }),
    field.number("durationHours", { title: "Duration (hours)", minimum: 0.5, maximum: 8, default: 1 }),
    field.number("attendeeCount", { title: "Number of attendees", integer: true, minimum: 1, maximum: 20, default: 2 }),
    field.boolean("sendInvites", { title: "Send invites", default: true }),
    field.boolean("record", { title: "Record the meeting" }),
    field.boolean("muted", { title: "Start muted" }),
    field.single("room", ["Aurora", "Borealis", "Cosmos"], { title: "Room", default: "Borealis" }),
    field.single("priority", [["low", "Low"], ["normal", "Normal"], ["high", "High: bump other meetings"]], { title: "Priority", default: "normal" }),
    field.single("timezone", [["UTC", "UTC"], ["Europe/Paris", "Paris"], ["America/New_York", "New York"]], { title: "Time zone" }),
    field.multi("equipment", ["projector", "whiteboard", "speakerphone"], { title: "Equipment", minItems: 1, maxItems: 2 }),
    field.multi("tags", [["a", "Alpha"], ["b", "Beta"]], { title: "Tags", default: ["b"] }),
    field.text("notes", { title: "Notes" }),
    field.number("budget", { title: "Budget" }),
    field.single("color", ["red", "green"], { title: "Colour" }),
    field.multi("extras", ["coffee", "cake"], { title: "Extras" }),
  ],
});

test("every field kind renders with its native input and constraints", async () => {
  const app = await openApp(env, { asks: [everyKind()] });
  const { page } = app;
  const d = dialog(page);
  const attrs = (label) => d.getByLabel(label, { exact: false }).first().evaluate((e) => ({
    tag: e.tagName.toLowerCase(), type: e.getAttribute("type"), value: e.value, required: e.required,
    min: e.getAttribute("min"), max: e.getAttribute("max"), step: e.getAttribute("step"),
    minlength: e.getAttribute("minlength"), maxlength: e.getAttribute("maxlength"), checked: e.checked,
    describedBy: (e.getAttribute("aria-describedby") ?? "").split(" ").map((id) => document.getElementById(id)?.textContent ?? "").join("|"),
  }));

  const topic = await attrs("Topic");
  assert.equal(topic.type, "text");
  assert.equal(topic.required, true);
  // Counted in characters, as the backend counts them, not by the browser's UTF-16 units.
  assert.equal(topic.minlength, null);
  assert.equal(topic.maxlength, null);
  assert.match(topic.describedBy, /What the meeting is about/);
  assert.match(topic.describedBy, /3 to 80 characters/);
  assert.equal((await attrs("Attendee email")).type, "email");
  assert.deepEqual(await attrs("Agenda link").then((a) => [a.type, a.value]), ["url", "https://wiki.example.com/agenda"]);
  assert.equal((await attrs("Day")).type, "date");
  const deadline = await attrs("Deadline");
  assert.equal(deadline.type, "datetime-local");
  assert.equal(deadline.step, "1");
  assert.equal(deadline.value, "2025-06-01T14:00", "a date-time default is shown in local time (Berlin, summer)");
  const duration = await attrs("Duration");
  assert.deepEqual([duration.type, duration.step, duration.min, duration.max, duration.value], ["number", "any", "0.5", "8", "1"]);
  const count = await attrs("Number of attendees");
  assert.deepEqual([count.type, count.step, count.min, count.max, count.value], ["number", "1", "1", "20", "2"]);
  assert.equal((await attrs("Send invites")).checked, true);
  assert.equal((await attrs("Record the meeting")).checked, false);
  assert.equal((await attrs("Room")).value, "1");
  assert.equal(await d.getByLabel("Room").evaluate((s) => s.selectedOptions[0].textContent), "Borealis");
  assert.equal(await d.getByLabel("Priority").evaluate((s) => s.selectedOptions[0].textContent), "Normal");
  // Titled options show their labels, untitled ones their values.
  assert.deepEqual(await d.getByLabel("Time zone").evaluate((s) => [...s.options].map((o) => o.textContent)),
    ["Choose…", "UTC", "Paris", "New York"]);
  assert.deepEqual(await d.getByLabel("Room").evaluate((s) => [...s.options].map((o) => o.textContent)),
    ["Choose…", "Aurora", "Borealis", "Cosmos"]);
  // Nothing looks chosen that is not: no default -> the empty "Choose…" option.
  assert.equal(await d.getByLabel("Time zone").inputValue(), "");
  assert.equal(await d.getByLabel("Time zone").evaluate((s) => s.selectedOptions[0].textContent), "Choose…");
  // Multi selects are a group of labelled checkboxes with the count rule in the description.
  const equipment = d.getByRole("group", { name: /Equipment/ });
  assert.equal(await equipment.getByRole("checkbox").count(), 3);
  assert.match(await equipment.textContent(), /Choose 1 to 2/);
  assert.equal(await d.getByRole("group", { name: /Tags/ }).getByLabel("Beta").isChecked(), true);
  // Required is marked visually and for assistive technology.
  assert.equal(await d.locator("label", { hasText: "Topic" }).locator(".req").count(), 1);
  // Every input, select and checkbox has a label.
  const unlabelled = await page.evaluate(() => [...document.querySelectorAll("dialog input, dialog select")]
    .filter((e) => e.labels.length === 0).map((e) => e.outerHTML));
  assert.deepEqual(unlabelled, []);
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("every field kind round-trips what the person enters", async () => {
  const app = await openApp(env, { asks: [everyKind()] });
  const { page, backend } = app;
  const d = dialog(page);

  await d.getByLabel("Topic").click();
  await page.keyboard.type("Quarterly review");
  await d.getByLabel("Attendee email").click();
  await page.keyboard.type("ana@example.com");
  await d.getByLabel("Extra link").click();
  await page.keyboard.type("https://example.org/x?y=1");
  await d.getByLabel("Day", { exact: true }).click({ position: { x: 12, y: 12 } });
  await page.keyboard.type("03042025");
  // datetime-local: month, day, year, then (after moving on from the 6-digit year) time and AM/PM.
  // Clicked at the left edge, where the month is (the middle of the box is the year or the hour).
  await d.getByLabel("Start", { exact: true }).click({ position: { x: 12, y: 12 } });
  await page.keyboard.type("03042025");
  await page.keyboard.press("ArrowRight");
  await page.keyboard.type("103045A");
  await d.getByLabel("Summer start").click({ position: { x: 12, y: 12 } });
  await page.keyboard.type("07012025");
  await page.keyboard.press("ArrowRight");
  await page.keyboard.type("093000P");
  await d.getByLabel("Duration").click();
  await page.keyboard.press("Control+A");
  await page.keyboard.type("1.5");
  await d.getByLabel("Number of attendees").click();
  await page.keyboard.press("Control+A");
  await page.keyboard.type("7");
  await d.getByLabel("Record the meeting").check();
  await d.getByLabel("Room").selectOption({ label: "Cosmos" });
  await d.getByLabel("Priority").selectOption({ label: "High: bump other meetings" });
  await d.getByLabel("Time zone").selectOption({ label: "Paris" });
  await d.getByLabel("projector").check();
  await d.getByLabel("speakerphone").check();
  await d.getByRole("button", { name: "Submit" }).click();

  const [answer] = await waitForAnswers(backend, 1);
  assert.equal(answer.answer.action, "accept");
  assert.deepEqual(answer.answer.content, {
    topic: "Quarterly review",
    attendee: "ana@example.com",
    agenda: "https://wiki.example.com/agenda",
    link: "https://example.org/x?y=1",
    day: "2025-03-04",
    start: "2025-03-04T10:30:45+01:00",
    summer: "2025-07-01T21:30:00+02:00",
    // Untouched, the server's own default goes back exactly as written.
    deadline: "2025-06-01T12:00:00Z",
    durationHours: 1.5,
    attendeeCount: 7,
    sendInvites: true,
    record: true,
    muted: false,
    room: "Cosmos",
    priority: "high",
    timezone: "Europe/Paris",
    equipment: ["projector", "speakerphone"],
    tags: ["b"],
    // notes, budget, color and extras were left empty: omitted, not null or "".
  });
  await dialog(page).waitFor({ state: "detached" });
  assert.deepEqual(await app.problems(), []);
  await app.close();
});

test("an edited date-time default is sent in the local offset", async () => {
  const ask = formAsk({ fields: [field.text("at", { title: "At", format: "date-time", default: "2025-01-10T08:00:00-05:00" })] });
  const app = await openApp(env, { asks: [ask] }, { timezoneId: "Asia/Kolkata" });
  const input = dialog(app.page).getByLabel("At");
  assert.equal(await input.inputValue(), "2025-01-10T18:30");
  await input.click({ position: { x: 12, y: 12 } }); // the month
  await app.page.keyboard.press("ArrowRight"); // day
  await app.page.keyboard.type("11");
  await dialog(app.page).getByRole("button", { name: "Submit" }).click();
  const [answer] = await waitForAnswers(app.backend, 1);
  assert.deepEqual(answer.answer.content, { at: "2025-01-11T18:30:00+05:30" });
  await app.close();
});

test("native constraints block Submit with a message per field, and nothing is sent", async () => {
  const ask = formAsk({ fields: [
    field.text("topic", { title: "Topic", minLength: 3, required: true }),
    field.text("mail", { title: "Email", format: "email" }),
    field.number("count", { title: "Count", integer: true, minimum: 1, maximum: 20 }),
    field.multi("equipment", ["projector", "whiteboard", "speakerphone"], { title: "Equipment", maxItems: 2 }),
  ] });
  const app = await openApp(env, { asks: [ask] });
  const { page, backend } = app;
  const d = dialog(page);
  await d.getByLabel("Topic").click();
  await page.keyboard.type("ab");
  await d.getByLabel("Email").click();
  await page.keyboard.type("not-an-email");
  await d.getByLabel("Count").click();
  await page.keyboard.type("50");
  for (const name of ["projector", "whiteboard", "speakerphone"]) await d.getByLabel(name).check();
  await d.getByRole("button", { name: "Submit" }).click();

  const fieldError = (label) => d.getByLabel(label).evaluate((e) => {
    const id = (e.getAttribute("aria-describedby") ?? "").split(" ").find((i) => i.startsWith("err-"));
    return { text: document.getElementById(id)?.textContent ?? "", invalid: e.getAttribute("aria-invalid") };
  });
  assert.match((await fieldError("Topic")).text, /\S/);
  assert.equal((await fieldError("Topic")).invalid, "true");
  assert.match((await fieldError("Email")).text, /\S/);
  assert.match((await fieldError("Count")).text, /\S/);
  assert.match(await d.getByRole("group", { name: /Equipment/ }).textContent(), /Choose at most 2/);
  assert.match(await d.getByRole("alert").textContent(), /Equipment/);
  // Focus goes to the first problem.
  assert.equal(await page.evaluate(() => document.activeElement?.labels?.[0]?.textContent?.trim()), "Topic *");
  await page.waitForTimeout(200);
  assert.equal(backend.answers.length, 0, "nothing is sent while a constraint fails");
  assert.equal(await d.count(), 1);

  // Fixed, it goes through.
  await d.getByLabel("Topic").click();
  await page.keyboard.type("c");
  await d.getByLabel("Email").fill("a@example.com");
  await d.getByLabel("Count").fill("5");
  await d.getByLabel("whiteboard").uncheck();
  await d.getByRole("button", { name: "Submit" }).click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(answer.answer.content, { topic: "abc", mail: "a@example.com", count: 5, equipment: ["projector", "speakerphone"] });
  await app.close();
});

test("text lengths count characters as the backend does, and a server's choice says it is the server's", async () => {
  const ask = formAsk({ fields: [
    field.text("mark", { title: "Mark", minLength: 2, required: true }),
    field.text("pair", { title: "Pair", maxLength: 3 }),
    field.single("scope", [["all-repos", "Choose…"], ["one-repo", "One repository"]], { title: "Scope", default: "all-repos" }),
    field.single("blank", [["x", ""], ["y", "Why"]], { title: "Blank" }),
  ] });
  const app = await openApp(env, { asks: [ask] });
  const { page, backend } = app;
  const d = dialog(page);
  // The server's choice reads "Choose…", as if nothing were chosen: it is said to be the server's.
  const scopeHint = await d.getByLabel("Scope").evaluate((e) => (e.getAttribute("aria-describedby") ?? "")
    .split(" ").map((id) => document.getElementById(id)?.textContent ?? "").join("|"));
  assert.match(scopeHint, /Chosen by the server: all-repos/);
  // A title that shows nothing is named by its value.
  assert.deepEqual(await d.getByLabel("Blank").evaluate((e) => Array.from(e.options).map((o) => o.text)), ["Choose…", "x", "Why"]);
  // One emoji is one character: short of a minimum of 2 (the browser's count says 2).
  await d.getByLabel("Mark").fill("😀");
  await d.getByLabel("Pair").fill("😀😀");
  await d.getByRole("button", { name: "Submit" }).click();
  assert.match(await d.getByRole("alert").textContent(), /At least 2 characters \(1 now\)/);
  await page.waitForTimeout(200);
  assert.equal(backend.answers.length, 0);
  await d.getByLabel("Mark").fill("😀😀");
  await d.getByRole("button", { name: "Submit" }).click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(answer.answer.content, { mark: "😀😀", pair: "😀😀", scope: "all-repos" });
  await app.close();
});

test("a required field with no value blocks Submit with a message naming it", async () => {
  const ask = formAsk({ fields: [
    field.text("name", { title: "Your name", required: true }),
    field.single("plan", ["basic", "pro"], { title: "Plan", required: true }),
    field.text("nick", { title: "Nickname" }),
  ] });
  const app = await openApp(env, { asks: [ask] });
  const { page, backend } = app;
  const d = dialog(page);
  await d.getByRole("button", { name: "Submit" }).click();
  const alert = await d.getByRole("alert").textContent();
  assert.match(alert, /“Your name” is required\./);
  assert.match(alert, /“Plan” is required\./);
  assert.equal(await page.evaluate(() => document.activeElement?.id), await d.getByLabel("Your name").getAttribute("id"));
  await page.waitForTimeout(200);
  assert.equal(backend.answers.length, 0);
  // Typing clears that field's message.
  await page.keyboard.type("Ana");
  assert.equal(await d.locator(".field-error:not([hidden])").count(), 1);
  await d.getByLabel("Plan").selectOption({ label: "pro" });
  await d.getByRole("button", { name: "Submit" }).click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(answer.answer.content, { name: "Ana", plan: "pro" });
  await app.close();
});

test("multi select: min items enforced, required with none ticked sends [], optional omitted", async () => {
  const ask = formAsk({ fields: [
    field.multi("need", ["a", "b", "c"], { title: "Need", minItems: 2 }),
    field.multi("req", ["x", "y"], { title: "Req", required: true }),
  ] });
  const app = await openApp(env, { asks: [ask] });
  const { page, backend } = app;
  const d = dialog(page);
  await d.getByLabel("a", { exact: true }).check();
  await d.getByRole("button", { name: "Submit" }).click();
  assert.match(await d.getByRole("alert").textContent(), /Need.*Choose at least 2/);
  await page.waitForTimeout(100);
  assert.equal(backend.answers.length, 0);
  await d.getByLabel("a", { exact: true }).uncheck();
  await d.getByRole("button", { name: "Submit" }).click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.deepEqual(answer.answer.content, { req: [] });
  await app.close();
});

test("long messages are clipped with Show all; bidi controls are made visible", async () => {
  const long = `Line one\n${"word ".repeat(400)}END-OF-MESSAGE`;
  const ask = formAsk({ message: long, fields: [
    field.text("file", { title: "File \u202Etxt.exe", description: "Named \u2067evil\u2069 here" }),
  ] });
  const app = await openApp(env, { asks: [ask] });
  const d = dialog(app.page);
  const message = d.locator(".ask-message");
  assert.doesNotMatch(await message.textContent(), /END-OF-MESSAGE/);
  const toggle = d.getByRole("button", { name: /Show all/ });
  assert.equal(await toggle.getAttribute("aria-expanded"), "false");
  await toggle.click();
  assert.match(await message.textContent(), /END-OF-MESSAGE/);
  assert.equal(await d.getByRole("button", { name: "Show less" }).getAttribute("aria-expanded"), "true");
  const label = await d.locator(".field-label").textContent();
  assert.match(label, /File ⟨U\+202E⟩txt\.exe/);
  assert.doesNotMatch(label, /\u202E/);
  assert.match(await d.locator(".field-desc").textContent(), /Named ⟨U\+2067⟩evil⟨U\+2069⟩ here/);
  await app.close();
});

test("fields named __proto__ or constructor reach the answer as fields", async () => {
  const app = await openApp(env, { asks: [formAsk({ id: 90, fields: [
    field.text("__proto__", { title: "Nickname", required: true }),
    field.text("constructor", { title: "Team" }),
  ] })] });
  const { page, backend } = app;
  const d = dialog(page);
  await d.getByLabel("Nickname").fill("ana");
  await d.getByLabel("Team").fill("blue");
  await d.getByRole("button", { name: "Submit" }).click();
  const [answer] = await waitForAnswers(backend, 1);
  assert.equal(answer.answer.action, "accept");
  assert.deepEqual(Object.entries(answer.answer.content), [["__proto__", "ana"], ["constructor", "blue"]]);
  await app.close();
});
