import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv-provider.js";
import type { JsonSchemaType, JsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/types.js";

/**
 * The output schemas a server's tools declared when they were listed, checked against every result as the SDK's
 * `Client.callTool` checks them, but on every session alike: the SDK checks only on the client that ran `tools/list`
 * (here, discovery's session), so the same result failed on one header set's session and passed on another's.
 * A schema is compiled on its tool's first call, by a compiler of its own (the SDK's reuses the first schema compiled
 * under an `$id` for every later one: another tool's, another server's, an older generation's); one that does not
 * compile is not checked.
 */
export class OutputSchemas {
  private readonly schemas = new Map<string, JsonSchemaType | undefined>();
  private readonly compiled = new Map<string, JsonSchemaValidator<unknown> | null>();

  /** `tools`: each listed tool's name and output schema as the server listed it (not scrubbed). */
  constructor(tools: readonly Pick<Tool, "name" | "outputSchema">[]) {
    // A name listed twice keeps its first definition, as the tool does, with or without a schema.
    for (const tool of tools) if (!this.schemas.has(tool.name)) this.schemas.set(tool.name, tool.outputSchema as JsonSchemaType | undefined);
  }

  /**
   * Why `result` of tool `name` breaks the tool's output schema, or `undefined` (no schema, an error result, valid).
   * The reason may quote the result's keys (a JSON pointer, `~1` for `/`): the caller scrubs it before showing it.
   */
  violation(name: string, result: CallToolResult): string | undefined {
    if (result.isError === true) return undefined;
    const check = this.validator(name);
    if (!check) return undefined;
    const structured: unknown = result.structuredContent;
    if (structured === undefined) return "its result has no structuredContent, which its output schema requires";
    const { valid, errorMessage } = check(structured);
    return valid ? undefined : `its structuredContent does not match its output schema (${errorMessage ?? "invalid"})`;
  }

  private validator(name: string): JsonSchemaValidator<unknown> | null | undefined {
    let check = this.compiled.get(name);
    if (check !== undefined) return check;
    const schema = this.schemas.get(name);
    if (schema === undefined) return undefined;
    try {
      // A compiler per schema: the SDK's hands back the first schema it compiled under an `$id` for every later one.
      check = new AjvJsonSchemaValidator().getValidator<unknown>(schema);
    } catch {
      check = null;
    }
    this.compiled.set(name, check);
    return check;
  }
}
