import { describe, expect, test } from "@jest/globals";
import { assignVisibleNames, type NameCandidate } from "../../lib/mcp/names";

/** A server as the config lists it: name, tool_name_prefix, and the raw tool names in the order it lists them. */
type Server = [server: string, prefixed: boolean, tools: string[]];

function assign(servers: Server[]): { names: string[]; sources: string[]; warnings: string[] } {
  const candidates: NameCandidate[] = servers.flatMap(([server, prefixed, tools]) =>
    tools.map((rawName) => ({ server, rawName, prefixed })),
  );
  const warnings: string[] = [];
  const named = assignVisibleNames(candidates, (m) => warnings.push(m));
  return {
    names: named.map((n) => n.visibleName),
    sources: named.map((n) => `${n.candidate.server}/${n.candidate.rawName}`),
    warnings,
  };
}

const X70 = "x".repeat(70);

describe("assignVisibleNames: the documented collision rule", () => {
  test.each<{ case: string; servers: Server[]; names: string[]; sources: string[]; warnings: string[] }>([
    {
      case: "an empty raw name is dropped, not exposed as 's_'",
      servers: [["s", true, ["", "ping"]], ["u", false, [""]]],
      names: ["s_ping"],
      sources: ["s/ping"],
      warnings: ["Dropping a tool of MCP server 's': its name is empty", "Dropping a tool of MCP server 'u': its name is empty"],
    },
    {
      case: "a server listing a raw name twice keeps the first, and the warning names the server once",
      servers: [["s", true, ["ping", "ping"]], ["u", false, ["pong", "pong"]]],
      names: ["s_ping", "pong"],
      sources: ["s/ping", "u/pong"],
      warnings: [
        "MCP server 's' lists tool 'ping' more than once; keeping the first",
        "MCP server 'u' lists tool 'pong' more than once; keeping the first",
      ],
    },
    {
      case: "a server's own configured 'raw2_ping' beats its renamed 'ping', which keeps 'ping' when the other server moved",
      servers: [["other", false, ["ping"]], ["raw2", false, ["ping", "raw2_ping"]]],
      names: ["other_ping", "ping", "raw2_ping"],
      sources: ["other/ping", "raw2/ping", "raw2/raw2_ping"],
      warnings: [
        "MCP tool name 'ping' is exposed by several servers (other, raw2); exposing server 'other's tool as 'other_ping'",
        "MCP tool name 'ping' is exposed by several servers (other, raw2); keeping server 'raw2's tool as 'ping': " +
          "its fallback name 'raw2_ping' is the configured name of the server's own tool 'raw2_ping'",
      ],
    },
    {
      case: "another server's configured name beats a fallback even when that server comes later; the tool keeps its own name",
      servers: [["y", false, ["ping"]], ["z", false, ["ping"]], ["x", false, ["y_ping"]]],
      names: ["ping", "z_ping", "y_ping"],
      sources: ["y/ping", "z/ping", "x/y_ping"],
      warnings: [
        "MCP tool name 'ping' is exposed by several servers (y, z); keeping server 'y's tool as 'ping': " +
          "its fallback name 'y_ping' is the configured name of tool 'y_ping' of server 'x'",
        "MCP tool name 'ping' is exposed by several servers (y, z); exposing server 'z's tool as 'z_ping'",
      ],
    },
    {
      case: "when no fallback works, the first in config order keeps the name and the later one is dropped",
      servers: [["fs.home", false, ["read_file", "list"]], ["fs.work", false, ["read_file"]]],
      names: ["read_file", "list"],
      sources: ["fs.home/read_file", "fs.home/list"],
      warnings: [
        "MCP tool name 'read_file' is exposed by several servers (fs.home, fs.work); keeping server 'fs.home's tool as 'read_file': " +
          "its fallback name 'fs.home_read_file' is invalid (it must match ^[A-Za-z0-9_-]+$)",
        "MCP tool name 'read_file' is exposed by several servers (fs.home, fs.work); dropping server 'fs.work's tool 'read_file': " +
          "its fallback name 'fs.work_read_file' is invalid (it must match ^[A-Za-z0-9_-]+$)",
      ],
    },
    {
      case: "a prefixed claimant holds the name: an unprefixed one whose fallback fails is dropped",
      servers: [["x.y", false, ["p_q"]], ["p", true, ["q"]]],
      names: ["p_q"],
      sources: ["p/q"],
      warnings: [
        "MCP tool name 'p_q' is exposed by several servers (x.y, p); dropping server 'x.y's tool 'p_q': " +
          "its fallback name 'x.y_p_q' is invalid (it must match ^[A-Za-z0-9_-]+$)",
      ],
    },
    {
      case: "two unprefixed servers with one name: both fall back to their prefixed form",
      servers: [["alpha", false, ["ping"]], ["beta", false, ["ping"]]],
      names: ["alpha_ping", "beta_ping"],
      sources: ["alpha/ping", "beta/ping"],
      warnings: [
        "MCP tool name 'ping' is exposed by several servers (alpha, beta); exposing server 'alpha's tool as 'alpha_ping'",
        "MCP tool name 'ping' is exposed by several servers (alpha, beta); exposing server 'beta's tool as 'beta_ping'",
      ],
    },
    {
      case: "prefixed claimants cannot fall back: the first in config order keeps the name",
      servers: [["web", true, ["search", "scraper_fetch"]], ["web_scraper", true, ["search", "fetch"]]],
      names: ["web_search", "web_scraper_fetch", "web_scraper_search"],
      sources: ["web/search", "web/scraper_fetch", "web_scraper/search"],
      warnings: ["Dropping MCP tool 'fetch' of server 'web_scraper': its name 'web_scraper_fetch' collides with tool 'scraper_fetch' of server 'web'"],
    },
    {
      case: "a prefixed claimant keeps its configured name; the unprefixed one falls back, even when listed first",
      servers: [["x", false, ["alpha_ping"]], ["alpha", true, ["ping"]]],
      names: ["x_alpha_ping", "alpha_ping"],
      sources: ["x/alpha_ping", "alpha/ping"],
      warnings: ["MCP tool name 'alpha_ping' is exposed by several servers (x, alpha); exposing server 'x's tool as 'x_alpha_ping'"],
    },
    {
      case: "two equal fallbacks resolve in config order",
      servers: [["a_b", false, ["c"]], ["a", false, ["b_c"]], ["m", false, ["c"]], ["n", false, ["b_c"]]],
      names: ["a_b_c", "b_c", "m_c", "n_b_c"],
      sources: ["a_b/c", "a/b_c", "m/c", "n/b_c"],
      warnings: [
        "MCP tool name 'c' is exposed by several servers (a_b, m); exposing server 'a_b's tool as 'a_b_c'",
        "MCP tool name 'b_c' is exposed by several servers (a, n); keeping server 'a's tool as 'b_c': " +
          "its fallback name 'a_b_c' is already the fallback name of tool 'c' of server 'a_b'",
        "MCP tool name 'c' is exposed by several servers (a_b, m); exposing server 'm's tool as 'm_c'",
        "MCP tool name 'b_c' is exposed by several servers (a, n); exposing server 'n's tool as 'n_b_c'",
      ],
    },
    {
      case: "invalid configured names are dropped, and of tools whose fallbacks are invalid all but the first; siblings stay",
      servers: [["odd", true, ["echo", "bad name!", X70]], ["u", false, ["y".repeat(63)]], ["vv", false, ["y".repeat(63)]]],
      names: ["odd_echo", "y".repeat(63)],
      sources: ["odd/echo", `u/${"y".repeat(63)}`],
      warnings: [
        "Dropping MCP tool 'bad name!' of server 'odd': invalid name 'odd_bad name!' (it must match ^[A-Za-z0-9_-]+$)",
        `Dropping MCP tool '${X70}' of server 'odd': invalid name 'odd_${X70}' (it is longer than 64 characters)`,
        `MCP tool name '${"y".repeat(63)}' is exposed by several servers (u, vv); keeping server 'u's tool as '${"y".repeat(63)}': ` +
          `its fallback name 'u_${"y".repeat(63)}' is invalid (it is longer than 64 characters)`,
        `MCP tool name '${"y".repeat(63)}' is exposed by several servers (u, vv); dropping server 'vv's tool '${"y".repeat(63)}': ` +
          `its fallback name 'vv_${"y".repeat(63)}' is invalid (it is longer than 64 characters)`,
      ],
    },
  ])("$case", ({ servers, names, sources, warnings }) => {
    const result = assign(servers);
    expect(result.warnings).toEqual(warnings);
    expect(result.names).toEqual(names);
    expect(result.sources).toEqual(sources);
    // the same input always gives the same answer
    expect(assign(servers)).toEqual(result);
  });
});

test("server-sent names are shown escaped and cut in warnings, so none can forge a log line or flood it", () => {
  const forged = "x\n[mcp-harness] Skipping MCP server 'github'";
  // A right-to-left override would show the rest of the line reversed.
  const reversing = "y\u202egnp.exe";
  const long = "n".repeat(200);
  const { warnings } = assign([["s", false, [forged, forged, long, reversing]]]);
  expect(warnings).toEqual([
    `Dropping MCP tool 'x\\n[mcp-harness] Skipping MCP server 'github'' of server 's': invalid name 'x\\n[mcp-harness] Skipping MCP server 'github'' (it must match ^[A-Za-z0-9_-]+$)`,
    "MCP server 's' lists tool 'x\\n[mcp-harness] Skipping MCP server 'github'' more than once; keeping the first",
    `Dropping MCP tool '${"n".repeat(100)}…' of server 's': invalid name '${"n".repeat(100)}…' (it is longer than 64 characters)`,
    "Dropping MCP tool 'y\\u202egnp.exe' of server 's': invalid name 'y\\u202egnp.exe' (it must match ^[A-Za-z0-9_-]+$)",
  ]);
  for (const warning of warnings) expect(warning).not.toMatch(/[\n\u202e]/);
});
