// Builders for backend values (shapes from ui/src/bindings).

let nextId = 100;

export function endpointStdio(command = "countersign-demo-server --stdio") {
  return { kind: "stdio", command };
}

export function formAsk({ id, server = "demo", message = "Please answer.", fields = [], agent = null,
  declared = null, endpoint = endpointStdio(), deadlineMs = null, receivedAtMs } = {}) {
  nextId += 1;
  return {
    id: id ?? nextId,
    asker: { server, endpoint, agent, declared },
    request: {},
    receivedAtMs: receivedAtMs ?? Date.now() + nextId,
    deadlineMs,
    kind: "form",
    message,
    schema: { fields },
  };
}

/** A URL ask as the backend sends it: `host` and `warnings` are its URL policy's verdict
 * (core's url_policy), given here as the backend would compute them. */
export function urlAsk({ id, server = "demo", message = "Sign in to continue.", url, agent = null,
  declared = null, endpoint = endpointStdio(), host, warnings = [], signIn = false } = {}) {
  nextId += 1;
  return {
    id: id ?? nextId,
    asker: { server, endpoint, agent, declared },
    request: {},
    receivedAtMs: Date.now() + nextId,
    deadlineMs: null,
    kind: "url",
    message,
    url,
    elicitationId: `el-${nextId}`,
    host: host ?? hostOf(url),
    warnings,
    signIn,
  };
}

/** A tool-call approval: an agent's call through the gateway that policy sends to the person.
 * `argumentsText` is the text the backend will forward (serde_json's pretty print); by default the
 * same as JavaScript's for `args`, empty when there are none (as in records from before it).
 * `alsoSentText`: the fields the call carries beyond its arguments, as text, or `null`. */
export function toolCallAsk({ id, server = "demo", agent = "Claude Code", declared = null, endpoint = endpointStdio(),
  tool = "delete_ticket", title = null, description = null, annotations = null, args = {},
  argumentsText = args === null ? "" : JSON.stringify(args, null, 2), alsoSentText = null, deadlineMs = null, receivedAtMs,
  changed = [], serverChanged = false, preview = false, unlisted = false, sessionless = false, agentId } = {}) {
  nextId += 1;
  return {
    id: id ?? nextId,
    asker: { server, endpoint, agent, declared, ...(agentId === undefined ? {} : { agentId }) },
    request: { name: tool, arguments: args },
    receivedAtMs: receivedAtMs ?? Date.now() + nextId,
    deadlineMs,
    kind: "toolCall",
    tool,
    title,
    description,
    annotations,
    arguments: args,
    argumentsText,
    alsoSentText,
    changed,
    serverChanged,
    preview,
    unlisted,
    sessionless,
  };
}

/** A server's sampling request through the gateway: it wants the agent's model to reply. */
export function samplingAsk({ id, server = "research", agent = "Claude Code", declared = null, endpoint = endpointStdio(),
  messages = [{ role: "user", text: "Summarise the open tickets." }], systemPrompt = "You are a terse assistant.",
  maxTokens = 200, includeContext = "thisServer", tools = [], alsoSent = null, deadlineMs = null } = {}) {
  nextId += 1;
  return {
    id: id ?? nextId,
    asker: { server, endpoint, agent, declared },
    request: { messages: [], maxTokens },
    receivedAtMs: Date.now() + nextId,
    deadlineMs,
    kind: "sampling",
    messages,
    systemPrompt,
    maxTokens,
    includeContext,
    tools,
    alsoSent,
  };
}

/** The lines a snippet keeps `variable` = `token` in the private env file with (as core's
 * `token_env`). */
function tokenEnv(variable, token, stale = null) {
  const file = "~/.config/countersign/agent-env";
  const source = `[ -f ${file} ] && . ${file}`;
  return [
    `(umask 077; mkdir -p ~/.config/countersign && touch ${file} && chmod 600 ${file} && { grep -v -e '^export ${variable}='${stale ? ` -e '^export ${stale}='` : ""} ${file}; printf '%s\\n' 'export ${variable}=${token}'; } > ${file}.new && mv ${file}.new ${file})`,
    `grep -qxF '${source}' ~/.profile 2>/dev/null || printf '%s\\n' '${source}' >> ~/.profile`,
    `export ${variable}=${token}${stale ? `; unset ${stale}` : ""}`,
  ];
}

/** The choice "Always allow" sends: allow, always, any arguments. */
export const ALWAYS_ALLOW = { action: "remember", decision: { allow: true, lasting: { kind: "always" }, covering: { kind: "anyArguments" } } };

/** A remembered decision as Settings lists it (RememberedDecision). */
export function rememberedDecision(id, { agent = "a1", agentName = "Claude Code", server = "tickets", tool = "delete_ticket",
  allow = true, lasting = { kind: "always" }, covering = { kind: "anyArguments" }, session = null,
  createdMs = Date.UTC(2026, 0, 2, 9, 0, 0), lastUsedMs = null, uses = 0, inert = undefined } = {}) {
  return { id, agent, agentName, server, endpoint: "sha256:" + "e".repeat(64), tool, allow, lasting, covering, session,
    definition: { name: tool }, digest: "d".repeat(64), createdMs, lastUsedMs, uses, ...(inert ? { inert } : {}) };
}

