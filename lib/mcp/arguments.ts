import { Validator, type JSONSchema } from "@langchain/core/utils/json_schema";
import { formatIssuePath } from "../config";
import { boundText } from "../shared/text";

/**
 * Argument-validation problems as the model should read them: one line per field (`a: expected number`),
 * built from the schema and the field names only. Never a value of the arguments (the model may have put
 * anything there) and never a stack or a file path (SPEC §3.4).
 */

interface OutputUnit {
  keyword: string;
  keywordLocation: string;
  instanceLocation: string;
  error: string;
}

const MAX_FIELDS = 20;
const MAX_LINE_CHARS = 200;
/** Keywords whose failure is explained by the errors of their subschemas, reported on their own. */
const WRAPPERS = new Set([
  "properties",
  "patternProperties",
  "additionalProperties",
  "unevaluatedProperties",
  "items",
  "prefixItems",
  "additionalItems",
  "unevaluatedItems",
  "allOf",
  "$ref",
  "$recursiveRef",
  "$dynamicRef",
  "if",
  "then",
  "else",
  "dependentSchemas",
  "propertyNames",
]);
/** Keywords whose subschema errors would only confuse: "matches none of the alternatives" says it. */
const ALTERNATIVES = new Set(["anyOf", "oneOf", "not"]);

const validators = new WeakMap<object, Validator>();

const UNENCODABLE_FIELD = "(arguments): a field name is not valid Unicode text (it holds a lone surrogate)";

function validatorFor(schema: JSONSchema): Validator {
  let validator = validators.get(schema);
  if (!validator) {
    validator = new Validator(schema as ConstructorParameters<typeof Validator>[0], "2019-09", false);
    validators.set(schema, validator);
  }
  return validator;
}

function unescapePointer(segment: string): string {
  return decodeURIComponent(segment).replace(/~1/g, "/").replace(/~0/g, "~");
}

function segmentsOf(pointer: string): string[] {
  const body = pointer.startsWith("#") ? pointer.slice(1) : pointer;
  return body === "" ? [] : body.split("/").slice(1).map(unescapePointer);
}

/** The schema node a keyword location points at (refs are resolved in the schemas the harness builds). */
function schemaAt(schema: JSONSchema, keywordLocation: string): unknown {
  let node: unknown = schema;
  for (const segment of segmentsOf(keywordLocation)) {
    if (node === null || typeof node !== "object") return undefined;
    node = (node as Record<string, unknown>)[segment];
  }
  return node;
}

/** `person.age`, `tags[1]`: array indexes as numbers, found by walking the input. */
function fieldPath(input: unknown, segments: readonly string[]): PropertyKey[] {
  const path: PropertyKey[] = [];
  let node: unknown = input;
  for (const segment of segments) {
    const index = Array.isArray(node) && /^\d+$/.test(segment) ? Number(segment) : null;
    path.push(index ?? segment);
    node = node !== null && typeof node === "object" ? (node as Record<string, unknown>)[index ?? segment] : undefined;
  }
  return path;
}

function valueAt(input: unknown, segments: readonly string[]): unknown {
  let node: unknown = input;
  for (const segment of segments) {
    if (node === null || typeof node !== "object") return undefined;
    node = (node as Record<string, unknown>)[segment];
  }
  return node;
}

const show = (value: unknown) => boundText(JSON.stringify(value) ?? String(value), 60);

