/**
 * A Python server started as `python3 -m <module>` in the thread workspace: Python puts the cwd first on `sys.path`, so a
 * `<module>.py` a tool wrote there would run, as the host's user, at the next start of that thread's child (a new
 * session, an eviction, a crash, a reload). Real children: the fixture server behind a real `python3 -m` launcher, the
 * file written by the fixture's `write_file` tool through a real ToolNode graph.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { existsSync } from "node:fs";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { PYTHON_LAUNCHER_DIR, PYTHON_LAUNCHER_MODULE, pythonHasSafePath, pythonModuleLaunch, pythonScriptLaunch } from "../fixtures/python-launcher";
import { stdioFixture } from "../fixtures/stdio";

const hasSafePath = pythonHasSafePath();
if (!hasSafePath) console.log("PYTHONSAFEPATH tests skipped: no python3 of version 3.11 or later on PATH");
const withSafePath = hasSafePath ? describe : describe.skip;

let dataDir: string;
let markers: string;
let toolkit: McpToolkit;
let graph: ToolNodeGraph;

beforeAll(async () => {
  if (!hasSafePath) return;
  dataDir = await makeTempDir("mcp-python-path-data-");
  markers = await makeTempDir("mcp-python-path-markers-");
  const py = (name: string, onPath = true) => pythonModuleLaunch(stdioFixture({ name, toolNames: ["where"] }), onPath);
  const optedOut = py("opted");
  const configPath = await writeConfig(await makeTempDir("mcp-python-path-"), {
    mcpServers: {
      files: { type: "stdio", ...stdioFixture({ name: "files", toolNames: ["write_file"] }) },
      py: { type: "stdio", ...py("py") },
      // The operator's own folder holds the module: `-m` finds it there, as it always did.
      own: { type: "stdio", ...py("own", false), cwd: PYTHON_LAUNCHER_DIR },
      opted: { type: "stdio", ...optedOut, env: { ...optedOut.env, PYTHONSAFEPATH: "" } },
      // `python3 /path/server.py`: Python puts the script's folder (not the cwd) first on sys.path.
      script: { type: "stdio", ...pythonScriptLaunch(stdioFixture({ name: "script", toolNames: ["where"] })) },
    },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(async () => {
  await toolkit?.close();
});

/** Has a tool of `thread` write a module of the launcher's name in its workspace: it leaves `marker` and runs the server. */
async function plantModule(thread: string, marker: string): Promise<void> {
  const content = `import os, sys\nopen(${JSON.stringify(marker)}, "w").write("ran")\nos.execvp(sys.argv[1], sys.argv[1:])\n`;
  const wrote = await callThroughGraph(graph, "files_write_file", { path: `${PYTHON_LAUNCHER_MODULE}.py`, content }, { context: { thread_id: thread } });
  expect(wrote.status).toBe("success");
}

async function whereOf(tool: string, thread: string): Promise<{ cwd: string }> {
  const message = await callThroughGraph(graph, tool, {}, { context: { thread_id: thread } });
  expect(message.status).toBe("success");
  return JSON.parse(String(message.content)) as { cwd: string };
}

const workspaceOf = (thread: string) => path.join(dataDir, "threads", thread, "user-data", "workspace");

withSafePath("python3 -m <module> started in the thread workspace", () => {
  test("a <module>.py a tool wrote in the workspace is not what the thread's next child runs (PYTHONSAFEPATH)", async () => {
    const marker = path.join(markers, "planted");
    await plantModule("planted", marker);
    const where = await whereOf("py_where", "planted");
    expect({ cwd: where.cwd, plantedModuleRan: existsSync(marker) }).toEqual({ cwd: workspaceOf("planted"), plantedModuleRan: false });
  });

  test("a server with a configured cwd keeps the cwd on sys.path: its module is found there", async () => {
    expect((await whereOf("own_where", "own")).cwd).toBe(PYTHON_LAUNCHER_DIR);
  });

  test("a server started as python3 /path/server.py imports its sibling modules (PYTHONSAFEPATH would drop the script's folder from sys.path)", async () => {
    expect((await whereOf("script_where", "script")).cwd).toBe(workspaceOf("script"));
  });

  test("the server's env decides when it sets PYTHONSAFEPATH (empty: off, as Python reads it)", async () => {
    const marker = path.join(markers, "opted");
    await plantModule("opted", marker);
    await whereOf("opted_where", "opted");
    expect(existsSync(marker)).toBe(true);
  });
});
