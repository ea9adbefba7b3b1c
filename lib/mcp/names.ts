import { escapeControls, sliceWhole } from "../shared/text";
export const VALID_TOOL_NAME = /^[A-Za-z0-9_-]+$/;
/** The limit most chat-model APIs put on function names. */
export const MAX_TOOL_NAME_LENGTH = 64;

export interface NameCandidate {
  server: string;
  rawName: string;
  prefixed: boolean;
}

export interface NamedTool<T extends NameCandidate> {
  candidate: T;
  visibleName: string;
}

export function visibleToolName(server: string, rawName: string, prefixed: boolean): string {
  return prefixed ? `${server}_${rawName}` : rawName;
}

const SHOWN_TOOL_NAME_CHARS = 100;

/**
 * A tool name as a warning shows it, quoted: it comes from the server, so control and separator characters are
 * escaped (a name holding a line break cannot forge a log line) and a long one is cut.
 */
export function shownToolName(name: string): string {
  const cut = name.length > SHOWN_TOOL_NAME_CHARS ? `${sliceWhole(name, SHOWN_TOOL_NAME_CHARS)}…` : name;
  return `'${escapeControls(cut)}'`;
}

export function invalidNameReason(name: string): string | null {
  if (!VALID_TOOL_NAME.test(name)) return "it must match ^[A-Za-z0-9_-]+$";
  if (name.length > MAX_TOOL_NAME_LENGTH) return `it is longer than ${MAX_TOOL_NAME_LENGTH} characters`;
  return null;
}

interface Claim<T extends NameCandidate> {
  candidate: T;
  /** The tool's configured name: `<server>_<tool>`, or the raw name with `tool_name_prefix: false`. */
  configured: string;
  visibleName?: string;
  dropped?: boolean;
}

function toolOf(claim: Claim<NameCandidate>): string {
  return `${shownToolName(claim.candidate.rawName)} of server '${claim.candidate.server}'`;
}

/** "tool 'x' of server 's'", or "the server's own tool 'x'" when `other` comes from the same server as `claim`. */
function otherTool(claim: Claim<NameCandidate>, other: Claim<NameCandidate>): string {
  return other.candidate.server === claim.candidate.server
    ? `the server's own tool ${shownToolName(other.candidate.rawName)}`
    : `tool ${toolOf(other)}`;
}

/**
 * Assigns visible names (SPEC §3.2). "Config order" is the order of the servers in the file, then the order in
 * which a server lists its tools; `candidates` come in that order and the result keeps it. The rules:
 *
 * 1. A tool with an empty raw name is dropped. A raw name a server lists more than once keeps its first entry.
 * 2. Every tool claims its configured name (`<server>_<tool>`, or the raw name with `tool_name_prefix: false`);
 *    a configured name that fails `^[A-Za-z0-9_-]+$` or is longer than 64 characters drops its tool.
 * 3. A configured name claimed by one tool is that tool's. When several tools claim it, each unprefixed claimant
 *    falls back to `<server>_<tool>`; a prefixed claimant cannot fall back, so the first prefixed claimant in
 *    config order keeps the name and the other prefixed claimants are dropped.
 * 4. Configured names take precedence over fallbacks: a fallback that is some tool's configured name fails (even
 *    when its own server has that tool), as does an invalid fallback; two equal fallbacks resolve in config order.
 * 5. A claimant whose fallback fails keeps its configured name when no prefixed claimant holds it and no earlier
 *    claimant kept it (the others moved to fallbacks, so the tools can still be told apart); otherwise it is dropped.
 *
 * Every drop and every rename is reported by exactly one warning, which names each server involved once.
 */
