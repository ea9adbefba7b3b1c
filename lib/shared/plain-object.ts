/**
 * A plain object (a literal, `JSON.parse` output, `Object.create(null)`); arrays and class instances are not. Also one
 * made in another realm, whose prototype is that realm's `Object.prototype`: Node's `fetch` parses a JSON response in
 * Node's own realm, which is not the code's under jest or in a `vm` context, and a result taken for "not plain" there
 * went unscrubbed.
 */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== "object") return false;
  const proto = Object.getPrototypeOf(value) as { constructor?: unknown } | null;
  if (proto === Object.prototype || proto === null) return true;
  return Object.getPrototypeOf(proto) === null && typeof proto.constructor === "function" && proto.constructor.name === "Object" && !Array.isArray(value);
}

/**
 * An array of no class of its own (a literal, `JSON.parse` output, also another realm's): not an instance of an
 * `Array` subclass, whose methods (`toJSON`) and fields decide what a checkpoint or the store writes of it.
 */
export function isPlainArray(value: unknown): value is unknown[] {
  if (!Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as { constructor?: unknown } | null;
  if (proto === Array.prototype) return true;
  if (proto === null || typeof proto.constructor !== "function" || proto.constructor.name !== "Array") return false;
  // Another realm's Array.prototype sits right on that realm's Object.prototype; a subclass's does not.
  const base = Object.getPrototypeOf(proto) as object | null;
  return base !== null && Object.getPrototypeOf(base) === null;
}

/** `out[key] = value` as an own property, also for "__proto__" (a plain assignment would call its setter). */
export function setOwn(out: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__") Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  else out[key] = value;
}

/**
 * Whether arrays and plain objects nest more than `max` levels deep in `value` (itself level 0). Checked without
 * recursion, so any depth is measured; stops at the first path deeper than `max`.
 */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: { value: unknown; depth: number }[] = [{ value, depth: 0 }];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const children = Array.isArray(next.value) ? next.value : isPlainObject(next.value) ? Object.values(next.value) : undefined;
    if (children === undefined) continue;
    if (next.depth >= max) return true;
    for (const child of children) if (child !== null && typeof child === "object") stack.push({ value: child, depth: next.depth + 1 });
  }
  return false;
}
