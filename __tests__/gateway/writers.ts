/**
 * Config writers for the concurrency test: `writers` loops of `ops` requests each, in parallel, against
 * one gateway app instance on `configPath`. Even steps PUT a whole server list unique to the step, odd
 * steps PATCH the shared server. Run in the test's process and, as a script, in a child process.
 */
import { readFile } from "node:fs/promises";
import { createGatewayApp } from "../../lib";
import { withConfigWriteLock } from "../../lib/gateway/file-lock";
import { atomicWriteFile } from "../../lib/gateway/write";

export interface WriterSummary {
  statuses: Record<string, number>;
  /** The server lists this process PUT (each one a possible final state). */
  bodies: Record<string, unknown>[];
}

export function putBody(tag: string, writer: number, op: number): Record<string, unknown> {
  return {
    shared: { command: "npx", args: ["-y", "@scope/shared"], env: { TOKEN: "$SHARED_TOKEN" } },
    [`${tag}_${writer}_${op}`]: { url: `https://example.com/${tag}/${writer}/${op}`, headers: { Authorization: "Bearer ${TOKEN}" } },
  };
}

export async function runWriters(configPath: string, tag: string, writers: number, ops: number): Promise<WriterSummary> {
  const app = createGatewayApp({ configPath, env: {}, authorize: () => ({ userId: "admin", admin: true }), lock: { timeoutMs: 30_000 } });
  const statuses: Record<string, number> = {};
  const bodies: Record<string, unknown>[] = [];
  await Promise.all(
    Array.from({ length: writers }, async (_unused, writer) => {
      for (let op = 0; op < ops; op++) {
        let response: Response;
        if (op % 2 === 0) {
          const servers = putBody(tag, writer, op);
          bodies.push(servers);
          response = await app.request("/api/mcp/config", { method: "PUT", body: JSON.stringify({ mcp_servers: servers }) });
        } else {
          response = await app.request("/api/mcp/config", { method: "PATCH", body: JSON.stringify({ server_name: "shared", enabled: op % 4 === 1 }) });
        }
        await response.arrayBuffer();
        statuses[response.status] = (statuses[response.status] ?? 0) + 1;
      }
    }),
  );
  return { statuses, bodies };
}

/** `writers` loops of `ops` read-modify-write increments of `{count}` under both write locks. */
export async function incrementCounter(file: string, writers: number, ops: number): Promise<void> {
  await Promise.all(
    Array.from({ length: writers }, async () => {
      for (let op = 0; op < ops; op++) {
        await withConfigWriteLock(
          file,
          async () => {
            const current = JSON.parse(await readFile(file, "utf8")) as { count: number };
            await atomicWriteFile(file, JSON.stringify({ count: current.count + 1 }));
          },
          { timeoutMs: 30_000 },
        );
      }
    }),
  );
}

if (require.main === module) {
  const [configPath, tag, writers, ops] = process.argv.slice(2);
  const run =
    tag === "counter"
      ? incrementCounter(configPath ?? "", Number(writers), Number(ops)).then(() => ({ statuses: {}, bodies: [] }))
      : runWriters(configPath ?? "", tag ?? "child", Number(writers), Number(ops));
  run.then(
    (summary) => process.stdout.write(JSON.stringify(summary)),
    (error: unknown) => {
      process.stderr.write(String(error));
      process.exit(1);
    },
  );
}
