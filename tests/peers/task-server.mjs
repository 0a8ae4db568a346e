#!/usr/bin/env node
// An MCP server written without any SDK, over stdio, with one tool that must run as a task
// (2025-11-25 tasks): `slow_report` {topic} is created as a task, reports a status, asks the
// client a question related to the task (`elicitation/create`), and completes with
// "report on TOPIC for ANSWER" once answered (TOPIC followed by any fields the call carries
// beyond its own, "(also sent: {...})"); called without `task` it is an error. It logs
// every request it receives to stderr (`task-server: got METHOD PARAMS`), so a test can see
// `tasks/cancel` arrive. A call with a progress token hears the task's progress under it, as
// 2025-11-25 has it, until the task ends; then one stray progress after the end (which a
// client must not be handed) and a log line, so a test can tell the stray one was dropped.

import { createInterface } from 'node:readline';

const out = (m) => process.stdout.write(JSON.stringify(m) + '\n');
const log = (...parts) => process.stderr.write(`task-server: ${parts.join(' ')}\n`);
const RELATED = 'io.modelcontextprotocol/related-task';

const tasks = new Map(); // taskId -> { task, result, waiting: [request ids of tasks/result] }
let next = 0;
// With TASK_SERVER_SEED set, a finished task someone else started is there from the start, as
// on an HTTP server every session of one sign-in shares; `tasks/list` lists every task.
if (process.env.TASK_SERVER_SEED) {
  const task = { taskId: 'someone-elses', status: 'completed', statusMessage: 'Done', createdAt: new Date().toISOString(), lastUpdatedAt: new Date().toISOString(), ttl: 60000 };
  tasks.set(task.taskId, { task, result: { content: [{ type: 'text', text: "someone else's report" }] }, waiting: [], topic: 'secret' });
}

const now = () => new Date().toISOString();
function progress(entry, progress, message) {
  if (entry.progressToken === undefined) return;
  out({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: entry.progressToken, progress, total: 3, message } });
}
function setStatus(entry, status, statusMessage) {
  Object.assign(entry.task, { status, statusMessage, lastUpdatedAt: now() });
}
function finish(entry, result) {
  entry.result = result;
  const waiting = entry.waiting.splice(0);
  for (const id of waiting) answerResult(id, entry);
  if (waiting.length > 0) afterTheEnd(entry);
}
function afterTheEnd(entry) {
  if (entry.progressToken === undefined) return;
  setTimeout(() => {
    progress(entry, 4, 'after the end');
    out({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: `${entry.task.taskId} is over` } });
  }, 100);
}
function answerResult(id, entry) {
  if (entry.task.status === 'cancelled') {
    out({ jsonrpc: '2.0', id, error: { code: -32603, message: 'the task was cancelled' } });
  } else {
    out({ jsonrpc: '2.0', id, result: { ...entry.result, _meta: { [RELATED]: { taskId: entry.task.taskId } } } });
  }
}

function startTask(m) {
  next += 1;
  const taskId = `task-${next}`;
  const task = { taskId, status: 'working', statusMessage: 'Gathering sources', createdAt: now(), lastUpdatedAt: now(), ttl: m.params.task.ttl ?? 60000, pollInterval: 250 };
  // Fields beyond the call's own are named in the report, so a test sees they arrived.
  const { name, arguments: _args, task: _task, _meta, ...extra } = m.params;
  const also = Object.keys(extra).length > 0 ? ` (also sent: ${JSON.stringify(extra)})` : '';
  const entry = { task, result: null, waiting: [], topic: m.params.arguments?.topic ?? '?', also, progressToken: m.params._meta?.progressToken };
  tasks.set(taskId, entry);
  out({ jsonrpc: '2.0', id: m.id, result: { task } });
  progress(entry, 1, 'Gathering sources');
  setTimeout(() => {
    if (entry.task.status !== 'working') return;
    setStatus(entry, 'input_required', 'Which audience?');
    out({ jsonrpc: '2.0', id: `q-${taskId}`, method: 'elicitation/create', params: {
      message: `Who is the report on ${entry.topic} for?`,
      requestedSchema: { type: 'object', properties: { audience: { type: 'string', title: 'Audience' } }, required: ['audience'] },
      _meta: { [RELATED]: { taskId } },
    } });
  }, 300);
}

function answered(m) {
  const taskId = String(m.id).slice(2);
  const entry = tasks.get(taskId);
  if (!entry || entry.task.status === 'cancelled') return;
  const audience = m.result?.action === 'accept' ? m.result.content?.audience : `nobody (${m.result?.action ?? 'error'})`;
  setStatus(entry, 'working', 'Writing the report');
  progress(entry, 2, 'Writing the report');
  setTimeout(() => {
    if (entry.task.status === 'cancelled') return;
    setStatus(entry, 'completed', 'Done');
    progress(entry, 3, 'Done');
    finish(entry, { content: [{ type: 'text', text: `report on ${entry.topic}${entry.also} for ${audience}` }] });
  }, 300);
}

createInterface({ input: process.stdin }).on('line', (line) => {
  let m;
  try { m = JSON.parse(line); } catch { return; }
  if (m.method) log('got', m.method, JSON.stringify(m.params ?? {}));
  if (m.method === undefined && typeof m.id === 'string' && m.id.startsWith('q-')) return answered(m);
  if (m.id === undefined || m.method === undefined) return;
  const reply = (result) => out({ jsonrpc: '2.0', id: m.id, result });
  const fail = (code, message) => out({ jsonrpc: '2.0', id: m.id, error: { code, message } });
  const entry = tasks.get(m.params?.taskId);
  switch (m.method) {
    case 'initialize':
      return reply({
        protocolVersion: '2025-11-25',
        capabilities: { tools: {}, logging: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
        serverInfo: { name: 'task-server', version: '1.0.0' },
      });
    case 'ping':
    case 'logging/setLevel':
      return reply({});
    case 'tools/list':
      return reply({ tools: [{
        name: 'slow_report', description: 'Writes a report, as a task', execution: { taskSupport: 'required' },
        inputSchema: { type: 'object', properties: { topic: { type: 'string' } } },
      }] });
    case 'tools/call':
      if (m.params?.name !== 'slow_report') return fail(-32602, 'unknown tool');
      if (!m.params.task) return fail(-32601, 'slow_report requires task augmentation (taskSupport: required)');
      return startTask(m);
    case 'tasks/get':
      return entry ? reply(entry.task) : fail(-32602, 'unknown task');
    case 'tasks/result':
      if (!entry) return fail(-32602, 'unknown task');
      if (entry.result || entry.task.status === 'cancelled') {
        answerResult(m.id, entry);
        return afterTheEnd(entry);
      }
      entry.waiting.push(m.id);
      return;
    case 'tasks/list':
      return reply({ tasks: [...tasks.values()].map((e) => e.task) });
    case 'tasks/cancel':
      if (!entry) return fail(-32602, 'unknown task');
      setStatus(entry, 'cancelled', 'Cancelled by the client');
      reply(entry.task);
      return finish(entry, null);
    default:
      return fail(-32601, `no method ${m.method}`);
  }
});
