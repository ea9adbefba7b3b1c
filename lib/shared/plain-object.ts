/** A plain object (a literal, `JSON.parse` output, `Object.create(null)`); arrays and class instances are not. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== "object") return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}
