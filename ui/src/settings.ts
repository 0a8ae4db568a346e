//! The Settings view: start at login (off unless the person turns it on) and how closing the
//! window behaves here. Per-server notification muting lives on each server's page.

import { el, replace } from "./dom";
import { commands, errorText } from "./ipc";
import { inlineText } from "./untrusted";

export class SettingsPane {
  readonly root: HTMLElement;
  private readonly body = el("div", { class: "settings-body" });

  constructor() {
    this.root = el("div", { class: "settings" }, el("h2", {}, "Settings"), this.body);
  }

  async reload(): Promise<void> {
    let info;
    try {
      info = await commands.desktopInfo();
    } catch (error) {
      replace(this.body, el("p", { class: "error-text" }, "Could not read the settings: ", inlineText(errorText(error), 400)));
      return;
    }
    const box = el("input", { id: "start-at-login", attrs: { type: "checkbox" } }) as HTMLInputElement;
    box.checked = info.startAtLogin;
    const status = el("span", { class: "muted", attrs: { role: "status" } });
    box.addEventListener("change", () => {
      const on = box.checked;
      box.disabled = true;
      commands.setStartAtLogin(on).then(
        () => (status.textContent = on ? " Countersign will start when you log in." : ""),
        (error: unknown) => {
          box.checked = !on;
          status.textContent = ` ${errorText(error)}`;
        },
      ).finally(() => (box.disabled = false));
    });
    replace(this.body,
      el("p", {}, box, el("label", { attrs: { for: "start-at-login" } }, "Start Countersign when I log in"), status),
      el("p", { class: "muted" }, info.tray
        ? "Closing the window keeps Countersign running in the tray; quit from the tray menu."
        : "No system tray was found: closing the window quits Countersign."));
  }
}