/** What `gateway_info` returns for a running gateway over `servers`, with `agents` (AgentView). */
export function gatewayInfo({ servers = ["demo", "tickets"], paused = false, enabled = true, error = null,
  agents = [sharedAgent()], refusals = [] } = {}) {
  const url = "http://127.0.0.1:47717";
  return {
    enabled,
    listening: enabled && error === null && !paused,
    paused,
    error,
    url,
    tokenPath: "/home/me/.local/share/countersign/gateway-token",
    servers: servers.map((name) => ({ name, url: `${url}/mcp/${name}` })),
    agents,
    refusals,
  };
}

/** The built-in agent of the older shared token. */
export function sharedAgent({ lastUsedMs = null } = {}) {
  return { id: "shared", name: "Shared token (older setups)", createdMs: null, lastUsedMs, shared: true };
}

/** An agent with its own token, as `list_agents` lists it. */
export function agentView(id, name, { createdMs = Date.UTC(2026, 0, 1, 9, 30, 0), lastUsedMs = null } = {}) {
  return { id, name, createdMs, lastUsedMs, shared: false };
}

/** The snippets `create_agent` returns for `token` (as core's connect::client_setups). */
export function clientSetups(token, servers = ["demo", "tickets"]) {
  const at = (s) => `http://127.0.0.1:47717/mcp/${s}`;
  // As the backend maps a name the hosts cannot take (a sketch: every other character a dash).
  const renamed = servers.filter((s) => /[^A-Za-z0-9_-]/.test(s)).map((server) => ({ server, here: server.replace(/[^A-Za-z0-9_-]/g, "-") }));
  const note = "This token keeps other programs and web pages from using your servers through Countersign: whoever has it can act as this agent (your rules and approvals still apply), so keep it private.";
  return [
    { client: "claudeCode", title: "Claude Code", whereTo: "Run in a terminal (user scope: every project; pasting it again replaces the entries)",
      format: "shell", note, renamed,
      snippet: servers.map((s) => `claude mcp remove --scope user ${s} 2>/dev/null; claude mcp add --scope user --transport http ${s} ${at(s)} --header 'Authorization: Bearer ${token}'`).join("\n") },
    { client: "claudeDesktop", title: "Claude Desktop", whereTo: "claude_desktop_config.json, merged into \"mcpServers\" (uses countersign-bridge, which sends the token)",
      format: "json", note, renamed,
      snippet: JSON.stringify({ mcpServers: Object.fromEntries(servers.map((s) => [s, { command: "countersign-bridge", args: [s], env: { COUNTERSIGN_TOKEN: token } }])) }, null, 2) },
    { client: "cursor", title: "Cursor", whereTo: "~/.cursor/mcp.json (or .cursor/mcp.json in a project), merged into \"mcpServers\"",
      format: "json", note, renamed,
      snippet: JSON.stringify({ mcpServers: Object.fromEntries(servers.map((s) => [s, { url: at(s), headers: { Authorization: `Bearer ${token}` } }])) }, null, 2) },
    { client: "gemini", title: "Gemini CLI", whereTo: "Run in a terminal (user scope: ~/.gemini/settings.json, every project; pasting it again replaces the entries)",
      format: "shell", renamed, note: `${note} The token goes into ~/.config/countersign/agent-env (readable only by you), which your ~/.profile sources, as COUNTERSIGN_TOKEN_GEMINI; Gemini CLI's settings name only the variable. --scope user on purpose: the default (project) scope writes into the project's .gemini/settings.json, a file that gets committed. Start Gemini CLI from a shell that has the variable (a new login, or this terminal).`,
      snippet: [
        ...tokenEnv("COUNTERSIGN_TOKEN_GEMINI", token),
        ...servers.map((s) => `gemini mcp add --scope user --transport http ${s} ${at(s)} --header 'Authorization: Bearer \${COUNTERSIGN_TOKEN_GEMINI}'`),
      ].join("\n") },
    { client: "codex", title: "Codex", whereTo: "Run in a terminal (~/.codex/config.toml, every project; pasting it again replaces the entries)",
      format: "shell", renamed, note: `${note} The token goes into ~/.config/countersign/agent-env (readable only by you), which your ~/.profile sources, as COUNTERSIGN_TOKEN_CODEX; Codex's config names only the variable, so the token is not in Codex's config file. Start Codex from a shell that has it (a new login, or this terminal).`,
      snippet: [
        ...tokenEnv("COUNTERSIGN_TOKEN_CODEX", token, "COUNTERSIGN_TOKEN"),
        ...servers.map((s) => `codex mcp remove ${s} >/dev/null 2>&1; codex mcp add ${s} --url ${at(s)} --bearer-token-env-var COUNTERSIGN_TOKEN_CODEX`),
      ].join("\n") },
  ];
}