/** What the schema at `keywordLocation` expected, in words; `null` for keywords that only wrap others. */
function expectation(keyword: string, rule: unknown): string | null {
  switch (keyword) {
    case "type":
      return `expected ${Array.isArray(rule) ? rule.join(" or ") : String(rule)}`;
    case "enum":
      return Array.isArray(rule) ? `expected one of ${rule.map(show).join(", ")}` : "expected one of the allowed values";
    case "const":
      return `expected ${show(rule)}`;
    case "minimum":
      return `expected a number >= ${show(rule)}`;
    case "maximum":
      return `expected a number <= ${show(rule)}`;
    case "exclusiveMinimum":
      return `expected a number > ${show(rule)}`;
    case "exclusiveMaximum":
      return `expected a number < ${show(rule)}`;
    case "multipleOf":
      return `expected a multiple of ${show(rule)}`;
    case "minLength":
      return `expected at least ${show(rule)} characters`;
    case "maxLength":
      return `expected at most ${show(rule)} characters`;
    case "pattern":
      return `expected to match the pattern ${show(rule)}`;
    case "format":
      return `expected the format ${show(rule)}`;
    case "minItems":
      return `expected at least ${show(rule)} items`;
    case "maxItems":
      return `expected at most ${show(rule)} items`;
    case "uniqueItems":
      return "expected unique items";
    case "contains":
    case "minContains":
    case "maxContains":
      return "expected items matching the schema";
    case "minProperties":
      return `expected at least ${show(rule)} fields`;
    case "maxProperties":
      return `expected at most ${show(rule)} fields`;
    case "anyOf":
    case "oneOf":
      return "matches none of the allowed shapes";
    case "not":
      return "matches a shape that is not allowed";
    case "false":
      return "unexpected field";
    case "dependentRequired":
    case "dependencies":
      return "requires other fields that are missing";
    default:
      return WRAPPERS.has(keyword) ? null : "invalid value";
  }
}

/**
 * The problems of `input` against `schema`, one line per field (`a: expected number`,
 * `person.name: required field missing`, `person.nickname: unexpected field`); `[]` when it is valid.
 */
export function describeArgumentProblems(schema: JSONSchema, input: unknown): string[] {
  let result: ReturnType<Validator["validate"]>;
  try {
    result = validatorFor(schema).validate(input);
  } catch (err) {
    // The validator URI-encodes the path of each field it reads, and a lone surrogate cannot be encoded.
    if (err instanceof URIError) return [UNENCODABLE_FIELD];
    throw err;
  }
  if (result.valid) return [];
  const byField = new Map<string, string[]>();
  const add = (path: readonly PropertyKey[], problem: string) => {
    const field = path.length === 0 ? "(arguments)" : formatIssuePath(path);
    const problems = byField.get(field) ?? [];
    if (!problems.includes(problem)) problems.push(problem);
    byField.set(field, problems);
  };
  const silenced: string[] = [];
  for (const unit of result.errors as OutputUnit[]) {
    if (silenced.some((prefix) => unit.keywordLocation.startsWith(prefix))) continue;
    if (ALTERNATIVES.has(unit.keyword)) silenced.push(`${unit.keywordLocation}/`);
    const segments = segmentsOf(unit.instanceLocation);
    const rule = schemaAt(schema, unit.keywordLocation);
    if (unit.keyword === "required") {
      const present = valueAt(input, segments);
      const missing = Array.isArray(rule)
        ? rule.filter((name): name is string => typeof name === "string" && !(present !== null && typeof present === "object" && Object.hasOwn(present, name)))
        : [];
      for (const name of missing) add(fieldPath(input, [...segments, name]), "required field missing");
      if (missing.length === 0) add(fieldPath(input, segments), "a required field is missing");
      continue;
    }
    const problem = expectation(unit.keyword, rule);
    if (problem !== null) add(fieldPath(input, segments), problem);
  }
  const lines = [...byField].map(([field, problems]) => boundText(`${field}: ${problems.join("; ")}`, MAX_LINE_CHARS));
  if (lines.length === 0) return ["(arguments): do not match the tool's input schema"];
  if (lines.length > MAX_FIELDS) return [...lines.slice(0, MAX_FIELDS), `… and ${lines.length - MAX_FIELDS} more`];
  return lines;
}

/** The text of an error ToolMessage for arguments that do not match the tool's schema. */
export function invalidArgumentsText(toolName: string, schema: JSONSchema, input: unknown): string {
  const problems = describeArgumentProblems(schema, input);
  return [`Invalid arguments for tool '${toolName}'; fix them and call it again:`, ...problems].join("\n");
}
