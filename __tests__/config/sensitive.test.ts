/**
 * Credentials written literally into a stdio launch become secrets of the server (redacted from everything it
 * answers): env values under a credential name and the values of credential flags, but not settings about a
 * credential, and not values too common to blank out of every result.
 */
import { describe, expect, test } from "@jest/globals";
import { isSensitiveKey, launchCredentials, urlCredentials } from "../../lib/config";
import { libModule, workerRunner } from "../fixtures/worker";

describe("launchCredentials", () => {
  test("env values whose name ends in a credential word; settings about a credential and common values are not", () => {
    const env = {
      GITHUB_TOKEN: "ghp_abc123",
      OPENAI_API_KEY: "sk-x1y2",
      AWS_SECRET_ACCESS_KEY: "wJalrXUt",
      DB_PASSWORD: "hunter22",
      githubPat: "pat-1234",
      PGPASSWORD: "pg-pw-1",
      MYSQL_PWD: "my-pw-2",
      SECRET_KEY_BASE: "skb-3",
      PWD: "/srv/app",
      OLDPWD: "/srv",
      PASSWORD_FILE: "/run/secrets/pw",
      TOKEN_TTL: "3600",
      AUTH_TYPE: "basic",
      TOKEN_FILE: "/run/secrets/token",
      ENABLE_TOKEN: "1",
      USE_API_KEY: "true",
      NODE_ENV: "production",
      PATH: "/usr/bin",
    };
    expect(launchCredentials(env, [])).toEqual(["ghp_abc123", "sk-x1y2", "wJalrXUt", "hunter22", "pat-1234", "pg-pw-1", "my-pw-2", "skb-3"]);
  });

  test("the value of a credential flag, joined by '=' or as the next argument", () => {
    const args = [
      "server.js",
      "--api-key=K1abc",
      "--token",
      "T2abcd",
      "-p",
      "8080",
      "--token-file",
      "/run/token",
      "--no-token",
      "/data",
      "--client-secret=",
      "--password",
      "--verbose",
      "--auth-token=on",
    ];
    expect(launchCredentials({}, args)).toEqual(["K1abc", "T2abcd"]);
  });

  test("nothing without env or args", () => {
    expect(launchCredentials(undefined, undefined)).toEqual([]);
  });
});

test("isSensitiveKey (the config API's masking) matches any credential word in the name", () => {
  expect(["refreshToken", "x-api-key", "AUTH_TYPE", "clientSecret"].map(isSensitiveKey)).toEqual([true, true, true, true]);
  expect(["command", "timeout", "tokenizer"].map(isSensitiveKey)).toEqual([false, false, false]);
});

describe("urlCredentials", () => {
  test("a URL's password, a long user name without one, and credential query values; not other parts", () => {
    expect(urlCredentials("postgresql://app:s3cr%2Ft@db.example:5432/app?sslmode=require")).toEqual(["s3cr/t"]);
    expect(urlCredentials("https://ghp_0123456789abcdefghij@github.com/org/repo.git")).toEqual(["ghp_0123456789abcdefghij"]);
    expect(urlCredentials("https://alice@example.com/x")).toEqual([]);
    // Ordinary parameters and a long plain user name of a database URL are not credentials.
    expect(urlCredentials("https://api.example.com/q?sort_key=created_at&partition_key=customers&public_key=pk_live_12345678")).toEqual([]);
    expect(urlCredentials("postgres://analytics_readonly_service@db.example/warehouse")).toEqual([]);
    expect(urlCredentials("https://mcp.example.com/sse?api_key=k-1234&region=eu&access_token=t%2B5678&sig=abcd%3D&token_ttl=3600")).toEqual([
      "k-1234",
      "t+5678",
      "abcd=",
    ]);
    // Inside a longer value (DATABASE_URL=…, a flag), several URLs; common values are not taken.
    expect(urlCredentials("--db=mysql://u:pw-123@h/d and redis://:r3dis@cache:6379?token=true")).toEqual(["pw-123", "r3dis"]);
    expect(urlCredentials("no url here")).toEqual([]);
    expect(urlCredentials(undefined)).toEqual([]);
  });
});

// No timer: the work runs in a worker, so one that does not end fails the test at its timeout instead of blocking it. A
// config reaches these through the gateway's config API too (a body of up to 1 MiB), and one request held every other.
describe("config keys and values are read in linear time", () => {
  const run = workerRunner();
  const inWorker = (call: string) =>
    run(`const { isSensitiveKey, urlCredentials } = require(workerData.module);\n parentPort.postMessage(${call});`, { module: libModule("config/sensitive.ts") });

  test("a key of 500,000 capitals that no lower-case letter ends", async () => {
    expect(await inWorker(`[isSensitiveKey("A".repeat(500000)), isSensitiveKey("A".repeat(500000) + "_TOKEN")]`)).toEqual([false, true]);
  });

  test("a value of 500,000 scheme characters without ://, then a URL", async () => {
    expect(await inWorker(`urlCredentials("a".repeat(500000) + " https://u:pw-123@h/x")`)).toEqual(["pw-123"]);
  });
});
