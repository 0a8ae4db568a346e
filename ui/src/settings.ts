//! The Settings view: start at login (off unless the person turns it on), how closing the window
//! behaves here, and the tool calls the person chose "Always allow" for, each revocable.
//! Per-server notification muting lives on each server's page.

import type { AllowedCall } from "./bindings/AllowedCall";
import { el, replace, uid } from "./dom";
import { commands, errorText } from "./ipc";
import { inlineText } from "./untrusted";

export class SettingsPane {
  readonly root: HTMLElement;
  private readonly body = el("div", { class: "settings-body" });
  private readonly allowedHeading = el("h3", { id: uid("always-allowed"), attrs: { tabindex: "-1" } }, "Always allowed");
  private readonly allowedList = el("div", { class: "allowed" });
  private readonly allowedStatus = el("p", { class: "muted", attrs: { role: "status" } });

  constructor() {
    this.root = el("div", { class: "settings" },
      el("h2", {}, "Settings"),
      this.body,
      el("section", { class: "detail-section", attrs: { "aria-labelledby": this.allowedHeading.id } },
        this.allowedHeading,
        el("p", { class: "muted" },
          "Tool calls you chose “Always allow” for run without asking. Revoke one to be asked again."),
        this.allowedList,
        this.allowedStatus));
  }

  async reload(): Promise<void> {
    await Promise.all([this.loadDesktop(), this.loadAllowed()]);
  }

  private async loadDesktop(): Promise<void> {
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

  private async loadAllowed(): Promise<void> {
    try {
      const settings = await commands.getSettings();
      this.drawAllowed(settings.alwaysAllow);
    } catch (error) {
      replace(this.allowedList, el("p", { class: "error-text" },
        "Could not read the remembered decisions: ", inlineText(errorText(error), 400)));
    }
  }

  private drawAllowed(calls: AllowedCall[]): void {
    if (calls.length === 0) {
      replace(this.allowedList, el("p", { class: "empty-state" }, "Nothing is always allowed: every tool call that needs approval asks you."));
      return;
    }
    replace(this.allowedList, el("ul", { class: "allowed-list" }, ...calls.map((call, index) => {
      const textId = uid("allowed");
      const revoke = el("button", {
        class: "button small",
        attrs: { type: "button", "aria-describedby": textId },
      }, "Revoke");
      revoke.addEventListener("click", () => this.revoke(call, index, revoke));
      return el("li", {},
        el("span", { id: textId }, ...allowedSentence(call)),
        revoke);
    })));
  }

  private revoke(call: AllowedCall, index: number, button: HTMLButtonElement): void {
    button.disabled = true;
    commands.revokeAlwaysAllow(call).then(
      (settings) => {
        this.drawAllowed(settings.alwaysAllow);
        this.allowedStatus.textContent = "Revoked: the next such call asks you again.";
        // Keep keyboard focus in the list: the row now in the revoked one's place, else the heading.
        const buttons = this.allowedList.querySelectorAll<HTMLButtonElement>("button");
        (buttons[Math.min(index, buttons.length - 1)] ?? this.allowedHeading).focus();
      },
      (error: unknown) => {
        button.disabled = false;
        this.allowedStatus.textContent = `Could not revoke: ${errorText(error)}`;
      },
    );
  }
}

/** "<agent> may run <tool> on <server>", as nodes of untrusted text. */
function allowedSentence(call: AllowedCall): Node[] {
  return [
    call.agent ? inlineText(call.agent, 80, "agent-name") : el("em", {}, "An agent with no name"),
    document.createTextNode(" may run "),
    el("code", {}, inlineText(call.tool, 120)),
    document.createTextNode(" on "),
    inlineText(call.server, 80, "server-name"),
  ];
}
