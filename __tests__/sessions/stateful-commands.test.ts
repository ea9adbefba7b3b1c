/**
 * @agent-infra/mcp-server-commands, a shell-running stdio server built on an older SDK (~1.15, zod v3 schemas): one
 * child per (server, user, thread) pinned to the thread workspace (SPEC §5.1). What the model sees of the files its
 * commands write, of `pwd`/`$TMPDIR`, of a per-request secret a command echoes, of a child killed mid-call and of a
 * call past tool_call_timeout.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { readdirSync, readFileSync } from "node:fs";
import { readFile, realpath } from "node:fs/promises";
import * as path from "node:path";
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { createAgent } from "langchain";
import { z } from "zod";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { ScriptedChatModel } from "../../lib/agent";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, cleanErrorLine, seenByModel, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { alive, waitUntil } from "../fixtures/processes";

// Its package exports only the library (dist/server.cjs); the bin is dist/index.cjs beside it.
const SERVER = path.join(path.dirname(require.resolve("@agent-infra/mcp-server-commands")), "index.cjs");
const W = "/mnt/user-data/workspace";
/** The server's command line takes no extra argument: its processes are told apart by an env marker instead. */
const MARKER = `commands-marker-${process.pid}-${Date.now()}`;
const SECRET = "cmd-S3cr3t/t0k+en=";
/** A second per-request secret, one a file name can hold as it is. */
const NAME_SECRET = "f1le-K3y_x9";

const logger = new RecordingLogger();
let dataDir: string;
let toolkit: McpToolkit;
let tools: DynamicStructuredTool[];
let graph: ToolNodeGraph;

/** Live processes whose environment holds `CMD_MARKER=<MARKER>`: the servers and whatever they started. */
function markedPids(): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, "utf8").split("\0").includes(`CMD_MARKER=${MARKER}`)) found.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}
const workspaceOf = (thread: string) => path.join(dataDir, "threads", thread, "user-data", "workspace");
/** The server process (node) of `thread`: its cwd is the thread workspace; its command line names the server. */
function serverOf(thread: string): number[] {
  return markedPids().filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(SERVER) && readFileSync(`/proc/${pid}/environ`, "utf8").includes(`TMPDIR=${path.join(workspaceOf(thread), ".mcp", "tmp")}\0`);
    } catch {
      return false;
    }
  });
}

beforeAll(async () => {
  dataDir = await realpath(await makeTempDir("mcp-commands-data-"));
  const configPath = await writeConfig(await makeTempDir("mcp-commands-"), {
    mcpServers: {
      cmd: {
        type: "stdio",
        command: process.execPath,
        args: [SERVER],
        env: { CMD_MARKER: MARKER },
        // Per-request credentials are for HTTP/SSE (SPEC §4.3): ignored on stdio, with a warning. The run's
        // context.secrets are still scrubbed from whatever the call hands back.
        headers_from_context: { headers: { "X-Api-Key": "api_key" } },
        tool_call_timeout: 2,
      },
    },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger, dataDir });
  tools = await toolkit.getTools();
  graph = toolNodeGraph(tools);
});
afterAll(async () => {
  await toolkit.close();
});

const run = (command: string, user = "alice", thread = "cmd-a") =>
  callThroughGraph(graph, "cmd_run_command", { command }, { context: { user_id: user, secrets: { api_key: SECRET, name_key: NAME_SECRET } }, configurable: { thread_id: thread } });
const changes = (message: ToolMessage) => (message.artifact as { workspace_changes?: string[] } | undefined)?.workspace_changes;

