import { describe, expect, test } from "@jest/globals";
import {
  ATTENTION_TASK_STATUSES,
  McpTaskDriverRegistry,
  McpTaskProtocolError,
  normalizeSnapshot,
  POLLABLE_TASK_STATUSES,
  TaskSnapshot,
  TaskSubmitRequest,
  TERMINAL_TASK_STATUSES,
  type McpTaskDriver,
} from "../../lib/tasks";

describe("task model", () => {
  test("status sets", () => {
    expect([...POLLABLE_TASK_STATUSES]).toEqual(["submitted", "working", "input_required"]);
    expect([...TERMINAL_TASK_STATUSES]).toEqual(["completed", "failed", "cancelled"]);
    expect([...ATTENTION_TASK_STATUSES]).toEqual(["input_required", "completed", "failed", "cancelled"]);
  });

  test.each([Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 0, -1])("poll_after_seconds %p is rejected", (hint) => {
    expect(() => new TaskSnapshot({ status: "working", poll_after_seconds: hint })).toThrow("poll_after_seconds must be a finite positive number");
  });

  test("snapshot invariants: input_required carries a payload; the status must be known", () => {
    expect(() => new TaskSnapshot({ status: "input_required" })).toThrow("input_required status requires an input_required payload");
    expect(() => new TaskSnapshot({ status: "running" })).toThrow(/invalid task status/);
    expect(new TaskSnapshot({ status: "working", poll_after_seconds: 0.5 }).isPollable).toBe(true);
    expect(Object.isFrozen(new TaskSnapshot({ status: "completed" }))).toBe(true);
  });

  test.each([
    [{ serverName: " " }, "server_name must not be empty"],
    [{ serverName: "s".repeat(129) }, "server_name must not exceed 128 characters"],
    [{ taskName: "" }, "task_name must not be empty"],
    [{ taskName: "t".repeat(256) }, "task_name must not exceed 255 characters"],
    // The widths of the task row's columns: PostgreSQL would refuse the row only after the remote submit ran.
    [{ userId: "u".repeat(65) }, "user_id must not exceed 64 characters"],
    [{ threadId: "t".repeat(65) }, "thread_id must not exceed 64 characters"],
    [{ runId: "r".repeat(65) }, "run_id must not exceed 64 characters"],
    [{ toolCallId: "c".repeat(129) }, "tool_call_id must not exceed 128 characters"],
  ])("submit request %p is rejected", (override, message) => {
    expect(() => new TaskSubmitRequest({ userId: "u", threadId: "t", serverName: "s", taskName: "t", arguments: {}, ...override })).toThrow(message);
  });

  test("driver registry: names are trimmed, blank and duplicate names are refused, names() is sorted", () => {
    const registry = new McpTaskDriverRegistry();
    const driver = {} as McpTaskDriver;
    registry.register(" zeta ", driver);
    registry.register("alpha", driver);
    expect(() => registry.register("  ", driver)).toThrow("driver name must not be empty");
    expect(() => registry.register("zeta", driver)).toThrow("MCP task driver 'zeta' is already registered");
    expect(registry.get("zeta")).toBe(driver);
    expect(registry.get("missing")).toBeUndefined();
    expect(registry.names()).toEqual(["alpha", "zeta"]);
  });
});

describe("payload bounds (inventory §M 101)", () => {
  const bounds = { maxResultBytes: 1024, resultPreviewMaxChars: 64 };
  const big = (bytes: number) => ({ blob: "x".repeat(bytes - '{"blob":""}'.length) });

  test.each<[string, Partial<ConstructorParameters<typeof TaskSnapshot>[0]>, string]>([
    ["an artifact over 64 KiB", { result_artifact: { uri: "u".repeat(65_536) } }, "MCP task result_artifact payload exceeds the 65536-byte limit"],
    ["an input_required payload over 64 KiB", { status: "input_required", input_required: big(65_537) }, "MCP task input_required payload exceeds the 65536-byte limit"],
    ["input_required that is not JSON", { status: "input_required", input_required: { n: Number.NaN } }, "MCP task input_required is not valid JSON: it contains a non-finite number"],
    ["a result that is not JSON", { result: { f: () => 1 } }, "MCP task result is not valid JSON: it contains a value of type function"],
  ])("%s is a protocol error, never truncated", (_name, init, message) => {
    const snapshot = new TaskSnapshot({ status: "completed", ...init });
    expect(() => normalizeSnapshot(snapshot, bounds)).toThrow(McpTaskProtocolError);
    expect(() => normalizeSnapshot(snapshot, bounds)).toThrow(message);
  });

  test("payloads exactly at the limit are kept (multi-byte characters counted in UTF-8 bytes)", () => {
    const input = big(65_536);
    expect(normalizeSnapshot(new TaskSnapshot({ status: "input_required", input_required: input }), bounds).input_required).toEqual(input);
    const euro = { s: "€".repeat(21_843) }; // 3 bytes each: 65,529 + 8 = 65,537 bytes
    expect(() => normalizeSnapshot(new TaskSnapshot({ status: "input_required", input_required: euro }), bounds)).toThrow(McpTaskProtocolError);
  });

  test.each<[string, unknown, { result: unknown; result_truncated: boolean; result_preview: string | null }]>([
    ["a result within max_result_bytes is kept", { a: 1 }, { result: { a: 1 }, result_truncated: false, result_preview: null }],
    ["an oversized string result keeps its own first characters", "é".repeat(2000), { result: null, result_truncated: true, result_preview: "é".repeat(64) }],
    ["an oversized object keeps the start of its JSON", { k: "v".repeat(2000) }, { result: null, result_truncated: true, result_preview: `{"k":"${"v".repeat(58)}` }],
  ])("%s", (_name, result, expected) => {
    expect(normalizeSnapshot(new TaskSnapshot({ status: "completed", result }), bounds)).toMatchObject(expected);
  });

  test("the error is cut to 4,000 characters, never splitting a surrogate pair", () => {
    const out = normalizeSnapshot(new TaskSnapshot({ status: "failed", error: "😀".repeat(4_001) }), bounds);
    expect([...out.error!]).toHaveLength(4_000);
    expect(out.error!.endsWith("😀")).toBe(true);
  });
});
