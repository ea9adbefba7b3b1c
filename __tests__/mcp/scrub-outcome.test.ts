/**
 * What an interceptor hands back is scrubbed of the call's secrets wherever it can reach the thread: a result, a
 * ToolMessage, and everything a Command carries into state or to a node (update in any shape, any message
 * class, Send args, resume).
 */
import { describe, expect, test } from "@jest/globals";
import { AIMessage, AIMessageChunk, ChatMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { Command, Overwrite, Send } from "@langchain/langgraph";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { scrubAcrossTextBlocks, scrubOutcome } from "../../lib/mcp/scrub-outcome";
import { Redactor, REDACTED } from "../../lib/shared";
import { libModule, workerRunner } from "../fixtures/worker";

const SECRET = "s3cr-tok";
const PIN = "482913";
const redactor = Redactor.of([SECRET, PIN]);
const R = "[redacted]";

function scrubbedCommand(command: Command): Command {
  const out = scrubOutcome(command, redactor);
  expect(out).toBeInstanceOf(Command);
  return out as Command;
}

function toolMessage(content: string): ToolMessage {
  return new ToolMessage({ content, artifact: { token: SECRET }, tool_call_id: "call-1", name: "remote_echo", id: "tm-1" });
}

describe("scrubOutcome", () => {
  test("a result: strings and numbers holding a secret", () => {
    const result: CallToolResult = { content: [{ type: "text", text: `key ${SECRET}` }], structuredContent: { pin: 482913, n: 7 } };
    expect(scrubOutcome(result, redactor)).toEqual({ content: [{ type: "text", text: `key ${R}` }], structuredContent: { pin: R, n: 7 } });
  });

  test("a ToolMessage: content, artifact, kwargs and metadata scrubbed; id, tool_call_id, name and status kept", () => {
    const message = new ToolMessage({
      content: `key ${SECRET}`,
      artifact: { pin: 482913 },
      tool_call_id: "call-1",
      name: "remote_echo",
      status: "error",
      id: "tm-1",
      additional_kwargs: { raw: SECRET },
      response_metadata: { header: `Bearer ${SECRET}` },
    });
    const out = scrubOutcome(message, redactor) as ToolMessage;
    expect(ToolMessage.isInstance(out)).toBe(true);
    expect(out).toMatchObject({ content: `key ${R}`, artifact: { pin: R } });
    expect(out).toMatchObject({ tool_call_id: "call-1", name: "remote_echo", status: "error", id: "tm-1" });
    expect(out.additional_kwargs).toEqual({ raw: R });
    expect(out.response_metadata).toEqual({ header: `Bearer ${R}` });
    expect(JSON.stringify(out)).not.toContain(SECRET);
  });

  test("a byte array whose bytes spell a secret, in a Command's update (a checkpoint's JSON shows its bytes)", () => {
    const bytes = new Uint8Array(Buffer.from(`key ${SECRET}`));
    const kept = new Uint8Array(Buffer.from("nothing"));
    const out = scrubbedCommand(new Command({ update: { blob: bytes, other: kept } }));
    expect(out.update).toEqual({ blob: R, other: kept });
    expect((out.update as Record<string, unknown>).other).toBe(kept);
  });

  test("update.messages as a single ToolMessage, not in an array", () => {
    const out = scrubbedCommand(new Command({ update: { messages: toolMessage(`key ${SECRET}`) } }));
    const message = (out.update as { messages: ToolMessage }).messages;
    expect(ToolMessage.isInstance(message)).toBe(true);
    expect(message.content).toBe(`key ${R}`);
    expect(message.artifact).toEqual({ token: R });
    expect(message.tool_call_id).toBe("call-1");
  });

  test("update.messages in an array, as before", () => {
    const out = scrubbedCommand(new Command({ update: { messages: [toolMessage(`key ${SECRET}`)] } }));
    expect((out.update as { messages: ToolMessage[] }).messages[0].content).toBe(`key ${R}`);
  });

  test("update as [key, value] pairs: every value scrubbed, keys and order kept", () => {
    const out = scrubbedCommand(new Command({ update: [["messages", [toolMessage(SECRET)]], ["copied", { token: SECRET, pin: 482913 }]] }));
    const update = out.update as [string, unknown][];
    expect(update.map(([key]) => key)).toEqual(["messages", "copied"]);
    expect((update[0][1] as ToolMessage[])[0].content).toBe(R);
    expect(update[1][1]).toEqual({ token: R, pin: R });
  });

  test("any other state key, at any depth; its key is kept", () => {
    const copied = { headers: { Authorization: `Bearer ${SECRET}` }, list: [SECRET, 482913, 5] };
    const out = scrubbedCommand(new Command({ update: { copied, plain: `x ${SECRET}` } }));
    expect(out.update).toEqual({ copied: { headers: { Authorization: `Bearer ${R}` }, list: [R, R, 5] }, plain: `x ${R}` });
  });

  test("an AIMessage: class and id kept, content, kwargs, metadata and tool call args scrubbed", () => {
    const ai = new AIMessage({
      id: "ai-1",
      content: `said ${SECRET}`,
      tool_calls: [{ name: "remote_echo", args: { text: SECRET }, id: "call-9", type: "tool_call" }],
      additional_kwargs: { quoted: SECRET },
      response_metadata: { model: "m", echoed: SECRET },
    });
    const out = scrubbedCommand(new Command({ update: { messages: [ai], note: ai } }));
    for (const message of [(out.update as { messages: AIMessage[] }).messages[0], (out.update as { note: AIMessage }).note]) {
      expect(AIMessage.isInstance(message)).toBe(true);
      expect(message.id).toBe("ai-1");
      expect(message.content).toBe(`said ${R}`);
      expect(message.tool_calls).toEqual([{ name: "remote_echo", args: { text: R }, id: "call-9", type: "tool_call" }]);
      expect(message.additional_kwargs).toEqual({ quoted: R });
      expect(message.response_metadata).toEqual({ model: "m", echoed: R });
      expect(JSON.stringify(message)).not.toContain(SECRET);
    }
  });

  test("other message classes (Human, Chat, AIMessageChunk) keep their class and fields", () => {
    const human = new HumanMessage({ content: [{ type: "text", text: SECRET }], id: "h-1", name: "ann" });
    const chat = new ChatMessage({ content: `c ${SECRET}`, role: "critic", id: "c-1" });
    const chunk = new AIMessageChunk({
      content: SECRET,
      id: "k-1",
      tool_call_chunks: [{ name: "remote_echo", args: `{"text":"${SECRET}"}`, id: "call-3", index: 0, type: "tool_call_chunk" }],
    });
    const out = scrubbedCommand(new Command({ update: { messages: [human, chat, chunk] } }));
    const [h, c, k] = (out.update as { messages: BaseMessage[] }).messages;
    expect(HumanMessage.isInstance(h)).toBe(true);
    expect(h).toMatchObject({ id: "h-1", name: "ann", content: [{ type: "text", text: R }] });
    expect(ChatMessage.isInstance(c)).toBe(true);
    expect(c).toMatchObject({ id: "c-1", role: "critic", content: `c ${R}` });
    expect(AIMessageChunk.isInstance(k)).toBe(true);
    expect((k as AIMessageChunk).tool_call_chunks?.[0]).toMatchObject({ args: `{"text":"${R}"}`, id: "call-3", index: 0 });
    expect((k as AIMessageChunk).tool_calls?.[0]).toMatchObject({ args: { text: R }, id: "call-3" });
    expect(JSON.stringify([h, c, k])).not.toContain(SECRET);
  });

  test("plain-object messages", () => {
    const out = scrubbedCommand(new Command({ update: { messages: [{ role: "tool", content: `k ${SECRET}`, tool_call_id: "call-1" }] } }));
    expect(out.update).toEqual({ messages: [{ role: "tool", content: `k ${R}`, tool_call_id: "call-1" }] });
  });

  test("goto: a Send's args scrubbed (node and timeout kept), node names kept", () => {
    const command = new Command({
      goto: [new Send("audit", { headers: { "X-Key": SECRET }, message: toolMessage(SECRET) }, { timeout: 5000 }), "next"],
      graph: Command.PARENT,
    });
    const out = scrubbedCommand(command);
    expect(out.graph).toBe(Command.PARENT);
    const [send, name] = out.goto as [Send, string];
    expect(send).toBeInstanceOf(Send);
    expect(send.node).toBe("audit");
    expect(send.timeout).toEqual(command.goto && (command.goto as Send[])[0].timeout);
    expect((send.args as { headers: object }).headers).toEqual({ "X-Key": R });
    expect(ToolMessage.isInstance((send.args as { message: unknown }).message)).toBe(true);
    expect(name).toBe("next");
    expect(JSON.stringify(out)).not.toContain(SECRET);
  });

  test("a single Send as goto", () => {
    const out = scrubbedCommand(new Command({ goto: new Send("audit", `pin ${PIN}`) }));
    expect((out.goto as Send[])[0].args).toBe(`pin ${R}`);
  });

  test("resume, and an Overwrite value", () => {
    const out = scrubbedCommand(new Command({ resume: { answer: SECRET, pin: 482913 }, update: { copied: new Overwrite([SECRET]) } }));
    expect(out.resume).toEqual({ answer: R, pin: R });
    const overwrite = (out.update as { copied: Overwrite<string[]> }).copied;
    expect(overwrite).toBeInstanceOf(Overwrite);
    expect(overwrite.value).toEqual([R]);
  });

  test("a Command with nothing to scrub is returned as it is", () => {
    const command = new Command({ update: { messages: [new AIMessage("fine")], n: 1 }, goto: new Send("a", { b: "c" }), resume: "ok" });
    expect(scrubOutcome(command, redactor)).toBe(command);
  });
});

describe("scrubAcrossTextBlocks", () => {
  const text = (t: string) => ({ type: "text" as const, text: t });
  const shown = (result: CallToolResult) => result.content.map((item) => (item as { text: string }).text);

  test("a secret cut over three text blocks is blanked in each; blocks without it are kept", () => {
    const redactor = Redactor.of(["sk-live-9f8e7d6c5b4a"]);
    const result = { content: [text("first"), text("key sk-live"), text("-9f8e7d6"), text("c5b4a and more words here"), text("last")] };
    const scrubbed = shown(scrubAcrossTextBlocks(result, redactor));
    expect(scrubbed.join("")).not.toMatch(/9f8e|7d6|c5b4/);
    expect(scrubbed[0]).toBe("first");
    expect(scrubbed[4]).toBe("last");
    expect(scrubbed.join("")).toContain(REDACTED);
  });

  test("a secret that starts and ends with characters REDACTED has keeps none of them", () => {
    const redactor = Redactor.of(["[rsecret-tok]"]);
    expect(shown(scrubAcrossTextBlocks({ content: [text("see [rsecr"), text("et-tok] ok")] }, redactor))).toEqual([`see ${REDACTED}`, " ok"]);
  });

  test("a secret whose last character alone is in the next block, or that starts a block and ends in the next", () => {
    const redactor = Redactor.of(["sk-live-9f8e7d"]);
    expect(shown(scrubAcrossTextBlocks({ content: [text("got sk-live-9f8e7"), text("d end")] }, redactor))).toEqual([`got ${REDACTED}`, " end"]);
    expect(shown(scrubAcrossTextBlocks({ content: [text("got "), text("sk-live-9f8"), text("e7d end")] }, redactor))).toEqual(["got ", REDACTED, " end"]);
  });

  test("a result whose blocks hold no secret between them is returned as it is", () => {
    const result = { content: [text("key sk-live"), text("nothing else")] };
    expect(scrubAcrossTextBlocks(result, Redactor.of(["sk-live-9f8e7d6c5b4a"]))).toBe(result);
  });
});

// No timer: the scrub runs in a worker, so one that does not end fails the test at its timeout instead of blocking it.
describe("scrubAcrossTextBlocks in linear time", () => {
  const inWorker = workerRunner();

  // Each secret found was placed in its block by a walk from the first block, and each block read every secret that
  // crosses a boundary: 40,000 blocks held the event loop ~50 s (a server streaming its output a line per block).
  test("80,000 text blocks, each holding a secret's end and the next one's start", async () => {
    const seen = await inWorker(
      `const { scrubAcrossTextBlocks } = require(workerData.module);
       const { Redactor } = require(workerData.shared);
       const blocks = Array.from({ length: 80000 }, () => ({ type: "text", text: "-tok; s3cr" }));
       const texts = scrubAcrossTextBlocks({ content: blocks }, Redactor.of(["s3cr-tok"])).content.map((block) => block.text);
       parentPort.postMessage([texts.length, texts[0], texts[1], texts[79999], new Set(texts.slice(1, -1)).size]);`,
      { module: libModule("mcp/scrub-outcome.ts"), shared: libModule("shared/index.ts") },
    );
    expect(seen).toEqual([80000, `-tok; ${REDACTED}`, `; ${REDACTED}`, "; s3cr", 1]);
  });
});
