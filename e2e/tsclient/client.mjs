// client.mjs drives an MCP server over Streamable HTTP with the official
// TypeScript SDK client, so the Go e2e suite can check that a peer it did not
// write interoperates with the hub.
//
// Usage: node e2e/tsclient/client.mjs URL TOKEN < script.json
//
// The script on stdin is {"calls": [{"name": "...", "arguments": {...}}, ...]}
// and may set "timeoutMs" (per request; the SDK's default is 60s). An empty
// stdin means no calls. A step {"signal": PATH} creates the file PATH and a
// step {"waitFor": PATH} waits until it exists, so a test can act between
// two calls of one session (kill a node behind a balancer); each answers {}
// among the results. An empty TOKEN sends no Authorization header, which
// lets tests probe unauthenticated access.
//
// stdout carries exactly one JSON object:
//   {"protocolVersion", "serverInfo", "capabilities", "instructions",
//    "tools": [...], "results": [...], "sessionIds": [...], "sessionEnded"}
// where sessionIds holds the transport's Mcp-Session-Id after connecting and
// after each step (null for a session-less server), sessionEnded says
// whether the closing DELETE was answered within 5 s, each result is the
// CallToolResult as the server sent it, or
// {"error": msg, "code": n, "kind": "http"|"jsonrpc"|"other"} when the call
// threw. If tools/list throws, "toolsError" holds the same error shape and the
// calls are still made. Exit status is 0 unless connecting (initialize)
// failed; then stdout is {"connectError": msg, "status": httpStatus} and the
// exit status is 2. Exit status 1 means the script itself was unusable.
// Diagnostics (ours, the SDK's and Node's) go to stderr only.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { existsSync, writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

// Anything that logs through console.log would corrupt the single JSON
// object on stdout, so route the console to stderr.
for (const level of ["log", "info", "debug"]) {
  console[level] = (...args) => console.error(...args);
}

// deleteTimeoutMs bounds the DELETE that ends the session.
const deleteTimeoutMs = 5000;

function emit(obj, code) {
  process.stdout.write(JSON.stringify(obj) + "\n", () => process.exit(code));
}

function describeError(err) {
  let message = err instanceof Error ? err.message : String(err);
  // undici reports refused connections as "fetch failed" with the reason in
  // err.cause; keep the reason, tests need to tell "down" from "refused us".
  if (err?.cause?.message && !message.includes(err.cause.message)) {
    message += `: ${err.cause.message}`;
  }
  const out = { error: message };
  if (err instanceof StreamableHTTPError) {
    // -1 is the SDK's marker for "not an HTTP status" (e.g. bad content type).
    if (typeof err.code === "number" && err.code > 0) out.code = err.code;
    out.kind = "http";
  } else if (err instanceof McpError) {
    out.code = err.code;
    out.kind = "jsonrpc";
  } else {
    out.kind = "other";
  }
  return out;
}

async function readStdin() {
  if (process.stdin.isTTY) return "";
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

async function main() {
  const [url, token = ""] = process.argv.slice(2);
  if (!url) {
    console.error("usage: node client.mjs URL TOKEN < script.json");
    process.exit(1);
  }

  let script;
  try {
    const text = (await readStdin()).trim();
    script = text === "" ? {} : JSON.parse(text);
  } catch (err) {
    console.error(`client.mjs: stdin is not a JSON script: ${err.message}`);
    process.exit(1);
  }
  const calls = Array.isArray(script.calls) ? script.calls : [];
  const reqOpts = script.timeoutMs ? { timeout: script.timeoutMs } : undefined;

  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers },
  });
  const client = new Client({ name: "crewlet-e2e-tsclient", version: "0.0.0" });
  let closing = false;
  client.onerror = (err) => {
    // Closing aborts the standalone SSE stream; that is expected, not news.
    if (closing) return;
    console.error(`client.mjs: transport: ${err?.message ?? err}`);
  };

  try {
    await client.connect(transport, reqOpts);
  } catch (err) {
    const d = describeError(err);
    const out = { connectError: d.error };
    if (d.kind === "http" && d.code !== undefined) out.status = d.code;
    if (d.kind === "jsonrpc") out.code = d.code;
    closing = true;
    await client.close().catch(() => {});
    emit(out, 2);
    return;
  }

  const out = {
    protocolVersion: transport.protocolVersion ?? null,
    serverInfo: client.getServerVersion() ?? null,
    capabilities: client.getServerCapabilities() ?? null,
    instructions: client.getInstructions() ?? null,
    tools: [],
    results: [],
    sessionIds: [transport.sessionId ?? null],
  };

  try {
    // Follow pagination so callers always see the whole tool set.
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : undefined, reqOpts);
      out.tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
  } catch (err) {
    out.toolsError = describeError(err);
  }

  for (const call of calls) {
    if (call.signal || call.waitFor) {
      if (call.signal) writeFileSync(call.signal, "");
      while (call.waitFor && !existsSync(call.waitFor)) await sleep(20);
      out.results.push({});
      out.sessionIds.push(transport.sessionId ?? null);
      continue;
    }
    // Each call's start and end on stderr, timed: what a test that timed
    // out reads to see which call it waited on.
    console.error(`${new Date().toISOString()} calling ${call.name}`);
    try {
      out.results.push(
        await client.callTool(
          { name: call.name, arguments: call.arguments ?? {} },
          undefined,
          reqOpts,
        ),
      );
    } catch (err) {
      out.results.push(describeError(err));
    }
    console.error(`${new Date().toISOString()} ended ${call.name}`);
    out.sessionIds.push(transport.sessionId ?? null);
  }

  closing = true;
  // Ending the session politely lets servers that track sessions free them;
  // stateless servers may refuse DELETE, which does not matter here.
  // The DELETE is bounded, as go-sdk's client bounds its own: a server that
  // never answers it must not keep the client from exiting. Whether it was
  // answered is in "sessionEnded"; closing aborts one still waiting.
  console.error(`${new Date().toISOString()} ending the session`);
  out.sessionEnded = await Promise.race([
    transport.terminateSession().then(() => true, () => false),
    sleep(deleteTimeoutMs).then(() => false),
  ]);
  console.error(`${new Date().toISOString()} closing`);
  await client.close().catch(() => {});
  emit(out, 0);
}

main().catch((err) => {
  console.error(`client.mjs: ${err?.stack ?? err}`);
  process.exit(1);
});
