import { existsSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, test } from "@jest/globals";
import { openTaskStore, TaskStoreConfigError } from "../../../lib/tasks";
import { makeTempDir } from "../../fixtures/config";
import { PG_URL } from "./helpers";

const SECRET = "s3cret-Passw0rd";

async function failure(env: NodeJS.ProcessEnv): Promise<Error> {
  const err = await openTaskStore({ env, cwd: await makeTempDir("mcp-open-") }).then(
    () => new Error("opened"),
    (e: unknown) => e as Error,
  );
  expect(err).toBeInstanceOf(TaskStoreConfigError);
  expect(err.message).toContain("MCP_HARNESS_DATABASE_URL");
  expect(err.message).not.toContain(SECRET);
  return err;
}

describe("opening the store", () => {
  test("the default is <data dir>/tasks.sqlite, its folder created", async () => {
    const cwd = await makeTempDir("mcp-open-");
    const store = await openTaskStore({ env: { MCP_HARNESS_DATA_DIR: "data/here" }, cwd });
    expect(store.dialect).toBe("sqlite");
    await store.close();
    expect(existsSync(path.join(cwd, "data/here/tasks.sqlite"))).toBe(true);
  });

  test("a dataDir option wins over MCP_HARNESS_DATA_DIR for the default file", async () => {
    const cwd = await makeTempDir("mcp-open-");
    const store = await openTaskStore({ env: { MCP_HARNESS_DATA_DIR: "data/env" }, cwd, dataDir: "data/option" });
    await store.close();
    expect(existsSync(path.join(cwd, "data/option/tasks.sqlite"))).toBe(true);
    expect(existsSync(path.join(cwd, "data/env"))).toBe(false);
  });

  test("an explicit SQLite path whose folder is missing fails clearly instead of creating it", async () => {
    const err = await failure({ MCP_HARNESS_DATABASE_URL: "sqlite:./no/such/folder/tasks.sqlite" });
    expect(err.message).toMatch(/folder .*no\/such\/folder does not exist/);
  });

  test.each([
    ["an unknown scheme", `mysql://root:${SECRET}@localhost/db`, /must be sqlite:<path> or postgres:/],
    ["in-memory SQLite", "sqlite::memory:", /in-memory SQLite database; durable tasks need a file/],
    ["a URL without a database", `postgres://u:${SECRET}@127.0.0.1:5432/`, /must name one database/],
    ["an unsupported parameter", `postgres://u:${SECRET}@127.0.0.1/db?password=${SECRET}`, /unsupported parameter 'password'/],
    // Read as host "ss", database "db" and a parameter named with the rest of the password.
    ["a password not percent-encoded", `postgres://u:p@ss/db?${SECRET}@127.0.0.1/db`, /user info that is not percent-encoded/],
    ["a refused connection", `postgres://u:${SECRET}@127.0.0.1:1/db`, /cannot connect to PostgreSQL at postgres:\/\/u@127\.0\.0\.1:1\/db: connection refused/],
  ])("%s fails naming the variable, never the password", async (_name, url, message) => {
    expect((await failure({ MCP_HARNESS_DATABASE_URL: url })).message).toMatch(message);
  });

  (PG_URL ? test : test.skip)("PostgreSQL refusing the login (a role that does not exist, with a password) fails clearly", async () => {
    const url = new URL(PG_URL!);
    url.username = "no_such_role";
    url.password = SECRET;
    const err = await failure({ MCP_HARNESS_DATABASE_URL: url.toString() });
    expect(err.message).toMatch(/cannot connect to PostgreSQL at postgres:\/\/no_such_role@.*: the server rejected the login/);
  });
});
