//! Test-only: installs Tauri's `mockIPC` before the app loads, forwarding every command to a fake
//! backend that lives in the Node test process (`window.__backend`, exposed by Playwright, so it
//! survives reloads). `window.__emit` lets the test push `ask-event` / `session-event` through
//! `emit`, which `shouldMockEvents` delivers to the app's `listen` handlers.

import { mockIPC } from "@tauri-apps/api/mocks";
import { emit } from "@tauri-apps/api/event";

type Reply = { ok: unknown } | { err: unknown };

declare global {
  interface Window {
    __backend?: (cmd: string, argsJson: string) => Promise<Reply>;
    __emit: (event: string, payload: unknown) => Promise<void>;
  }
}

mockIPC(async (cmd, args) => {
  if (!window.__backend) throw { kind: "session", message: "no fake backend" };
  // As JSON text, as Tauri's IPC carries it (Playwright's own copying of objects would, for
  // one, drop a key named `__proto__`).
  const reply = await window.__backend(cmd, JSON.stringify(args ?? {}));
  if ("err" in reply) throw reply.err;
  return reply.ok;
}, { shouldMockEvents: true });

window.__emit = (event, payload) => emit(event, payload);
