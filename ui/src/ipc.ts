//! The webview's whole contract with the shell: command names, their arguments and results, and
//! the two events. Types come from ui/src/bindings (generated from the Rust types by ts-rs), so a
//! change on one side shows up as a type error on the other.

import { invoke } from "@tauri-apps/api/core";
import { listen, type UnlistenFn } from "@tauri-apps/api/event";

import type { AgentConfigs } from "./bindings/AgentConfigs";
import type { AgentView } from "./bindings/AgentView";
import type { Answer } from "./bindings/Answer";
import type { AppError } from "./bindings/AppError";
import type { Ask } from "./bindings/Ask";
import type { AskEvent } from "./bindings/AskEvent";
import type { ClientKind } from "./bindings/ClientKind";
import type { ConfigInfo } from "./bindings/ConfigInfo";
import type { CreatedAgent } from "./bindings/CreatedAgent";
import type { DesktopInfo } from "./bindings/DesktopInfo";
import type { GatewayInfo } from "./bindings/GatewayInfo";
import type { HostCheck } from "./bindings/HostCheck";
import type { History } from "./bindings/History";
import type { ImportPreview } from "./bindings/ImportPreview";
import type { ImportResult } from "./bindings/ImportResult";
import type { Outcome } from "./bindings/Outcome";
import type { PreviewResult } from "./bindings/PreviewResult";
import type { RewritePreview } from "./bindings/RewritePreview";
import type { RewriteResult } from "./bindings/RewriteResult";
import type { ServerView } from "./bindings/ServerView";
import type { SessionEvent } from "./bindings/SessionEvent";
import type { Settings } from "./bindings/Settings";
import type { SignedOut } from "./bindings/SignedOut";
import type { ToolRun } from "./bindings/ToolRun";
import type { ToolView } from "./bindings/ToolView";
import type { RunProgress } from "./bindings/RunProgress";
import type { UndoResult } from "./bindings/UndoResult";
import type { Verification } from "./bindings/Verification";
import type { JsonValue } from "./bindings/serde_json/JsonValue";

export const commands = {
  pendingAsks: () => invoke<Ask[]>("pending_asks"),
  answerAsk: (id: number, answer: Answer) => invoke<Outcome>("answer_ask", { id, answer }),
  /** A waiting tool call made once more with `dryRun: true` (its tool takes one: `ask.preview`);
   * answers nothing. Rejects with `{kind: "preview", error: PreviewError}` when there is none. */
  previewCall: (id: number) => invoke<PreviewResult>("preview_call", { id }),
  listServers: () => invoke<ServerView[]>("list_servers"),
  listTools: (server: string) => invoke<ToolView[]>("list_tools", { server }),
  serverStderr: (server: string) => invoke<string[]>("server_stderr", { server }),
  /** Resolves once the person finished signing in in the browser (after consenting to the
   * sign-in page's address in a URL question), rejects with why not. */
  signIn: (server: string) => invoke<null>("sign_in", { server }),
  /** What became of the tokens at the authorization server, in words. */
  signOut: (server: string) => invoke<SignedOut>("sign_out", { server }),
  // `runId` makes a run happen once: Tauri re-sends an in-flight command when the page
  // reloads (tauri-apps/tauri#14154), and a re-sent destructive call must not run twice.
  runTool: (server: string, tool: string, args: JsonValue, runId: string = crypto.randomUUID()) =>
    invoke<ToolRun>("run_tool", { server, tool, arguments: args, runId }),
  /** Cancels the run `runId` in flight; resolves false when it had already ended. */
  cancelRun: (runId: string) => invoke<boolean>("cancel_run", { runId }),
  /** Whether a run reached the app; a run that has not never will (its id is taken). */
  runArrived: (runId: string) => invoke<boolean>("run_arrived", { runId }),
  history: () => invoke<History>("history"),
  /** Checks the audit log's hash chain: the first record changed, removed or moved, if any. */
  verifyAudit: () => invoke<Verification>("verify_audit"),
  configInfo: () => invoke<ConfigInfo>("config_info"),
  setMuted: (server: string, muted: boolean) => invoke<null>("set_muted", { server, muted }),
  desktopInfo: () => invoke<DesktopInfo>("desktop_info"),
  setStartAtLogin: (on: boolean) => invoke<null>("set_start_at_login", { on }),
  /** Rejects with an AppError `{kind: "gateway"}` when there is no gateway (it could not start). */
  gatewayInfo: () => invoke<GatewayInfo>("gateway_info"),
  setGatewayPaused: (paused: boolean) => invoke<GatewayInfo>("set_gateway_paused", { paused }),
  /** A new agent with its own token; the reply is the only time the token is shown. */
  createAgent: (name: string) => invoke<CreatedAgent>("create_agent", { name }),
  listAgents: () => invoke<AgentView[]>("list_agents"),
  /** Its token is refused from the next request on; the agents left. */
  revokeAgent: (id: string) => invoke<AgentView[]>("revoke_agent", { id }),
  getSettings: () => invoke<Settings>("get_settings"),
  /** Forgets a remembered decision (by its id); the settings as they are now. */
  revokeDecision: (id: number) => invoke<Settings>("revoke_decision", { id }),
  /** Forgets the remembered decisions this version cannot read; the settings as they are now. */
  forgetUnreadDecisions: () => invoke<Settings>("forget_unread_decisions"),
  /** The agents' config files and the rewrites that can be undone. */
  agentConfigs: () => invoke<AgentConfigs>("agent_configs"),
  /** Runs the host's own check of its servers (`claude mcp list`, ...); what it printed. */
  checkAgentHost: (client: ClientKind) => invoke<HostCheck>("check_agent_host", { client }),
  /** Reads an agent's servers; writes nothing. The import takes the preview's `plan`. */
  previewImport: (client: ClientKind) => invoke<ImportPreview>("preview_import", { client }),
  importServers: (plan: number, names: string[]) => invoke<ImportResult>("import_servers", { plan, names }),
  /** The agent's config as it would be, routed through the gateway; writes nothing. */
  previewRewrite: (client: ClientKind) => invoke<RewritePreview>("preview_rewrite", { client }),
  rewriteAgentConfig: (plan: number) => invoke<RewriteResult>("rewrite_agent_config", { plan }),
  /** Rejects with `{kind: "changedOnDisk"}` when the file changed since, unless `force`. */
  undoRewrite: (id: string, force: boolean) => invoke<UndoResult>("undo_rewrite", { id, force }),
};

