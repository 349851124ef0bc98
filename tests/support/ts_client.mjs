// Real MCP clients from npm against mcpgraph, for tests/serve/real_clients.rs and
// tests/network/real_clients.rs: the official TypeScript SDK 1.x (`@modelcontextprotocol/sdk`,
// protocol 2025-11-25 and older) and its v2 client (`@modelcontextprotocol/client`, either era),
// both pinned in tests/support/package.json. Prints one JSON report on stdout describing what the
// client saw, in the order it saw it; the Rust tests assert on it.
//
//   node ts_client.mjs CLIENT call TOOL ARGS_JSON [TOOL ARGS_JSON ...] [--answer RESULT_JSON] TARGET
//       Lists the tools (so the client knows each tool's outputSchema and validates results
//       against it: v2 a success's, 1.x an error's too), then calls each TOOL in turn with a
//       progress callback. Each call has
//       `events`, what the application saw in the order it saw it: the progress callbacks, the
//       questions it was asked, and last the result or the error the client raised; and `wire`,
//       what the transport handed the SDK meanwhile, in arrival order (progress notifications,
//       the server's requests, responses, and anything that came before the next call). The two
//       differ where the SDK drops what it received (see tests/serve/real_clients.rs). With --answer, the
//       client declares the elicitation capability and answers every question with RESULT_JSON
//       ({"action": "accept", "content": {...}}).
//   node ts_client.mjs CLIENT cancel TOOL ARGS_JSON MOCK_LOG TARGET
//       Calls TOOL and aborts the call (an AbortSignal, as an application cancels) once the
//       shared mock server has logged a downstream `tools/call` in MOCK_LOG; then, with the
//       connection still open, waits up to 5 s for the mock to log `notifications/cancelled`.
//
//   CLIENT: sdk1 (SDK 1.x) | v2-legacy (v2, the 2025 handshake) | v2-modern (v2, pinned to
//           2026-07-28)
//   TARGET: --url URL (streamable HTTP; $MCPGRAPH_TEST_TOKEN, when set, is sent as a bearer
//           token) | -- COMMAND [ARG ...] (stdio; the command gets this process's environment
//           and working directory)
//
// A failure to connect exits 1 with the reason on stderr; an error from a call is reported.
// Every wait has a deadline ($MCPGRAPH_TEST_DEADLINE seconds, default 15), so a server that
// never answers fails the test instead of hanging it.
import { readFileSync } from "node:fs";

const DEADLINE_MS = 1000 * Number(process.env.MCPGRAPH_TEST_DEADLINE ?? "15");
/** How long a cancellation may take to reach the downstream server. */
const CANCEL_REACH_MS = 5000;
const CLIENTS = ["sdk1", "v2-legacy", "v2-modern"];

function usage(message) {
  console.error(`ts_client.mjs: ${message}\nusage: node ts_client.mjs CLIENT (call TOOL ARGS_JSON ... [--answer RESULT_JSON] | cancel TOOL ARGS_JSON MOCK_LOG) (--url URL | -- COMMAND [ARG ...])`);
  process.exit(2);
}

function parseJson(text, what) {
  try {
    return JSON.parse(text);
  } catch (error) {
    usage(`${what} is not JSON (${error.message}): ${text}`);
  }
}

/** The command line split into the client, the scenario, its words, --answer and the target. */
function parseArgs(argv) {
  const [client, scenario, ...rest] = argv;
  if (!CLIENTS.includes(client)) usage(`CLIENT must be one of ${CLIENTS.join(", ")}, not ${client}`);
  const words = [];
  let answer;
  let target;
  for (let i = 0; i < rest.length; i++) {
    if (rest[i] === "--answer") {
      answer = parseJson(rest[++i], "--answer");
    } else if (rest[i] === "--url") {
      target = { url: rest[++i] };
    } else if (rest[i] === "--") {
      const [command, ...args] = rest.slice(i + 1);
      if (!command) usage("-- needs a command");
      target = { command, args };
      break;
    } else {
      words.push(rest[i]);
    }
  }
  if (!target?.url && !target?.command) usage("no target: give --url URL or -- COMMAND [ARG ...]");
  return { client, scenario, words, answer, target };
}

