/**
 * Redaction of a per-request secret that is new on every call (a rotating short-lived token): what building and first
 * using its patterns costs. Each side gets a fresh secret per sample, scrubs a tool result the way one call does (five
 * texts), and the sides run round-robin in one process: against the same secret every time (its patterns built once),
 * and against the patterns written as before their compile-time shortcuts (`Redactor.reference`, never cached). A
 * lasting secret on a long result against the same. Then a new secret through the built toolkit's call path (HTTP echo
 * of the result; the secret reaches only the redactor).
 */
import { randomBytes } from "node:crypto";
import { createMcpToolkit, silentLogger } from "./built";
import { Redactor } from "../dist/cjs/shared/redact.cjs";
import { makeTempDir, writeConfig } from "../__tests__/fixtures/config";
import { startHttpFixture } from "../__tests__/fixtures/http-server";
import { fmtMs, median, roundRobin, type Row } from "./stats";

const SAMPLES = Number(process.env.BENCH_REDACTION_SAMPLES ?? 60);

const base64url = (bytes: number) => randomBytes(bytes).toString("base64url");
const SECRETS: Record<string, () => string> = {
  "40-character token": () => `sk_live_${base64url(24)}`.slice(0, 40),
  "300-character JWT": () => `${base64url(27)}.${base64url(150)}.${base64url(43)}`.slice(0, 300),
};

/** A tool result of ~0.5 KB with a few backslashes, `%` and `&` (a Windows path, a query string, an HTML entity). */
const RESULT = `{"result":"C:\\\\tmp\\\\out.txt","q":"a%20b&amp;c","n":1} ${"the tool answered with ordinary text ".repeat(12)}`;
const CALL_TEXTS = [RESULT, "remote_echo", "ok", RESULT.slice(0, 120), "done"];

/** `Redactor.reference` is never cached: the lasting secret's is built once here, as `Redactor.of` keeps its own. */
const referenceOf = new Map<string, Redactor>();
const LASTING_REFERENCE = (secret: string): Redactor => {
  let found = referenceOf.get(secret);
  if (found === undefined) referenceOf.set(secret, (found = Redactor.reference([secret])));
  return found;
};

const scrubWith = (redactor: Redactor) => {
  for (const text of CALL_TEXTS) redactor.text(text);
};

export async function redactionFigures(rows: Row[]): Promise<void> {
  // First: a lasting secret (a static header) on a long result, its pattern compiled once and searched as it is. V8
  // optimises no regexp compiled after it has generated about 1 MB of regexp code (the new secrets below get there).
  const lasting = SECRETS["300-character JWT"]();
  const prose = "the tool answered with ordinary text and some more words here ".repeat(1700);
  const long = `${prose.slice(0, 50_000)}&${prose.slice(50_000)}`;
  const [oursLong, referenceLong] = (
    await roundRobin([async () => Redactor.of([lasting]).text(long), async () => LASTING_REFERENCE(lasting).text(long)], SAMPLES, 20)
  ).map(median);
  rows.push({
    figure: `the same 300-character JWT on a 100 KB result holding one &: this build / patterns as written before (median of ${SAMPLES})`,
    ours: fmtMs(oursLong),
    baseline: fmtMs(referenceLong),
    ratio: oursLong / referenceLong,
    target: "(context)",
  });

  for (const [kind, fresh] of Object.entries(SECRETS)) {
    const same = fresh();
    const [ours, reference, cached] = await roundRobin(
      [async () => scrubWith(Redactor.of([fresh()])), async () => scrubWith(Redactor.reference([fresh()])), async () => scrubWith(Redactor.of([same]))],
      SAMPLES,
      5,
    ).then((samples) => samples.map(median));
    rows.push(
      {
        figure: `a new ${kind} per call, one call's scrubbing: this build / patterns as written before (median of ${SAMPLES})`,
        ours: fmtMs(ours),
        baseline: fmtMs(reference),
        ratio: ours / reference,
        target: "(context)",
      },
      {
        figure: `  a new ${kind} per call / the same one every call`,
        ours: fmtMs(ours),
        baseline: fmtMs(cached),
        ratio: ours / cached,
        target: "(context)",
      },
    );
  }

  const http = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
  const configPath = await writeConfig(await makeTempDir("bench-redaction-"), { mcpServers: { remote: { type: "http", url: http.url } } });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: silentLogger });
  const echo = (await toolkit.getTools()).find((t) => t.name === "remote_echo")!;
  const sameJwt = SECRETS["300-character JWT"]();
  const call = (secret: () => string) => () =>
    echo.func({ text: RESULT }, undefined, { toolCallId: "bench", context: { user_id: "u", secrets: { api_key: secret() } }, state: {}, store: null, writer: null } as never) as Promise<unknown>;
  const [fresh, same] = (await roundRobin([call(SECRETS["300-character JWT"]), call(() => sameJwt)], SAMPLES, 5)).map(median);
  rows.push({
    figure: `call path (HTTP echo of a 0.5 KB result): a new 300-character JWT in context.secrets per call / the same one (median of ${SAMPLES})`,
    ours: fmtMs(fresh),
    baseline: fmtMs(same),
    ratio: fresh / same,
    target: "(context)",
  });
  await toolkit.close();
  await http.close();
}
