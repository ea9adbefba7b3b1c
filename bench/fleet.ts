/** Starts N HTTP fixture servers in their own process (as remote servers would be) and prints their URLs. */
import { startHttpFixture } from "../__tests__/fixtures/http-server";

async function main(): Promise<void> {
  const count = Number(process.argv[2] ?? 20);
  const initDelayMs = Number(process.argv[3] ?? 200);
  const servers = await Promise.all(
    Array.from({ length: count }, (_, i) => startHttpFixture({ name: `s${i}`, toolNames: ["echo"], initDelayMs })),
  );
  process.stdout.write(`${JSON.stringify(servers.map((s) => s.url))}\n`);
  const stop = () => void Promise.all(servers.map((s) => s.close())).then(() => process.exit(0));
  process.stdin.on("end", stop);
  process.stdin.resume();
  process.on("SIGTERM", stop);
}

void main();
