import { z } from "zod";
import { headerNameProblem } from "../shared/headers";
import { MAX_TIMER_SECONDS } from "../shared/timers";

/**
 * The zod schema of `extensions_config.json`: the single source of the config's types.
 *
 * It accepts the Python original's file verbatim and the Claude-Desktop/Cursor `mcpServers` shape.
 * Objects that users extend (the root, servers, tool overrides, OAuth) are loose: unknown keys survive a
 * round trip. `routing` is strict.
 */

export const ROUTING_PRIORITY_MIN = 0;
export const ROUTING_PRIORITY_MAX = 100;
export const DEFAULT_SESSION_INIT_TIMEOUT_SECONDS = 60;
/** `tool_call_timeout` when the field is absent; `null` means no bound. */
export const DEFAULT_TOOL_CALL_TIMEOUT_SECONDS = 60;
/** The largest timeout a timer holds (2^31−1 ms, about 24.8 days); larger values would fire at once. */
export const MAX_TIMEOUT_SECONDS = MAX_TIMER_SECONDS;

export const TRANSPORT_TYPES = ["stdio", "sse", "http"] as const;
export type McpTransportType = (typeof TRANSPORT_TYPES)[number];

/** Spellings of streamable HTTP seen in other MCP clients' configs. */
const HTTP_ALIASES = new Set(["http", "streamable_http", "streamable-http", "streamableHttp", "streamablehttp"]);

export function normalizeTransportName(value: unknown): McpTransportType | undefined {
  if (typeof value !== "string" || value.trim() === "") return undefined;
  const v = value.trim();
  if (HTTP_ALIASES.has(v)) return "http";
  if (v === "stdio" || v === "sse") return v;
  return undefined;
}

/** An unset or blank `type`/`transport` declares nothing (the Python original's "falsy" test). */
export function isBlank(value: string | undefined): boolean {
  return value === undefined || value.trim() === "";
}

const clampPriority = (n: number) => Math.min(ROUTING_PRIORITY_MAX, Math.max(ROUTING_PRIORITY_MIN, n));

export const RoutingModeSchema = z.enum(["off", "prefer"]);

export const McpRoutingSchema = z.strictObject({
  mode: RoutingModeSchema.default("off"),
  priority: z.number().int().default(0).transform(clampPriority),
  keywords: z.array(z.string()).default([]),
});
export type McpRouting = z.output<typeof McpRoutingSchema>;

/** A per-tool override: only the fields it sets replace the server's routing. */
export const McpRoutingOverrideSchema = z.strictObject({
  mode: RoutingModeSchema.optional(),
  priority: z.number().int().transform(clampPriority).optional(),
  keywords: z.array(z.string()).optional(),
});
export type McpRoutingOverride = z.output<typeof McpRoutingOverrideSchema>;

export const McpToolOverrideSchema = z.looseObject({
  routing: McpRoutingOverrideSchema.optional(),
});

export const OnMissingSchema = z.enum(["deny", "passthrough"]);
export type OnMissing = z.output<typeof OnMissingSchema>;

export const McpOAuthSchema = z.looseObject({
  enabled: z.boolean().default(true),
  token_url: z.string().min(1),
  grant_type: z.enum(["client_credentials", "refresh_token"]).default("client_credentials"),
  client_id: z.string().nullish(),
  client_secret: z.string().nullish(),
  refresh_token: z.string().nullish(),
  scope: z.string().nullish(),
  audience: z.string().nullish(),
  token_field: z.string().min(1).default("access_token"),
  token_type_field: z.string().min(1).default("token_type"),
  expires_in_field: z.string().min(1).default("expires_in"),
  default_token_type: z.string().min(1).default("Bearer"),
  refresh_skew_seconds: z.number().min(0).default(60),
  extra_token_params: z.record(z.string(), z.string()).default({}),
});
export type McpOAuthConfig = z.output<typeof McpOAuthSchema>;

