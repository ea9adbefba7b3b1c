import { describe, expect, test } from "@jest/globals";
import { createMcpToolkit, type McpToolkitOptions } from "../../lib";
import { MAX_TIMER_SECONDS } from "../../lib/shared/timers";

const build = (options: McpToolkitOptions) => () => createMcpToolkit({ env: {}, ...options });

describe("toolkit options are checked at construction", () => {
  const idleOptions = ["httpSessionIdleSeconds", "temporaryStdioIdleSeconds"] as const;
  test.each(idleOptions.flatMap((name) => [1e7, MAX_TIMER_SECONDS + 0.001, 0, -1, Number.NaN, Number.POSITIVE_INFINITY, "300"].map((value) => [name, value] as const)))(
    "%s %p is a RangeError naming the option (a timer would fire at once or never)",
    (name, value) => {
      const options = { [name]: value } as McpToolkitOptions;
      expect(build(options)).toThrow(RangeError);
      expect(build(options)).toThrow(new RegExp(`^McpToolkitOptions\\.${name} must be .* at most 2147483\\.647`));
    },
  );

  test.each(["maxHttpSessionsPerServer", "maxResultChars", "stdioMaxMessageBytes"] as const)(
    "%s must be a positive integer",
    (name) => {
      for (const value of [0, -3, 1.5, Number.NaN]) {
        expect(build({ [name]: value })).toThrow(new RangeError(`McpToolkitOptions.${name} must be a positive integer`));
      }
      expect(build({ [name]: 1 })).not.toThrow();
    },
  );

  test.each([0, -1, Number.NaN, MAX_TIMER_SECONDS + 1])("interceptorLoadSeconds %p is a RangeError naming the option", (value) => {
    expect(build({ interceptorLoadSeconds: value })).toThrow(/^McpToolkitOptions\.interceptorLoadSeconds must be a number of seconds above 0/);
  });

  test("a dataDir or clock of the wrong kind (a JavaScript caller's) is a TypeError naming the option", () => {
    for (const dataDir of [5, {}, null]) {
      expect(build({ dataDir } as unknown as McpToolkitOptions)).toThrow(new TypeError("McpToolkitOptions.dataDir must be a string"));
    }
    for (const clock of [5, "now", null]) {
      expect(build({ clock } as unknown as McpToolkitOptions)).toThrow(new TypeError("McpToolkitOptions.clock must be a function returning a Date"));
    }
    expect(build({ dataDir: "./data", clock: () => new Date() })).not.toThrow();
  });

  test("values at the limits are accepted", () => {
    expect(build({ interceptorLoadSeconds: MAX_TIMER_SECONDS })).not.toThrow();
    expect(build({ httpSessionIdleSeconds: MAX_TIMER_SECONDS })).not.toThrow();
    expect(build({ httpSessionIdleSeconds: null })).not.toThrow();
    expect(build({ httpSessionIdleSeconds: 0.2 })).not.toThrow();
    expect(build({ temporaryStdioIdleSeconds: MAX_TIMER_SECONDS })).not.toThrow();
    expect(build({ temporaryStdioIdleSeconds: null })).not.toThrow();
    expect(build({ temporaryStdioIdleSeconds: 0.2 })).not.toThrow();
  });
});