export const events = {
  ask: (handler: (event: AskEvent) => void): Promise<UnlistenFn> =>
    listen<AskEvent>("ask-event", (e) => handler(e.payload)),
  session: (handler: (event: SessionEvent) => void): Promise<UnlistenFn> =>
    listen<SessionEvent>("session-event", (e) => handler(e.payload)),
  /** A run's progress, as its server reports it. */
  runProgress: (handler: (event: RunProgress) => void): Promise<UnlistenFn> =>
    listen<RunProgress>("run-progress", (e) => handler(e.payload)),
  /** The desktop changed (a tray host came or went): read `desktopInfo` again. */
  desktop: (handler: () => void): Promise<UnlistenFn> => listen("desktop-event", () => handler()),
  /** The gateway was paused or resumed, here or from the tray: read `gatewayInfo` again. */
  gateway: (handler: () => void): Promise<UnlistenFn> => listen("gateway-event", () => handler()),
  /** The config file was edited, applied or not: read `servers` and `configInfo` again. */
  config: (handler: () => void): Promise<UnlistenFn> => listen("config-event", () => handler()),
  /** An address the person agreed to open did not open in the browser. */
  notOpened: (handler: (event: NotOpened) => void): Promise<UnlistenFn> =>
    listen<NotOpened>("browser-not-opened", (e) => handler(e.payload)),
};

/** An address the person agreed to open that the browser's opener did not open, and why. */
export interface NotOpened {
  url: string;
  reason: string;
}

/** The rejection as an `AppError` when it is one (`{kind, message, ...}`), else `null`. */
export function asAppError(error: unknown): AppError | null {
  if (
    typeof error === "object" && error !== null &&
    typeof (error as { kind?: unknown }).kind === "string" &&
    typeof (error as { message?: unknown }).message === "string"
  ) {
    return error as AppError;
  }
  return null;
}

/** A sentence for any rejection: the AppError's message, or the value as text. */
export function errorText(error: unknown): string {
  const app = asAppError(error);
  if (app) return app.message;
  if (error instanceof Error) return error.message;
  if (typeof error === "string") return error;
  try {
    return JSON.stringify(error);
  } catch {
    return String(error);
  }
}
