import { setOwn } from "./plain-object";

/** JSON with object keys sorted at every depth, compact. A `"__proto__"` key is kept as the plain key it is. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) => {
    if (item === null || typeof item !== "object" || Array.isArray(item)) return item;
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(item).sort()) setOwn(sorted, key, (item as Record<string, unknown>)[key]);
    return sorted;
  });
}