describe("the tools and their schemas", () => {
  test("run_command and run_script, prefixed; the SDK 1.15 (zod v3) schemas convert, defaults and all", () => {
    expect(tools.map((t) => t.name).sort()).toEqual(["cmd_run_command", "cmd_run_script"]);
    const command = tools.find((t) => t.name === "cmd_run_command")!;
    expect(command.description).toBe("Run a command on this linux machine");
    expect(command.schema).toEqual({
      type: "object",
      properties: {
        command: { type: "string", description: "Command with args" },
        cwd: { type: "string", default: "", description: "Current working directory, leave empty in most cases" },
      },
      required: ["command"],
      additionalProperties: false,
    });
  });

  test("headers_from_context on this stdio server is ignored with one warning", () => {
    expect(logger.messages("warn").filter((m) => m.includes("headers_from_context"))).toHaveLength(1);
  });

  test("a missing required argument, or one the schema does not allow, is refused before the server, naming the field", async () => {
    const options = { context: { user_id: "alice" }, configurable: { thread_id: "cmd-a" } };
    const missing = await callThroughGraph(graph, "cmd_run_command", {}, options);
    expect(missing.content).toBe("Invalid arguments for tool 'cmd_run_command'; fix them and call it again:\ncommand: required field missing");
    const extra = await callThroughGraph(graph, "cmd_run_command", { command: "echo x", bogus: 1 }, options);
    expect(extra.content).toBe("Invalid arguments for tool 'cmd_run_command'; fix them and call it again:\nbogus: unexpected field");
  });
});

describe("a command writing into its cwd", () => {
  let written: ToolMessage;
  beforeAll(async () => {
    written = await run("echo hi > out.txt");
  });

  test("the file lands in the thread's workspace and is listed as /mnt/user-data/workspace/out.txt", async () => {
    expect(written.status).toBe("success");
    expect(await readFile(path.join(workspaceOf("cmd-a"), "out.txt"), "utf8")).toBe("hi\n");
    expect(changes(written)).toEqual([`${W}/out.txt`]);
  });

  test("reading it back by its relative path works on the same thread, and lists no change", async () => {
    const message = await run("cat out.txt");
    expect(message.content).toBe("hi\n");
    expect(changes(message)).toBeUndefined();
  });

  test("a path the command prints of an existing workspace file is shown as /mnt/user-data", async () => {
    const message = await run("realpath out.txt");
    expect(message.content).toBe(`${W}/out.txt\n`);
  });

  test("pwd and $TMPDIR are directories: SPEC §5.1 rewrites existing files only, so the model sees the host folders", async () => {
    expect((await run("pwd")).content).toBe(`${workspaceOf("cmd-a")}\n`);
    expect((await run("echo $TMPDIR")).content).toBe(`${path.join(workspaceOf("cmd-a"), ".mcp", "tmp")}\n`);
  });

  test("a /mnt/user-data path as the whole cwd argument is the workspace; inside a command line it is sent as written", async () => {
    const inCwd = await callThroughGraph(
      graph,
      "cmd_run_command",
      { command: "cat out.txt; pwd", cwd: W },
      { context: { user_id: "alice" }, configurable: { thread_id: "cmd-a" } },
    );
    // The host folder the model named by its /mnt/user-data form is echoed back in that form (see hostArguments).
    expect(inCwd.content).toBe(`hi\n${W}\n`);
    // The server's shell is given the command line as it is: there is no /mnt/user-data on the host.
    const inLine = await run(`cat ${W}/out.txt`);
    expect(inLine.status).toBe("error");
    expect(inLine.content).toBe(`Command failed: cat ${W}/out.txt\ncat: ${W}/out.txt: No such file or directory\n\ncat: ${W}/out.txt: No such file or directory\n`);
  });

  test("files under .mcp (the temp folder) are not listed as changes", async () => {
    const message = await run('echo t > "$TMPDIR/scratch" && echo ok');
    expect(message.content).toBe("ok\n");
    expect(changes(message)).toBeUndefined();
  });

  test("thread B does not see thread A's file by its relative path; its child is another process", async () => {
    const message = await run("cat out.txt", "alice", "cmd-b");
    expect(message.status).toBe("error");
    expect(seenByModel(message)).not.toContain("hi\\n");
    expect(serverOf("cmd-a")).toHaveLength(1);
    expect(serverOf("cmd-b")).toHaveLength(1);
    expect(serverOf("cmd-a")).not.toEqual(serverOf("cmd-b"));
  });

  test("an isError result (a command exiting 3) keeps the session: the same process serves the next call", async () => {
    const [pid] = serverOf("cmd-a");
    const failed = await run("echo partial; exit 3");
    expect(failed.status).toBe("error");
    expect(failed.content).toBe("Command failed: echo partial; exit 3\n\npartial\n");
    expect((await run("echo still")).content).toBe("still\n");
    expect(serverOf("cmd-a")).toEqual([pid]);
  });

  test("the pinned cwd is not a sandbox: a shell can still climb to thread A's folder (the server runs what it is given)", async () => {
    const message = await run("cat ../../../cmd-a/user-data/workspace/out.txt", "alice", "cmd-b");
    expect(message.content).toBe("hi\n");
  });
});

