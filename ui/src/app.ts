//! The window: a top bar with the Servers / History / Connect agents / Settings tabs, the config
//! banner, the views, the status line, and the ask dialog. `start` subscribes to the backend's
//! events first and then draws everything from the backend's state, so a reload at any moment
//! shows the same thing.

import { el, append, replace } from "./dom";
import { commands, errorText, events, type NotOpened } from "./ipc";
import { AskDialog } from "./ask/dialog";
import { ConnectPane } from "./connect";
import { HistoryPane } from "./history";
import { Notice } from "./notice";
import { ServersPane } from "./servers";
import { SettingsPane } from "./settings";
import { onRunProgress } from "./tools";
import { inlineText } from "./untrusted";

export async function start(root: HTMLElement): Promise<void> {
  const noticeRegion = el("div", { class: "notice toast", attrs: { role: "status" } });
  const notice = new Notice(noticeRegion);
  const dialog = new AskDialog(notice);
  const servers = new ServersPane();
  const history = new HistoryPane();
  const connect = new ConnectPane();
  const settings = new SettingsPane();
  const configBanner = el("div", { class: "config-banner" });
  const banner = el("div", { class: "banners" }, configBanner);
  const trayNote = el("div", { class: "tray-note" });

  const tabs = new Tabs([
    { id: "servers", label: "Servers", content: servers.root },
    { id: "history", label: "History", content: history.root, onShow: () => void history.reload() },
    { id: "connect", label: "Connect agents", content: connect.root, onShow: () => void connect.reload() },
    { id: "settings", label: "Settings", content: settings.root, onShow: () => void settings.reload() },
  ]);

  replace(root,
    el("header", { class: "topbar" },
      el("h1", { class: "brand" }, "Countersign"),
      tabs.list),
    banner,
    trayNote,
    el("main", { class: "content" }, ...tabs.panels),
    noticeRegion,
    dialog.dialog);

  // Subscribe before reading state, so nothing that happens in between is missed; the dialog
  // ignores an `added` it already has and a `resolved` for an ask it never saw.
  try {
    await Promise.all([
      events.ask((e) => dialog.onEvent(e)),
      events.session((e) => servers.onSessionEvent(e)),
      events.runProgress((e) => onRunProgress(e)),
      events.desktop(() => void showTrayNote(trayNote, banner)),
      events.gateway(() => void connect.gatewayChanged()),
      events.config(() => void Promise.all([servers.reload(), showConfigInfo(configBanner, banner)])),
      events.notOpened((e) => showNotOpened(banner, e)),
    ]);
  } catch (error) {
    showLoadError(banner, `Could not subscribe to events: ${errorText(error)}`);
  }

  await Promise.all([
    commands.pendingAsks().then(
      (asks) => dialog.sync(asks),
      (error: unknown) => showLoadError(banner, `Could not read the waiting questions: ${errorText(error)}`),
    ),
    servers.reload(),
    showTrayNote(trayNote, banner),
    showConfigInfo(configBanner, banner),
  ]);
  root.setAttribute("data-ready", "true");
}

/** Draws what the person should know about the config file: its problems (at start, or an
 * edit that was not applied) and notices about Countersign's files; redrawn on each edit. */
async function showConfigInfo(region: HTMLElement, errors: HTMLElement): Promise<void> {
  let info;
  try {
    info = await commands.configInfo();
  } catch (error) {
    showLoadError(errors, `Could not read the config info: ${errorText(error)}`);
    return;
  }
  const sections: HTMLElement[] = [];
  if (info.notices.length > 0) {
    sections.push(el("section", { class: "banner info", attrs: { "aria-label": "About Countersign's files" } },
      el("p", { class: "banner-title" }, "About Countersign's files"),
      el("ul", {}, ...info.notices.map((n) => el("li", {}, inlineText(n, 400))))));
  }
  if (info.errors.length > 0) {
    sections.push(el("section", {
      class: "banner warning",
      // An edit that was not applied is news the person is waiting for; read it out.
      attrs: { "aria-label": "Config problems", role: info.editRejected ? "alert" : null },
    },
      el("p", { class: "banner-title" },
        "Problems in the config file ", el("code", {}, inlineText(info.path, 200)),
        info.editRejected
          ? ". Your last edit was not applied: Countersign runs on with the config it had."
          : ". Countersign started with what it could read."),
      el("ul", {}, ...info.errors.map((e) => el("li", {},
        el("code", {}, inlineText(`${e.file}:${e.line}:${e.column}`, 200)),
        e.server ? el("span", {}, " (server ", inlineText(e.server, 60), ")") : null,
        ": ", inlineText(e.message, 400))))));
  }
  replace(region, ...sections);
}

