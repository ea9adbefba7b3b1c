/**
 * `npm start` as a user runs it: it serves the agent graph, a SIGTERM to the `npm start` process ends
 * the whole process tree (the dev server, its workers and the MCP servers the graph started) and frees
 * the port, and a busy port is refused with a clear message instead of a server that keeps running.
 *
 * The server keeps its state in the repository's .langgraph_api (gitignored), which this test leaves
 * alone: dev-server.test.ts may have a server running on it at the same time.
 */
import { afterAll, describe, expect, it, jest } from "@jest/globals";
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import * as path from "node:path";
import { HOST, portProblem } from "../../graphs/start";
import { freePort } from "../fixtures/ports";

const ROOT = path.resolve(__dirname, "..", "..");
const READY_DEADLINE_MS = 120_000;
const LINUX = process.platform === "linux";

jest.setTimeout(READY_DEADLINE_MS + 60_000);

const started: ChildProcess[] = [];

const stripAnsi = (text: string) => text.replace(/\u001b\[[0-9;]*m/g, "");

interface NpmStart {
  child: ChildProcess;
  output: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function npmStart(port: number): NpmStart {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    MCP_HARNESS_CONFIG: "",
    LANGSMITH_TRACING: "false",
    LANGCHAIN_TRACING_V2: "false",
  };
  delete env.MCP_HARNESS_MODEL;
  // Its own process group only so that afterAll can clean up after a failed test.
  const child = spawn("npm", ["start"], { cwd: ROOT, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  started.push(child);
  let output = "";
  const append = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-50_000);
  };
  child.stdout?.on("data", append);
  child.stderr?.on("data", append);
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal }));
  });
  return { child, output: () => stripAnsi(output), exit };
}

/** Resolves when `pattern` shows in the output; rejects if the process exits first or the deadline passes. */
function waitForOutput(run: NpmStart, pattern: RegExp): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`no ${pattern} within ${READY_DEADLINE_MS} ms:\n${run.output()}`)), READY_DEADLINE_MS);
    const check = () => {
      if (pattern.test(run.output())) done();
    };
    const onExit = () => done(new Error(`npm start exited before ${pattern}:\n${run.output()}`));
    const done = (error?: Error) => {
      clearTimeout(timer);
      run.child.stdout?.off("data", check);
      run.child.stderr?.off("data", check);
      run.child.off("exit", onExit);
      if (error) reject(error);
      else resolve();
    };
    run.child.stdout?.on("data", check);
    run.child.stderr?.on("data", check);
    run.child.once("exit", onExit);
    check();
  });
}

interface ProcInfo {
  pid: number;
  ppid: number;
  state: string;
}

function readProc(pid: string): ProcInfo | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { pid: Number(pid), ppid: Number(ppid), state };
  } catch {
    return undefined;
  }
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
  } catch {
    return "";
  }
}

/** Every live descendant of `root`, from /proc. */
function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const info = readProc(entry);
    if (!info) continue;
    children.set(info.ppid, [...(children.get(info.ppid) ?? []), info.pid]);
  }
  const found: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift()!) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/** Running, as opposed to gone or a zombie waiting for a reaper. */
function running(pid: number): boolean {
  const info = readProc(String(pid));
  return info !== undefined && info.state !== "Z" && info.state !== "X";
}

function listen(port = 0): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(port, HOST, () => resolve(server));
  });
}

let leftovers: number[] = [];

afterAll(() => {
  for (const child of started) {
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // gone
      }
    }
  }
  for (const pid of leftovers) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
});

describe("npm start", () => {
  it("refuses a busy port: exits non-zero and says so, without starting a server", async () => {
    const holder = await listen();
    const address = holder.address();
    if (address === null || typeof address === "string") throw new Error("no port");
    try {
      const run = npmStart(address.port);
      // The old failure: the dev server logs EADDRINUSE and keeps running. Fail at once instead of waiting.
      const outcome = await Promise.race([
        run.exit,
        waitForOutput(run, /EADDRINUSE|Server running at/).then(
          () => "kept running" as const,
          () => new Promise<never>(() => undefined), // exited first: the race is decided by run.exit
        ),
      ]);
      expect(outcome).not.toBe("kept running");
      const { code } = await run.exit;
      expect(code).not.toBe(0);
      expect(run.output()).toContain(`port ${address.port} on 127.0.0.1 is already in use; set PORT`);
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });

  (LINUX ? it : it.skip)("stops the whole process tree on SIGTERM and frees the port", async () => {
    const port = await freePort();
    const run = npmStart(port);
    await waitForOutput(run, new RegExp(`Server running at 127\\.0\\.0\\.1:${port}`));
    const base = `http://${HOST}:${port}`;
    expect(await (await fetch(`${base}/ok`)).json()).toEqual({ ok: true });

    // A run makes the graph start its MCP server (a grandchild several levels down).
    const res = await fetch(`${base}/runs/wait`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "agent", input: { messages: [{ role: "user", content: 'please echo {"text":"hi"}' }] } }),
    });
    expect(res.status).toBe(200);
    expect(JSON.stringify(await res.json())).toContain("Tool demo_echo returned: hi");

    const tree = descendants(run.child.pid!);
    leftovers = tree;
    const commands = tree.map(cmdline);
    expect(commands.some((c) => c.includes("graphs/start.ts"))).toBe(true);
    expect(commands.some((c) => c.includes("langgraph-api"))).toBe(true);
    expect(commands.some((c) => c.includes("server.ts"))).toBe(true);

    process.kill(run.child.pid!, "SIGTERM");
    await run.exit;

    expect(tree.filter(running).map((pid) => `${pid} ${cmdline(pid)}`)).toEqual([]);
    expect(await portProblem(port, HOST)).toBeNull();
  });
});