/** This process's environment, which a stdio server gets whole (the SDKs pass a safe subset). */
function environment() {
  return Object.fromEntries(Object.entries(process.env).filter(([, value]) => value !== undefined));
}

/** The SDK `client` names, loaded alone: each run pays for one SDK's modules, not both. */
async function loadSdk(client) {
  if (client === "sdk1") {
    const [{ Client }, { StdioClientTransport }, { StreamableHTTPClientTransport }, { ElicitRequestSchema }] = await Promise.all([
      import("@modelcontextprotocol/sdk/client/index.js"),
      import("@modelcontextprotocol/sdk/client/stdio.js"),
      import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
      import("@modelcontextprotocol/sdk/types.js"),
    ]);
    return { Client, StdioClientTransport, StreamableHTTPClientTransport, elicitation: ElicitRequestSchema };
  }
  const [{ Client, StreamableHTTPClientTransport }, { StdioClientTransport }] = await Promise.all([
    import("@modelcontextprotocol/client"),
    import("@modelcontextprotocol/client/stdio"),
  ]);
  // v2 names the request by its method, 1.x by its zod schema.
  return { Client, StdioClientTransport, StreamableHTTPClientTransport, elicitation: "elicitation/create" };
}

function makeTransport(sdk, target) {
  if (target.url) {
    const token = process.env.MCPGRAPH_TEST_TOKEN;
    const options = token === undefined ? undefined : { requestInit: { headers: { Authorization: `Bearer ${token}` } } };
    return new sdk.StreamableHTTPClientTransport(new URL(target.url), options);
  }
  return new sdk.StdioClientTransport({ command: target.command, args: target.args, env: environment(), stderr: "inherit" });
}

/**
 * Watches what the transport hands the SDK, in arrival order: the protocol version the server
 * answered `initialize` with (the 1.x SDK keeps it to itself over stdio), and while a call runs,
 * its progress notifications, the server's requests and the responses. The SDKs set `onmessage`
 * when they connect; this wraps it.
 */
function tap(transport, seen) {
  let inner;
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    get: () => inner,
    set: (handler) => {
      inner = handler && ((message, extra) => {
        if (typeof message?.result?.protocolVersion === "string") seen.protocol = message.result.protocolVersion;
        if (seen.wire) {
          if (message.method === "notifications/progress") {
            seen.wire.push({ progress: message.params?.progress ?? null, message: message.params?.message ?? null });
          } else if (message.method !== undefined && message.id !== undefined) {
            seen.wire.push({ request: message.method });
          } else if (message.method === undefined) {
            seen.wire.push({ response: message.id ?? null, error: message.error !== undefined });
          }
        }
        return handler(message, extra);
      });
    },
  });
}

/** A connected client; `onQuestion` answers elicitation requests when `answer` is given. */
async function connect(client, target, answer, onQuestion) {
  const loaded = await loadSdk(client);
  const info = { name: "mcpgraph-tests", version: "1" };
  const capabilities = answer === undefined ? {} : { elicitation: {} };
  const options = client === "sdk1"
    ? { capabilities }
    : { capabilities, versionNegotiation: { mode: client === "v2-modern" ? { pin: "2026-07-28" } : "legacy" } };
  const sdk = new loaded.Client(info, options);
  if (answer !== undefined) {
    sdk.setRequestHandler(loaded.elicitation, async (request) => {
      onQuestion(request.params.message);
      return answer;
    });
  }
  const transport = makeTransport(loaded, target);
  const seen = {};
  tap(transport, seen);
  await sdk.connect(transport, { timeout: DEADLINE_MS });
  const report = {
    client,
    protocol: client === "sdk1" ? seen.protocol ?? null : sdk.getNegotiatedProtocolVersion() ?? null,
    era: client === "sdk1" ? "legacy" : sdk.getProtocolEra() ?? null,
    server: sdk.getServerVersion()?.name ?? null,
    session: transport.sessionId ?? null,
  };
  return { sdk, seen, report };
}

/** What a client raised, as data: its JSON-RPC code (a number) or SDK code (a string). */
function describeError(error) {
  return {
    code: error?.code ?? null,
    name: error?.name ?? null,
    message: String(error?.message ?? error),
  };
}

/** Calls `name` through the SDK's own callTool (which validates the result against the tool's
 * outputSchema), with a progress callback; `signal` cancels it. */