const headerNameSchema = z.string().superRefine((name, ctx) => {
  const problem = headerNameProblem(name);
  if (problem !== null) ctx.addIssue({ code: "custom", message: `header name ${problem}` });
});

export const McpUserAuthSchema = z.looseObject({
  header: headerNameSchema.default("Authorization"),
  users: z.record(z.string(), z.string()).default({}),
  on_missing: OnMissingSchema.default("deny"),
});
export type McpUserAuthConfig = z.output<typeof McpUserAuthSchema>;

export const McpHeadersFromContextSchema = z
  .looseObject({
    headers: z.record(headerNameSchema, z.string().min(1)).default({}),
    on_missing: OnMissingSchema.default("deny"),
  })
  .superRefine((value, ctx) => {
    const seen = new Map<string, string>();
    for (const name of Object.keys(value.headers)) {
      const lower = name.toLowerCase();
      const previous = seen.get(lower);
      if (previous !== undefined) {
        ctx.addIssue({
          code: "custom",
          path: ["headers", name],
          message: `names header '${previous}' twice (as '${previous}' and '${name}'); header names are case-insensitive`,
        });
      }
      seen.set(lower, name);
    }
  });
export type McpHeadersFromContextConfig = z.output<typeof McpHeadersFromContextSchema>;

export const MCP_TASK_NAME_MAX_LENGTH = 255;
export const MCP_TASK_SERVER_NAME_MAX_LENGTH = 128;

export const McpTaskToolsetSchema = z.strictObject({
  name: z
    .string()
    .max(MCP_TASK_NAME_MAX_LENGTH)
    .refine((s) => s.trim().length > 0, "MCP task toolset name must not be empty"),
  submit_tool: z.string().min(1),
  status_tool: z.string().min(1),
  cancel_tool: z.string().min(1),
});
export type McpTaskToolset = z.output<typeof McpTaskToolsetSchema>;

const timeoutSeconds = z
  .number()
  .positive()
  .max(MAX_TIMEOUT_SECONDS, `must be at most ${MAX_TIMEOUT_SECONDS} seconds (about 24.8 days); use null for no bound`);

export const McpServerSchema = z
  .looseObject({
    enabled: z.boolean().default(true),
    type: z.string().optional(),
    transport: z.string().optional(),
    command: z.string().optional(),
    args: z.array(z.string()).default([]),
    env: z.record(z.string(), z.string()).default({}),
    cwd: z.string().optional(),
    url: z.string().optional(),
    headers: z.record(z.string(), z.string()).default({}),
    oauth: McpOAuthSchema.nullish(),
    user_auth: McpUserAuthSchema.nullish(),
    headers_from_context: McpHeadersFromContextSchema.nullish(),
    description: z.string().default(""),
    routing: McpRoutingSchema.default({ mode: "off", priority: 0, keywords: [] }),
    tools: z.record(z.string(), McpToolOverrideSchema).default({}),
    tool_name_prefix: z.boolean().default(true),
    session_init_timeout: timeoutSeconds.nullable().default(DEFAULT_SESSION_INIT_TIMEOUT_SECONDS),
    /** Seconds without a result or a progress notification; each progress notification restarts the count. */
    tool_call_timeout: timeoutSeconds.nullable().default(DEFAULT_TOOL_CALL_TIMEOUT_SECONDS),
    /** Hard cap in seconds on a call however often progress extends it; absent or `null`: no cap. */
    max_total_timeout: timeoutSeconds.nullish(),
    task_toolsets: z.array(McpTaskToolsetSchema).default([]),
  })
  .superRefine((server, ctx) => {
    const typeIsSet = !isBlank(server.type);
    const declared = typeIsSet ? server.type : isBlank(server.transport) ? undefined : server.transport;
    // As in the Python original, only a server that is started is held to a known transport: a disabled entry
    // for a transport this version lacks must not fail the whole file.
    if (server.enabled && declared !== undefined && normalizeTransportName(declared) === undefined) {
      ctx.addIssue({
        code: "custom",
        path: [typeIsSet ? "type" : "transport"],
        message: `unsupported transport type; expected one of ${TRANSPORT_TYPES.join(", ")}`,
      });
    }
    const roles = new Map<string, string>();
    server.task_toolsets.forEach((toolset, index) => {
      for (const role of ["submit_tool", "status_tool", "cancel_tool"] as const) {
        const raw = toolset[role];
        const previous = roles.get(raw);
        if (previous !== undefined) {
          ctx.addIssue({
            code: "custom",
            path: ["task_toolsets", index, role],
            message: `MCP task tool '${raw}' must be unique across task_toolsets and roles; it is configured as both ${previous} and ${toolset.name}.${role}`,
          });
        }
        roles.set(raw, `${toolset.name}.${role}`);
      }
    });
  })
  .transform((server) => ({ ...server, type: resolveTransport(server) }));