const AGENT_FILES = {
  claudeDesktop: ["Claude Desktop", "~/.config/Claude/claude_desktop_config.json"],
  claudeCode: ["Claude Code", "~/.claude.json"],
  cursor: ["Cursor", "~/.cursor/mcp.json"],
  vscode: ["VS Code", "~/.config/Code/User/mcp.json"],
  gemini: ["Gemini CLI", "~/.gemini/settings.json"],
  codex: ["Codex", "~/.codex/config.toml"],
};

/** What `agent_configs` returns: the six hosts' files (as core's `ClientKind::ALL`), `found`
 * those that exist, `checks` the hosts whose tool is installed (client -> its check command). */
export function agentConfigs({ found = ["cursor", "vscode"], checks = {}, rewrites = [], rewritesError = null } = {}) {
  return {
    configPath: "~/.config/countersign/config.json",
    files: Object.entries(AGENT_FILES).map(([client, [title, path]]) =>
      ({ client, title, path, found: found.includes(client), check: checks[client] ?? null })),
    rewrites,
    rewritesError,
  };
}

/** A recorded rewrite, as `agent_configs` lists it. */
export function rewriteView({ id = "cursor-1", client = "cursor", changedSince = false, backupFound = true,
  atMs = Date.UTC(2026, 0, 1, 9, 30, 0) } = {}) {
  const [title, path] = AGENT_FILES[client];
  return { id, client, title, path, backupPath: `${path}.countersign-backup-${atMs}`, atMs, changedSince, backupFound };
}

let nextPlan = 1;

/** `preview_import` for `client` with `candidates` ([name, status, transport, importAs?, note?, warnings?, project?]). */
export function importPreview(client, candidates, { notes = [] } = {}) {
  const [title, path] = AGENT_FILES[client];
  nextPlan += 1;
  return {
    plan: nextPlan,
    client,
    title,
    path,
    configPath: "~/.config/countersign/config.json",
    candidates: candidates.map(([name, status, transport, importAs, note, warnings, project = null]) => ({
      key: project === null ? name : `${name}@${project}`,
      name,
      project,
      importAs: importAs !== undefined ? importAs : (status === "new" ? name : null),
      transport,
      status,
      note: note ?? null,
      warnings: warnings ?? [],
    })),
    notes,
  };
}

/** `preview_rewrite` for `client`: `changes` ([name, server, from, to, note?]), `kept` ([name, reason]). */
export function rewritePreview(client, { changes = [], kept = [], warnings = [], newText = "{}\n" } = {}) {
  const [title, path] = AGENT_FILES[client];
  nextPlan += 1;
  return {
    plan: changes.length > 0 ? nextPlan : null,
    client,
    title,
    path,
    backupPath: `${path}.countersign-backup-1767225600000`,
    newText,
    changes: changes.map(([name, server, from, to, note]) => ({ name, server, from, to, note: note ?? null })),
    kept: kept.map(([name, reason]) => ({ name, reason })),
    warnings,
  };
}

function base(name, o) {
  return {
    name,
    title: o.title ?? null,
    description: o.description ?? null,
    required: !!o.required,
    secret: !!o.secret,
    default: o.default ?? null,
  };
}

export const field = {
  text: (name, o = {}) => ({ ...base(name, o), kind: "text", minLength: o.minLength ?? null,
    maxLength: o.maxLength ?? null, format: o.format ?? null }),
  number: (name, o = {}) => ({ ...base(name, o), kind: "number", integer: !!o.integer,
    minimum: o.minimum ?? null, maximum: o.maximum ?? null }),
  boolean: (name, o = {}) => ({ ...base(name, o), kind: "boolean" }),
  /** options: values, or [value, label] pairs. */
  single: (name, options, o = {}) => ({ ...base(name, o), kind: "singleSelect", options: choices(options) }),
  multi: (name, options, o = {}) => ({ ...base(name, o), kind: "multiSelect", options: choices(options),
    minItems: o.minItems ?? null, maxItems: o.maxItems ?? null }),
};

function choices(options) {
  return options.map((o) => (Array.isArray(o) ? { value: o[0], label: o[1] } : { value: o, label: null }));
}

export function server(name, state = { state: "ready", protocolVersion: "2025-11-25", serverName: name, serverVersion: "1.0.0" }, o = {}) {
  return {
    name,
    endpoint: o.endpoint ?? endpointStdio(`${name}-server`),
    trusted: !!o.trusted,
    state,
    stateRevision: o.stateRevision ?? 1,
    muted: !!o.muted,
    signIn: o.signIn ?? null,
  };
}

function hostOf(url) {
  try {
    return new URL(url).host;
  } catch {
    return "";
  }
}
