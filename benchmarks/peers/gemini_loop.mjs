// Gemini CLI's LoopDetectionService (@google/gemini-cli-core), unmodified, over runs exported by
// run_peers.py.  Reads the neutral event stream on stdin (one JSON object a line) and writes
// {"session", "line"} for every event on which addAndCheck() reports a loop.
//
// The adapter: a tool call is a ToolCallRequest event ({name, args}), an assistant message a Content
// event (its whole text, as a stream would deliver it), a user message starts a new prompt (reset), as
// the CLI does on each user turn.  After a detection the service is cleared for a recovery turn
// (clearDetection(), as the CLI does), so a later loop can be reported too.  The LLM-based check
// (turnStarted after 30 turns) needs a model and is not run.
import { createInterface } from 'node:readline';
import { LoopDetectionService } from '@google/gemini-cli-core/dist/src/services/loopDetectionService.js';
import { GeminiEventType } from '@google/gemini-cli-core/dist/src/core/turn.js';

// The config the service and its telemetry read: loop detection on, telemetry off.
const config = new Proxy({}, {
  get(_target, name) {
    if (name === 'getDisableLoopDetection') return () => false;
    if (name === 'getUsageStatisticsEnabled' || name === 'getTelemetryEnabled') return () => false;
    if (name === 'getDebugMode') return () => false;
    if (name === 'getSessionId') return () => 'peers';
    if (name === 'then') return undefined;
    return () => undefined;
  },
});

const services = new Map();
function serviceFor(session) {
  let entry = services.get(session);
  if (!entry) {
    entry = { service: new LoopDetectionService({ config }), prompts: 0 };
    entry.service.reset(`${session}#0`, '');
    services.set(session, entry);
  }
  return entry;
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const raw of lines) {
  if (!raw.trim()) continue;
  const record = JSON.parse(raw);
  const entry = serviceFor(record.session);
  let event = null;
  if (record.kind === 'tool_call') {
    event = { type: GeminiEventType.ToolCallRequest, value: { name: record.tool, args: record.args ?? {} } };
  } else if (record.kind === 'message' && record.role === 'assistant' && record.text) {
    event = { type: GeminiEventType.Content, value: record.text };
  } else if (record.kind === 'message' && record.role === 'user' && record.prompt) {
    entry.prompts += 1;
    entry.service.reset(`${record.session}#${entry.prompts}`, record.text ?? '');
  }
  if (event === null) continue;
  const result = entry.service.addAndCheck(event);
  if (result.count > 0) {
    process.stdout.write(JSON.stringify({ session: record.session, line: record.line }) + '\n');
    entry.service.clearDetection();
  }
}
