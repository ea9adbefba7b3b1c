/**
 * @cyanheads/git-mcp-server, a stdio server that keeps per-session state: the repository `git_set_working_dir` chose
 * (its tools' `path` defaults to it, not to the process's cwd). One child per (server, user, thread), pinned to the
 * thread workspace (SPEC §5.1): what the model sees of that state across threads and users, of the paths it hands
 * back and gets back, of what git writes into the workspace (`workspace_changes`), of the server's stderr, and of a
 * `$VAR` credential git echoes.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { readFileSync, readlinkSync } from "node:fs";
import { mkdir, readFile, realpath, writeFile } from "node:fs/promises";
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { createAgent } from "langchain";
import { z } from "zod";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { ScriptedChatModel } from "../../lib/agent";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, seenByModel, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { pidsWithMarker, pidsWithMarkerAndEnv, waitUntil } from "../fixtures/processes";

// The package exports `./*` as `./dist/*`.
const SERVER = require.resolve("@cyanheads/git-mcp-server/index.js");
const W = "/mnt/user-data/workspace";
/** An extra argument the server ignores: tells its processes apart. */
const MARKER = `git-marker-${process.pid}-${Date.now()}`;
/** A credential an operator gives git through the server's env (a `$VAR`): git prints it back in remote URLs. */
const TOKEN = "ghp_G1tT0ken+Zq=x";
const TOKEN_FORMS = {
  raw: TOKEN,
  url: encodeURIComponent(TOKEN),
  base64: Buffer.from(TOKEN).toString("base64"),
};
const NO_WORKING_DIR = "Error: No session working directory set. Please specify a 'path' or use 'git_set_working_dir' first.";

const logger = new RecordingLogger();
let dataDir: string;
let home: string;
let toolkit: McpToolkit;
let graph: ToolNodeGraph;
const seen: ToolMessage[] = [];