describe("a per-request secret a command echoes", () => {
  const forms = {
    name: NAME_SECRET,
    raw: SECRET,
    base64: Buffer.from(SECRET).toString("base64"),
    url: encodeURIComponent(SECRET),
    json: JSON.stringify(SECRET).slice(1, -1),
  };
  let messages: ToolMessage[];

  beforeAll(async () => {
    messages = [
      await run(`printf '%s\\n' '${SECRET}'`),
      await run(`printf '%s' '${SECRET}' | base64`),
      await run(`node -e 'console.log(encodeURIComponent(process.argv[1]))' '${SECRET}'`),
      // In a file's name: the change listing quotes it.
      await run(`touch 'n-${NAME_SECRET}.txt' 'p-${encodeURIComponent(SECRET)}.txt'`, "alice", "cmd-secret"),
      // A failing command: the server's error text quotes the command line, and it logs the failure on its stderr.
      await run(`echo '${SECRET}' >&2; exit 3`),
    ];
    // The failure's stderr line is logged once the server wrote it.
    expect(await waitUntil(() => logger.messages("debug").some((m) => m.includes("run_command failed")))).toBe(true);
  });

  test("what the command printed reached the model, with the secret blanked", () => {
    expect(messages.map((m) => [m.status, m.content])).toEqual([
      ["success", "[redacted]\n"],
      ["success", "[redacted]\n"],
      ["success", "[redacted]\n"],
      ["success", ""],
      // isError: the server's own text (it quotes the command line, then stdout and stderr blocks), scrubbed.
      ["error", "Command failed: echo '[redacted]' >&2; exit 3\n[redacted]\n\n[redacted]\n"],
    ]);
  });

  test.each(Object.entries(forms))("no ToolMessage holds it %s, in text or artifact", (_form, value) => {
    for (const message of messages) expect(seenByModel(message)).not.toContain(value);
  });

  test.each(Object.entries(forms))("no log line holds it %s", (_form, value) => {
    for (const line of logger.messages()) expect(line).not.toContain(value);
  });

  test("the files named with it are written, and listed with the secret blanked", async () => {
    expect(changes(messages[3])).toEqual([`${W}/n-[redacted].txt`, `${W}/p-[redacted].txt`]);
    expect(await readFile(path.join(workspaceOf("cmd-secret"), `n-${NAME_SECRET}.txt`), "utf8")).toBe("");
  });
});