export function assignVisibleNames<T extends NameCandidate>(
  candidates: readonly T[],
  warn: (message: string) => void,
): NamedTool<T>[] {
  const claims: Claim<T>[] = [];
  const listed = new Set<string>();
  for (const candidate of candidates) {
    if (candidate.rawName === "") {
      warn(`Dropping a tool of MCP server '${candidate.server}': its name is empty`);
      continue;
    }
    const key = `${candidate.server}\u0000${candidate.rawName}`;
    if (listed.has(key)) {
      warn(`MCP server '${candidate.server}' lists tool ${shownToolName(candidate.rawName)} more than once; keeping the first`);
      continue;
    }
    listed.add(key);
    const configured = visibleToolName(candidate.server, candidate.rawName, candidate.prefixed);
    const invalid = invalidNameReason(configured);
    if (invalid) {
      warn(`Dropping MCP tool ${toolOf({ candidate, configured })}: invalid name ${shownToolName(configured)} (${invalid})`);
      continue;
    }
    claims.push({ candidate, configured });
  }

  const claimants = new Map<string, Claim<T>[]>();
  for (const claim of claims) {
    const list = claimants.get(claim.configured);
    if (list) list.push(claim);
    else claimants.set(claim.configured, [claim]);
  }

  // Rule 3: configured names. The holder of each name is the claimant that keeps it, else its first claimant.
  const holder = new Map<string, Claim<T>>();
  /** Configured names a tool is exposed under. */
  const taken = new Set<string>();
  const fallingBack = new Set<Claim<T>>();
  for (const [name, list] of claimants) {
    if (list.length === 1) {
      list[0].visibleName = name;
      holder.set(name, list[0]);
      taken.add(name);
      continue;
    }
    let keeper: Claim<T> | undefined;
    for (const claim of list) {
      if (!claim.candidate.prefixed) {
        fallingBack.add(claim);
      } else if (keeper === undefined) {
        keeper = claim;
        claim.visibleName = name;
        taken.add(name);
      } else {
        claim.dropped = true;
        warn(`Dropping MCP tool ${toolOf(claim)}: its name ${shownToolName(name)} collides with ${otherTool(claim, keeper)}`);
      }
    }
    holder.set(name, keeper ?? list[0]);
  }

  // Rules 4 and 5: fallbacks, in config order, after every configured name is settled.
  const fallbackOwner = new Map<string, Claim<T>>();
  for (const claim of claims.filter((c) => fallingBack.has(c))) {
    const { server, rawName } = claim.candidate;
    const name = claim.configured;
    const sharers = [...new Set(claimants.get(name)!.map((c) => c.candidate.server))].join(", ");
    const fallback = visibleToolName(server, rawName, true);
    const shared = `MCP tool name ${shownToolName(name)} is exposed by several servers (${sharers})`;
    const invalid = invalidNameReason(fallback);
    const configuredBy = holder.get(fallback);
    const earlier = fallbackOwner.get(fallback);
    let problem: string | null = null;
    if (invalid) problem = `its fallback name ${shownToolName(fallback)} is invalid (${invalid})`;
    else if (configuredBy) problem = `its fallback name ${shownToolName(fallback)} is the configured name of ${otherTool(claim, configuredBy)}`;
    else if (earlier) problem = `its fallback name ${shownToolName(fallback)} is already the fallback name of ${otherTool(claim, earlier)}`;
    if (problem !== null) {
      if (!taken.has(name)) {
        taken.add(name);
        claim.visibleName = name;
        warn(`${shared}; keeping server '${server}'s tool as ${shownToolName(name)}: ${problem}`);
      } else {
        claim.dropped = true;
        warn(`${shared}; dropping server '${server}'s tool ${shownToolName(rawName)}: ${problem}`);
      }
      continue;
    }
    fallbackOwner.set(fallback, claim);
    claim.visibleName = fallback;
    warn(`${shared}; exposing server '${server}'s tool as ${shownToolName(fallback)}`);
  }

  return claims
    .filter((claim) => !claim.dropped && claim.visibleName !== undefined)
    .map((claim) => ({ candidate: claim.candidate, visibleName: claim.visibleName! }));
}
