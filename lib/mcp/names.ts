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

export function invalidNameReason(name: string): string | null {
  if (!VALID_TOOL_NAME.test(name)) return "it must match ^[A-Za-z0-9_-]+$";
  if (name.length > MAX_TOOL_NAME_LENGTH) return `it is longer than ${MAX_TOOL_NAME_LENGTH} characters`;
  return null;
}

/**
 * Assigns visible names in config order. A name that fails validation is dropped. When two servers
 * produce the same visible name, an unprefixed one falls back to its `<server>_<tool>` form so both can
 * be told apart; if that is impossible the later tool is dropped. Every drop and rename is reported.
 */
export function assignVisibleNames<T extends NameCandidate>(
  candidates: readonly T[],
  warn: (message: string) => void,
): NamedTool<T>[] {
  const initial = candidates.map((candidate) => ({
    candidate,
    name: visibleToolName(candidate.server, candidate.rawName, candidate.prefixed),
  }));
  const countByName = new Map<string, Set<string>>();
  for (const { candidate, name } of initial) {
    const servers = countByName.get(name) ?? new Set<string>();
    servers.add(candidate.server);
    countByName.set(name, servers);
  }

  const taken = new Map<string, string>();
  const result: NamedTool<T>[] = [];
  for (const { candidate, name: first } of initial) {
    let name = first;
    const sharedAcrossServers = (countByName.get(first)?.size ?? 0) > 1;
    if (sharedAcrossServers && !candidate.prefixed) {
      const fallback = visibleToolName(candidate.server, candidate.rawName, true);
      warn(
        `MCP tool name '${first}' is exposed by several servers (${[...countByName.get(first)!].join(", ")}); ` +
          `exposing server '${candidate.server}'s tool as '${fallback}'`,
      );
      name = fallback;
    }
    const invalid = invalidNameReason(name);
    if (invalid) {
      warn(`Dropping MCP tool '${candidate.rawName}' of server '${candidate.server}': invalid name '${name}' (${invalid})`);
      continue;
    }
    const owner = taken.get(name);
    if (owner !== undefined) {
      warn(
        `Dropping MCP tool '${candidate.rawName}' of server '${candidate.server}': its name '${name}' collides with a tool of server '${owner}'`,
      );
      continue;
    }
    taken.set(name, candidate.server);
    result.push({ candidate, visibleName: name });
  }
  return result;
}
