/**
 * A tool failure whose message this project wrote and vetted (no secret values): the call path hands it to
 * the model as it is. Named "ToolException" like LangChain's, so tool error handlers treat it the same way.
 */
export class McpToolCallError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ToolException";
  }
}