/** Says so when closing the window will quit (no tray to keep running in); redrawn when a
 * tray host comes or goes. */
async function showTrayNote(note: HTMLElement, errors: HTMLElement): Promise<void> {
  let info;
  try {
    info = await commands.desktopInfo();
  } catch (error) {
    showLoadError(errors, `Could not read the desktop info: ${errorText(error)}`);
    return;
  }
  if (info.tray) {
    replace(note);
    return;
  }
  replace(note, el("section", { class: "banner info", attrs: { "aria-label": "No system tray" } },
    el("p", {}, "No system tray was found, so Countersign cannot keep running in it: ",
      "closing this window quits Countersign, and any open question is answered cancel.")));
}

/** An address the person agreed to open did not open: said, with the address whole, to copy
 * (as text, not a link: the page never navigates), until dismissed. */
function showNotOpened(banner: HTMLElement, event: NotOpened): void {
  const section = el("section", { class: "banner error not-opened", attrs: { role: "alert" } },
    el("div", {},
      el("p", {}, "Your browser did not open: ", inlineText(event.reason, 300),
        ". Open this address yourself:"),
      el("p", { class: "copyable-url mono", attrs: { dir: "ltr" } }, event.url)),
    el("button", {
      class: "button small",
      attrs: { type: "button" },
      on: { click: () => section.remove() },
    }, "Dismiss"));
  append(banner, section);
}

function showLoadError(banner: HTMLElement, message: string): void {
  append(banner, el("section", { class: "banner error", attrs: { role: "alert" } },
    el("p", {}, inlineText(message)),
    el("button", {
      class: "button small",
      attrs: { type: "button" },
      on: { click: () => location.reload() },
    }, "Reload")));
}

interface TabSpec {
  id: string;
  label: string;
  content: HTMLElement;
  onShow?: () => void;
}

/** ARIA tabs: Left/Right/Home/End move between them, the selected one is in the tab order. */
class Tabs {
  readonly list: HTMLElement;
  readonly panels: HTMLElement[];
  private readonly buttons: HTMLButtonElement[];

  constructor(private readonly specs: TabSpec[]) {
    this.buttons = specs.map((spec, i) => el("button", {
      id: `tab-${spec.id}`,
      class: "tab",
      attrs: { type: "button", role: "tab", "aria-controls": `panel-${spec.id}` },
      on: { click: () => this.select(i) },
    }, spec.label));
    this.list = el("div", { class: "tabs", attrs: { role: "tablist", "aria-label": "Views" } }, ...this.buttons);
    this.list.addEventListener("keydown", (event) => {
      const at = this.buttons.indexOf(document.activeElement as HTMLButtonElement);
      if (at < 0) return;
      const n = this.buttons.length;
      const to = { ArrowRight: (at + 1) % n, ArrowLeft: (at - 1 + n) % n, Home: 0, End: n - 1 }[event.key];
      if (to === undefined) return;
      event.preventDefault();
      this.select(to);
      this.buttons[to].focus();
    });
    this.panels = specs.map((spec) => el("section", {
      id: `panel-${spec.id}`,
      class: "panel",
      attrs: { role: "tabpanel", "aria-labelledby": `tab-${spec.id}` },
    }, spec.content));
    this.select(0);
  }

  select(index: number): void {
    this.buttons.forEach((b, i) => {
      b.setAttribute("aria-selected", String(i === index));
      b.tabIndex = i === index ? 0 : -1;
    });
    this.panels.forEach((p, i) => (p.hidden = i !== index));
    this.specs[index].onShow?.();
  }
}