describe("a child killed mid-call, and a call past tool_call_timeout", () => {
  test("SIGKILL of the server mid-call: one clean error line; the next call runs on a new process", async () => {
    expect((await run("echo warm", "alice", "cmd-kill")).content).toBe("warm\n");
    const [pid] = serverOf("cmd-kill");
    expect(pid).toBeDefined();
    const sleeper = `sleep 30 # ${MARKER}-kill`;
    const pending = run(sleeper, "alice", "cmd-kill");
    const cmdline = (p: number) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, "utf8");
      } catch {
        return "";
      }
    };
    expect(await waitUntil(() => markedPids().some((p) => cmdline(p).includes(`${MARKER}-kill`)))).toBe(true);
    process.kill(pid, "SIGKILL");
    const message = await pending;
    expect(cleanErrorLine(message)).toBe(
      "MCP tool 'run_command' on server 'cmd' failed: the connection to the server closed before it answered (its process ended or closed its output). The call was not sent again; a new session serves the next call.",
    );
    expect((await run("echo again", "alice", "cmd-kill")).content).toBe("again\n");
    const [next] = serverOf("cmd-kill");
    expect(next).toBeDefined();
    expect(next).not.toBe(pid);
    // What the killed child started went with it.
    expect(await waitUntil(() => !markedPids().some((p) => cmdline(p).includes(`${MARKER}-kill`)))).toBe(true);
  });

  test("past tool_call_timeout (2 s): one clean line naming it; the same process serves the next call", async () => {
    expect((await run("echo warm", "alice", "cmd-slow")).content).toBe("warm\n");
    const [pid] = serverOf("cmd-slow");
    const message = await run("sleep 6", "alice", "cmd-slow");
    expect(cleanErrorLine(message)).toContain("tool_call_timeout");
    expect((await run("echo after", "alice", "cmd-slow")).content).toBe("after\n");
    expect(serverOf("cmd-slow")).toEqual([pid]);
    expect(alive(pid)).toBe(true);
  });
});

describe("large outputs", () => {
  test("past the server's own 1 MiB exec buffer: its isError text, bounded, on one session that goes on", async () => {
    expect((await run("echo warm", "alice", "cmd-large")).content).toBe("warm\n");
    const [pid] = serverOf("cmd-large");
    const message = await run("head -c 3000000 /dev/zero | tr '\\0' a", "alice", "cmd-large");
    expect(message.status).toBe("error");
    expect(String(message.content)).toMatch(/^stdout maxBuffer length exceeded\na{100}/);
    expect(String(message.content).length).toBeLessThan(10_000);
    expect((await run("echo after", "alice", "cmd-large")).content).toBe("after\n");
    expect(serverOf("cmd-large")).toEqual([pid]);
  });

  test("a failed command's 60 KB of output, which the server also logs as one JSON line on stderr: the call answers", async () => {
    // The harness read that line so slowly (quadratic in its base64-looking run) that its event loop stopped for
    // seconds: this very call, and every other of the process, then ran past tool_call_timeout.
    const message = await run("head -c 60000 /dev/zero | tr '\\0' a; exit 1", "alice", "cmd-log");
    expect(message.status).toBe("error");
    expect(String(message.content)).toMatch(/^Command failed: head -c 60000/);
    expect(await waitUntil(() => logger.messages("debug").some((m) => m.startsWith("MCP server 'cmd' stderr: WARN: run_command failed: {\"isError\":true"))))
      .toBe(true);
  });
});

describe("through createAgent, and closing the toolkit", () => {
  test("an agent's run writes a script and runs it in its thread's workspace", async () => {
    const model = new ScriptedChatModel([
      ScriptedChatModel.toolCall("cmd_run_script", { interpreter: "sh", script: "echo 'echo from-script' > s.sh; sh s.sh" }, "script"),
      ScriptedChatModel.toolCall("cmd_run_command", { command: "ls" }, "ls"),
      { content: "done" },
    ]);
    const agent = createAgent({ model, tools, contextSchema: z.object({ user_id: z.string() }) });
    const result = await agent.invoke({ messages: [new HumanMessage("go")] }, { context: { user_id: "alice" }, configurable: { thread_id: "cmd-agent" } });
    const messages = (result.messages as BaseMessage[]).filter((m): m is ToolMessage => ToolMessage.isInstance(m));
    expect(messages.map((m) => [m.tool_call_id, m.status, m.content])).toEqual([
      ["script", "success", "from-script\n"],
      ["ls", "success", "s.sh\n"],
    ]);
    expect(changes(messages[0])).toEqual([`${W}/s.sh`]);
  });

  test("closing the toolkit leaves no process of the server, nor anything it started", async () => {
    expect(markedPids().length).toBeGreaterThan(0);
    await toolkit.close();
    expect(await waitUntil(() => markedPids().length === 0)).toBe(true);
  });
});
