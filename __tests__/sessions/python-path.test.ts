/**
 * Which stdio launches put the working directory (the thread workspace) on Python's `sys.path`: `-m` and `-c`, so they
 * get PYTHONSAFEPATH; a script does not (its own folder goes there, and its sibling modules must keep importing).
 */
import { describe, expect, test } from "@jest/globals";
import { putsCwdOnSysPath } from "../../lib/sessions/python-path";

describe("putsCwdOnSysPath", () => {
  test.each([
    ["python3", ["-m", "mcp_server_time"]],
    ["/usr/bin/python3.12", ["-u", "-m", "server"]],
    ["python", ["-um", "server"]],
    ["python3", ["-mserver"]],
    ["python3", ["-W", "ignore", "-X", "utf8", "-m", "server"]],
    ["python3", ["-Werror", "-c", "import server"]],
    ["pypy3", ["-Bc", "import server"]],
    ["python3", ["--check-hash-based-pycs", "never", "-m", "server"]],
  ])("%s %j: yes", (command, args) => {
    expect(putsCwdOnSysPath(command, args)).toBe(true);
  });

  test.each([
    ["python3", ["/srv/mcp/server.py"]],
    ["python3", ["-u", "server.py", "-m", "not-python's"]],
    ["python3", ["-W", "-m", "server.py"]],
    ["python3", ["-", "-m"]],
    ["python3", ["--", "-m"]],
    ["node", ["-m", "x"]],
    ["uvx", ["mcp-server-time"]],
    ["pythonista", ["-m", "x"]],
    [undefined, ["-m", "x"]],
  ])("%s %j: no", (command, args) => {
    expect(putsCwdOnSysPath(command, args)).toBe(false);
  });
});
