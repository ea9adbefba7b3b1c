import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv-provider.js";
import type { JsonSchemaType, JsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/types.js";
import { boundText } from "../shared/text";

const REASON_MAX_CHARS = 300;

let ajv: AjvJsonSchemaValidator | undefined;

/**
 * The output schemas a server's tools declared when they were listed, checked against every result as the SDK's
 * `Client.callTool` checks them, but on every session alike: the SDK checks only on the client that ran `tools/list`
 * (here, discovery's session), so the same result failed on one header set's session and passed on another's.
 * A schema is compiled on its tool's first call; one that does not compile is not checked.
 */
export class OutputSchemas {
  private readonly schemas = new Map<string, JsonSchemaType>();
  private readonly compiled = new Map<string, JsonSchemaValidator<unknown> | null>();

  constructor(tools: readonly Tool[]) {
    // A name listed twice keeps its first definition, as the tool does.
    for (const tool of tools) if (tool.outputSchema && !this.schemas.has(tool.name)) this.schemas.set(tool.name, tool.outputSchema as JsonSchemaType);
  }

  /** Why `result` of tool `name` breaks the tool's output schema, or `undefined` (no schema, an error result, valid). */
  violation(name: string, result: CallToolResult): string | undefined {
    if (result.isError === true) return undefined;
    const check = this.validator(name);
    if (!check) return undefined;
    if (result.structuredContent === undefined) return "its result has no structuredContent, which its output schema requires";
    const { valid, errorMessage } = check(result.structuredContent);
    return valid ? undefined : `its structuredContent does not match its output schema (${boundText(errorMessage ?? "invalid", REASON_MAX_CHARS)})`;
  }

  private validator(name: string): JsonSchemaValidator<unknown> | null | undefined {
    let check = this.compiled.get(name);
    if (check !== undefined) return check;
    const schema = this.schemas.get(name);
    if (schema === undefined) return undefined;
    try {
      check = (ajv ??= new AjvJsonSchemaValidator()).getValidator<unknown>(schema);
    } catch {
      check = null;
    }
    this.compiled.set(name, check);
    return check;
  }
}