function callTool(client, sdk, name, args, events, signal) {
  const options = {
    timeout: DEADLINE_MS,
    signal,
    onprogress: (p) => events.push({ progress: p.progress, total: p.total ?? null, message: p.message ?? null }),
  };
  const params = { name, arguments: args };
  return client === "sdk1" ? sdk.callTool(params, undefined, options) : sdk.callTool(params, options);
}

async function runCalls(client, words, answer, target) {
  if (words.length === 0 || words.length % 2 !== 0) usage("call takes TOOL ARGS_JSON pairs");
  const calls = [];
  let events = [];
  const { sdk, seen, report } = await connect(client, target, answer, (message) => events.push({ elicitation: message }));
  const tools = await sdk.listTools(undefined, { timeout: DEADLINE_MS });
  report.tools = tools.tools.map((t) => t.name);
  for (let i = 0; i < words.length; i += 2) {
    events = [];
    const wire = [];
    seen.wire = wire;
    try {
      const result = await callTool(client, sdk, words[i], parseJson(words[i + 1], "ARGS_JSON"), events);
      const text = result.content?.find((c) => c.type === "text")?.text ?? null;
      events.push({ result: result.structuredContent ?? null, isError: result.isError === true, text });
    } catch (error) {
      events.push({ error: describeError(error) });
    }
    calls.push({ events, wire });
  }
  report.calls = calls;
  await sdk.close();
  return report;
}

/** The JSON lines of the mock server's log so far. */
function mockLog(path) {
  let text;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return [];
  }
  return text.split("\n").flatMap((line) => {
    try {
      return line.trim() ? [JSON.parse(line)] : [];
    } catch {
      return [];
    }
  });
}

/** Resolves once `ready()` is true, polling; false when `ms` pass first. */
async function waitFor(ready, ms) {
  const until = Date.now() + ms;
  while (!ready()) {
    if (Date.now() >= until) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}

async function runCancel(client, words, target) {
  const [name, argsJson, log] = words;
  if (log === undefined || words.length !== 3) usage("cancel takes TOOL ARGS_JSON MOCK_LOG");
  const { sdk, report } = await connect(client, target, undefined, () => {});
  await sdk.listTools(undefined, { timeout: DEADLINE_MS });
  const abort = new AbortController();
  const started = Date.now();
  const outcome = { finished: false };
  const call = callTool(client, sdk, name, parseJson(argsJson, "ARGS_JSON"), [], abort.signal).then(
    (result) => Object.assign(outcome, { finished: true, result: result.structuredContent ?? null }),
    (error) => Object.assign(outcome, { error: describeError(error) }),
  );
  // Cancel once the downstream call is under way, so there is a run to stop.
  const underWay = await waitFor(() => mockLog(log).some((m) => m.method === "tools/call"), DEADLINE_MS);
  if (!underWay) {
    console.error(`ts_client.mjs: the mock server logged no tools/call in ${log} within ${DEADLINE_MS} ms`);
    process.exit(1);
  }
  abort.abort("cancelled by the test");
  await call;
  outcome.seconds = (Date.now() - started) / 1000;
  // The connection stays open meanwhile: closing it would stop the run another way.
  outcome.downstreamTold = await waitFor(
    () => mockLog(log).some((m) => m.method === "notifications/cancelled"),
    CANCEL_REACH_MS,
  );
  report.cancel = outcome;
  await sdk.close();
  return report;
}

async function main() {
  const { client, scenario, words, answer, target } = parseArgs(process.argv.slice(2));
  const watchdog = setTimeout(() => {
    console.error(`ts_client.mjs: not done within ${2 * DEADLINE_MS} ms`);
    process.exit(1);
  }, 2 * DEADLINE_MS);
  watchdog.unref();
  let report;
  if (scenario === "call") report = await runCalls(client, words, answer, target);
  else if (scenario === "cancel") report = await runCancel(client, words, target);
  else usage(`unknown scenario ${scenario}`);
  process.stdout.write(`${JSON.stringify(report)}\n`);
  // A stdio server's pipes or an HTTP keep-alive socket can outlive close(); the report is out.
  process.exit(0);
}

main().catch((error) => {
  console.error(`ts_client.mjs: ${error?.stack ?? error}`);
  process.exit(1);
});
