import { describe, expect, test } from "@jest/globals";
import { startsPythonFromCwd } from "../../lib/sessions/python-cwd-path";

describe("startsPythonFromCwd: the command lines that get PYTHONSAFEPATH in the thread workspace", () => {
  test.each([
    ["python3", ["-m", "mcp_server_fetch"]],
    ["/opt/venv/bin/python", ["-u", "-m", "srv"]],
    ["python3.12", ["-um", "srv"]],
    ["python3", ["-msrv"]],
    ["python3", ["-W", "ignore", "-m", "srv"]],
    // A long option's value is not the script.
    ["python3", ["--check-hash-based-pycs", "never", "-m", "srv"]],
    ["python3", ["-c", "import srv; srv.main()"]],
    ["uv", ["run", "--with", "x", "python", "-m", "srv"]],
    ["uv", ["run", "-m", "srv"]],
    ["/usr/bin/env", ["python3", "-m", "srv"]],
  ])("%s %j: the cwd is on sys.path", (command, args) => {
    expect(startsPythonFromCwd(command, args)).toBe(true);
  });

  test.each([
    ["python3", ["/srv/server.py"]],
    ["python3", ["/srv/server.py", "-m", "model"]],
    ["python3", ["-u", "/srv/server.py", "-c", "conf"]],
    ["python3", ["-W", "m", "/srv/server.py"]],
    ["python3", ["-Xdev", "/srv/server.py"]],
    ["uv", ["run", "/srv/server.py", "-m", "model"]],
    ["node", ["/srv/index.js", "-m", "model"]],
    ["npx", ["-y", "some-mcp"]],
    ["uvx", ["mcp-server-fetch"]],
  ])("%s %j: it is not", (command, args) => {
    expect(startsPythonFromCwd(command, args)).toBe(false);
  });
});