beforeAll(async () => {
  dataDir = await realpath(await makeTempDir("mcp-git-data-"));
  // An empty HOME: no ~/.gitconfig of the host's user gives the commits an identity; the server's env does.
  home = await realpath(await makeTempDir("mcp-git-home-"));
  const env = { HOME: home, GIT_USERNAME: "Agent", GIT_EMAIL: "agent@example.com", GIT_SIGN_COMMITS: "false" };
  const configPath = await writeConfig(await makeTempDir("mcp-git-"), {
    mcpServers: {
      git: {
        type: "stdio",
        command: process.execPath,
        args: [SERVER, MARKER],
        env: {
          ...env,
          // git's own configuration by environment: https://github.com/ is fetched with a token, as operators do.
          GIT_CONFIG_COUNT: "1",
          GIT_CONFIG_KEY_0: "url.https://x-access-token:${GIT_TOKEN}@github.com/.insteadOf",
          GIT_CONFIG_VALUE_0: "https://github.com/",
        },
      },
      // The server's log files in the thread's internal folder: per thread, never listed, never in a repository.
      logged: { type: "stdio", command: process.execPath, args: [SERVER, MARKER], env: { ...env, LOGS_DIR: ".mcp/logs" } },
    },
  });
  toolkit = createMcpToolkit({ configPath, env: { GIT_TOKEN: TOKEN }, logger, dataDir });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(async () => {
  await toolkit.close();
});

const workspaceOf = (thread: string) => path.join(dataDir, "threads", thread, "user-data", "workspace");
/** The server processes of `thread` (all its users'): they share its temp folder. */
const childrenOf = (thread: string) => pidsWithMarkerAndEnv(MARKER, `TMPDIR=${path.join(workspaceOf(thread), ".mcp", "tmp")}`);
async function call(tool: string, args: Record<string, unknown>, thread: string, user = "alice", server = "git"): Promise<ToolMessage> {
  const message = await callThroughGraph(graph, `${server}_${tool}`, args, { context: { user_id: user }, configurable: { thread_id: thread } });
  seen.push(message);
  return message;
}
const structured = (message: ToolMessage) => (message.artifact as { structuredContent?: Record<string, unknown> } | undefined)?.structuredContent;
const changes = (message: ToolMessage) => (message.artifact as { workspace_changes?: string[] } | undefined)?.workspace_changes;
function readFileOr(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return "";
  }
}
const openRepo = (thread: string, user = "alice") => call("git_set_working_dir", { path: W, initializeIfNotPresent: true }, thread, user);

describe("the working directory is the session's: one child per (user, thread)", () => {
  let opened: ToolMessage;
  beforeAll(async () => {
    opened = await openRepo("git-a");
  });

  test("thread A's set working dir is shown as the model wrote it; git init's .git is not listed as a change", async () => {
    const message = opened;
    expect(message.status).toBe("success");
    expect(structured(message)).toMatchObject({ path: W, message: `Working directory set to: ${W}` });
    expect(changes(message)).toBeUndefined();
    expect(await readFile(path.join(workspaceOf("git-a"), ".git", "HEAD"), "utf8")).toBe("ref: refs/heads/main\n");
  });

  test("thread B (same user) has no working dir, and no repository in its workspace", async () => {
    const message = await call("git_status", {}, "git-b");
    expect([message.status, message.content]).toEqual(["error", NO_WORKING_DIR]);
    await expect(readFile(path.join(workspaceOf("git-b"), ".git", "HEAD"))).rejects.toThrow(/ENOENT/);
  });

  test("another user on thread A has a child and a working dir of their own, over the thread's one workspace", async () => {
    const before = await call("git_status", {}, "git-a", "bob");
    expect([before.status, before.content]).toEqual(["error", NO_WORKING_DIR]);
    // The workspace is the thread's: bob's child opens the repository alice's made.
    const opened = await openRepo("git-a", "bob");
    expect(structured(opened)).toMatchObject({ path: W, repository: { status: { branch: "main" } } });
    expect(childrenOf("git-a")).toHaveLength(2);
    expect(childrenOf("git-b")).toHaveLength(1);
  });
});

describe("a commit in the thread workspace (HOME an empty folder, TMPDIR the thread's .mcp/tmp)", () => {
  let committed: ToolMessage;
  beforeAll(async () => {
    await openRepo("git-commit");
    // Written by another tool of the thread.
    await mkdir(path.join(workspaceOf("git-commit"), "src"));
    await writeFile(path.join(workspaceOf("git-commit"), "src", "app.ts"), "export {};\n");
    await writeFile(path.join(workspaceOf("git-commit"), "notes.md"), "# notes\n");
    expect((await call("git_add", { paths: ["."] }, "git-commit")).status).toBe("success");
    committed = await call("git_commit", { message: "first: uses $GIT_TOKEN and ${GIT_TOKEN}" }, "git-commit");
  });

  test("the commit is made with the identity of the server's env; the message the model wrote is shown as written", () => {
    expect(committed.status).toBe("success");
    expect(structured(committed)).toMatchObject({ author: "Agent", message: "first: uses $GIT_TOKEN and ${GIT_TOKEN}", filesChanged: 2 });
    // Only .git changed: nothing to list.
    expect(changes(committed)).toBeUndefined();
    const [child] = childrenOf("git-commit");
    const environ = readFileSync(`/proc/${child}/environ`, "utf8").split("\0");
    expect(environ).toEqual(expect.arrayContaining([`HOME=${home}`, `TMPDIR=${path.join(workspaceOf("git-commit"), ".mcp", "tmp")}`]));
    expect(readlinkSync(`/proc/${child}/cwd`)).toBe(workspaceOf("git-commit"));
  });

  test("git log on the thread shows it, and only there", async () => {
    const log = await call("git_log", {}, "git-commit");
    expect(structured(log)?.commits).toEqual([expect.objectContaining({ author: "Agent", authorEmail: "agent@example.com", subject: "first: uses $GIT_TOKEN and ${GIT_TOKEN}" })]);
    const elsewhere = await call("git_log", {}, "git-a");
    expect([elsewhere.status, String(elsewhere.content)]).toEqual(["error", expect.stringContaining("does not have any commits yet")]);
  });

  test("a file a git command rewrites is listed; the /mnt/user-data path the model passes is quoted back as written", async () => {
    await writeFile(path.join(workspaceOf("git-commit"), "notes.md"), "# edited\n");
    const restored = await call("git_checkout", { target: "HEAD", paths: ["notes.md"] }, "git-commit");
    expect(restored.status).toBe("success");
    expect(changes(restored)).toEqual([`${W}/notes.md`]);
    expect(await readFile(path.join(workspaceOf("git-commit"), "notes.md"), "utf8")).toBe("# notes\n");
    const missing = await call("git_add", { paths: [`${W}/absent.md`] }, "git-commit");
    expect([missing.status, missing.content]).toEqual(["error", `Error: File not found: ${W}/absent.md`]);
  });
});

describe("a repository cloned into the workspace, and a worktree", () => {
  let origin: string;
  let cloned: ToolMessage;
  beforeAll(async () => {
    origin = path.join(await realpath(await makeTempDir("mcp-git-origin-")), "upstream");
    const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=o", "-c", "user.email=o@example.com", ...args], { cwd: origin, env: { PATH: process.env.PATH, HOME: home } });
    await mkdir(path.join(origin, "lib"), { recursive: true });
    await writeFile(path.join(origin, "README.md"), "r\n");
    await writeFile(path.join(origin, "lib", "x.ts"), "x\n");
    git("init", "-q", "-b", "main");
    git("add", ".");
    git("commit", "-qm", "init");
    cloned = await call("git_clone", { url: origin, path: `${W}/clone` }, "git-clone");
  });

  test("the clone's files are listed, not its .git; the host path outside the thread's folder is left as it is", () => {
    expect(cloned.status).toBe("success");
    expect(structured(cloned)).toMatchObject({ remoteUrl: origin, path: `${W}/clone`, branch: "main" });
    expect(changes(cloned)).toEqual([`${W}/clone/README.md`, `${W}/clone/lib/x.ts`]);
  });

  test("a worktree's files are listed, not the .git file that points to its repository", async () => {
    await call("git_set_working_dir", { path: `${W}/clone` }, "git-clone");
    const added = await call("git_worktree", { mode: "add", worktreePath: `${W}/wt`, branch: "feature" }, "git-clone");
    expect(added.status).toBe("success");
    expect(structured(added)).toMatchObject({ mode: "add", added: `${W}/wt` });
    expect(await readFile(path.join(workspaceOf("git-clone"), "wt", ".git"), "utf8")).toMatch(/^gitdir: /);
    expect(changes(added)).toEqual([`${W}/wt/README.md`, `${W}/wt/lib/x.ts`]);
  });

  test("the pinned cwd is not a sandbox: folders are shown by their host paths, by which another thread opens the repository", async () => {
    const listed = await call("git_worktree", { mode: "list" }, "git-clone");
    const clone = path.join(workspaceOf("git-clone"), "clone");
    // SPEC §5.1 rewrites existing files only: a folder keeps its host path.
    expect(structured(listed)?.worktrees).toEqual([expect.objectContaining({ path: clone }), expect.objectContaining({ path: path.join(workspaceOf("git-clone"), "wt") })]);
    const reached = await call("git_status", { path: clone }, "git-b");
    expect(structured(reached)).toMatchObject({ currentBranch: "main", isClean: true });
  });
});

describe("the thread's internal .mcp folder and a repository at the workspace's root", () => {
  test("a temp file a process of the thread left in .mcp/tmp is not untracked, staged or committed", async () => {
    await openRepo("git-internal");
    const ws = workspaceOf("git-internal");
    await writeFile(path.join(ws, ".mcp", "tmp", "left-behind.txt"), "a server's temp file\n");
    await writeFile(path.join(ws, "work.md"), "w\n");
    const status = await call("git_status", {}, "git-internal");
    expect(structured(status)?.untrackedFiles).toEqual(["work.md"]);
    await call("git_add", { paths: ["."] }, "git-internal");
    const committed = await call("git_commit", { message: "all" }, "git-internal");
    expect(structured(committed)?.committedFiles).toEqual(["work.md"]);
  });

  test("LOGS_DIR=.mcp/logs: the server's log files are the thread's, never listed as changes, never untracked", async () => {
    const opened = await call("git_set_working_dir", { path: W, initializeIfNotPresent: true }, "git-logs", "alice", "logged");
    expect(opened.status).toBe("success");
    const logs = path.join(workspaceOf("git-logs"), ".mcp", "logs", "combined.log");
    expect(await waitUntil(() => readFileOr(logs).includes("git_set_working_dir"))).toBe(true);
    const status = await call("git_status", {}, "git-logs", "alice", "logged");
    expect(structured(status)).toMatchObject({ isClean: true, untrackedFiles: [] });
    expect(changes(opened)).toBeUndefined();
    expect(changes(status)).toBeUndefined();
  });
});

describe("the workspace's .env (the server loads one from its cwd with dotenv)", () => {
  test("configures the thread's child where the server's env sets nothing: a file a tool wrote there is config", async () => {
    await mkdir(workspaceOf("git-dotenv"), { recursive: true });
    await writeFile(path.join(workspaceOf("git-dotenv"), ".env"), "GIT_COMMITTER_NAME=FromDotenv\nGIT_USERNAME=Ignored\n");
    await openRepo("git-dotenv");
    await writeFile(path.join(workspaceOf("git-dotenv"), "a.md"), "a\n");
    await call("git_add", { paths: ["a.md"] }, "git-dotenv");
    // The server's env wins over the file; what it leaves unset, the file sets.
    expect(structured(await call("git_commit", { message: "m" }, "git-dotenv"))).toMatchObject({ author: "Agent" });
    const shown = await call("git_show", { object: "HEAD", format: "raw" }, "git-dotenv");
    expect(String(structured(shown)?.content)).toMatch(/^committer FromDotenv <agent@example\.com> /m);
  });
});

describe("a $VAR credential in the server's env, which git prints back", () => {
  let listed: ToolMessage;
  beforeAll(async () => {
    await openRepo("git-secret");
    await call("git_remote", { mode: "add", name: "origin", url: "https://github.com/acme/app.git" }, "git-secret");
    listed = await call("git_remote", { mode: "list" }, "git-secret");
  });

  test("git's rewritten remote URL reaches the model with the credential blanked, in text and artifact", () => {
    expect(listed.status).toBe("success");
    const blanked = "https://x-access-token:[redacted]@github.com/acme/app.git";
    expect(structured(listed)?.remotes).toEqual([{ name: "origin", fetchUrl: blanked, pushUrl: blanked }]);
    expect(JSON.parse(String(listed.content))).toMatchObject({ remotes: [{ fetchUrl: blanked, pushUrl: blanked }] });
  });

  test.each(Object.entries(TOKEN_FORMS))("no ToolMessage of these calls, and no log line, holds it %s", (_form, value) => {
    for (const message of seen) expect(seenByModel(message)).not.toContain(value);
    for (const line of logger.messages()) expect(line).not.toContain(value);
  });
});

describe("the server's stderr", () => {
  test("its pino log lines go to the harness's debug log, one line each, bounded; none reaches a ToolMessage", () => {
    const lines = logger.messages("debug").filter((m) => m.startsWith("MCP server 'git' stderr: {\"level\":"));
    expect(lines.length).toBeGreaterThan(10);
    for (const line of lines) expect(line.length).toBeLessThan(700);
    for (const message of seen) expect(seenByModel(message)).not.toContain('"level":');
  });
});

describe("through createAgent", () => {
  test("an agent's run opens its thread's repository, stages and commits what its other tool wrote", async () => {
    await mkdir(workspaceOf("git-agent"), { recursive: true });
    await writeFile(path.join(workspaceOf("git-agent"), "plan.md"), "plan\n");
    const model = new ScriptedChatModel([
      ScriptedChatModel.toolCall("git_git_set_working_dir", { path: W, initializeIfNotPresent: true }, "open"),
      ScriptedChatModel.toolCall("git_git_add", { paths: [`${W}/plan.md`] }, "add"),
      ScriptedChatModel.toolCall("git_git_commit", { message: "plan" }, "commit"),
      { content: "done" },
    ]);
    const agent = createAgent({ model, tools: await toolkit.getTools(), contextSchema: z.object({ user_id: z.string() }) });
    const result = await agent.invoke({ messages: [new HumanMessage("commit the plan")] }, { context: { user_id: "alice" }, configurable: { thread_id: "git-agent" } });
    const messages = (result.messages as BaseMessage[]).filter((m): m is ToolMessage => ToolMessage.isInstance(m));
    expect(messages.map((m) => [m.tool_call_id, m.status])).toEqual([
      ["open", "success"],
      ["add", "success"],
      ["commit", "success"],
    ]);
    // The absolute path the model staged by is quoted back as it wrote it.
    expect(structured(messages[1])?.stagedFiles).toEqual([`${W}/plan.md`]);
    expect(structured(messages[2])).toMatchObject({ message: "plan", committedFiles: ["plan.md"] });
  });
});

describe("closing the toolkit", () => {
  test("leaves no process of the server", async () => {
    expect(pidsWithMarker(MARKER).length).toBeGreaterThan(0);
    await toolkit.close();
    expect(await waitUntil(() => pidsWithMarker(MARKER).length === 0)).toBe(true);
  });
});