export type McpServerConfig = z.output<typeof McpServerSchema>;
export type McpServerConfigInput = z.input<typeof McpServerSchema>;

/**
 * `type` wins over the MCP-spec key `transport`. With neither, a `url` without `command` means
 * streamable HTTP (the Claude-Desktop remote shape); anything else is stdio.
 */
export function resolveTransport(server: {
  type?: string;
  transport?: string;
  url?: string;
  command?: string;
}): McpTransportType {
  const declared = normalizeTransportName(server.type) ?? normalizeTransportName(server.transport);
  if (declared) return declared;
  if (server.url !== undefined && server.command === undefined) return "http";
  return "stdio";
}

export const McpTasksSettingsSchema = z.looseObject({
  enabled: z.boolean().default(false),
  poll_interval_seconds: z.number().min(1).max(300).default(5),
  lease_seconds: z.number().min(5).max(3600).default(120),
  max_concurrent_polls: z.number().int().min(1).max(64).default(8),
  max_poll_backoff_seconds: z.number().min(1).max(3600).default(300),
  input_required_poll_interval_seconds: z.number().min(5).max(3600).default(60),
  tracking_degraded_after_errors: z.number().int().min(1).max(100).default(3),
  max_result_bytes: z.number().int().min(1024).max(10_485_760).default(65_536),
  result_preview_max_chars: z.number().int().min(64).max(100_000).default(2000),
});
export type McpTasksSettings = z.output<typeof McpTasksSettingsSchema>;

export const ExtensionsConfigSchema = z
  .looseObject({
    mcpServers: z.record(z.string(), McpServerSchema).default({}),
    mcpInterceptors: z.union([z.string(), z.array(z.string())]).nullish(),
    skills: z.record(z.string(), z.unknown()).default({}),
    middlewares: z.array(z.string()).default([]),
    mcpTasks: McpTasksSettingsSchema.default({
      enabled: false,
      poll_interval_seconds: 5,
      lease_seconds: 120,
      max_concurrent_polls: 8,
      max_poll_backoff_seconds: 300,
      input_required_poll_interval_seconds: 60,
      tracking_degraded_after_errors: 3,
      max_result_bytes: 65_536,
      result_preview_max_chars: 2000,
    }),
  })
  .superRefine((config, ctx) => {
    for (const [name, server] of Object.entries(config.mcpServers)) {
      if (server.task_toolsets.length > 0 && (name.trim() === "" || name.length > MCP_TASK_SERVER_NAME_MAX_LENGTH)) {
        ctx.addIssue({
          code: "custom",
          path: ["mcpServers", name],
          message: `MCP task server name must contain 1 to ${MCP_TASK_SERVER_NAME_MAX_LENGTH} characters`,
        });
      }
    }
  });
export type ExtensionsConfig = z.output<typeof ExtensionsConfigSchema>;
export type ExtensionsConfigInput = z.input<typeof ExtensionsConfigSchema>;
