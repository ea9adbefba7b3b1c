/**
 * Test seams in the handling of a thread's `.mcp` folder, where a tool of the thread may swap `.mcp` (or what it
 * holds) between the harness's check and its next step: a test swaps it there, deterministically. Unset outside tests.
 */
export interface InternalDirSeams {
  /** `ensureThreadPaths` checked `.mcp` (named by its path) and is about to create and write in it. */
  prepared?: (internal: string) => Promise<void>;
  /** A temporary thread's removal checked `.mcp` and `.mcp/tmp` and is about to empty `.mcp/tmp`. */
  clearing?: (internal: string) => Promise<void>;
  /** A skeleton's removal checked `.mcp` and its `.gitignore` and is about to remove them. */
  removing?: (internal: string) => Promise<void>;
  /** `ensureThreadPaths` created the file it writes `.mcp/.gitignore`'s text in, and is about to write it. */
  gitignoreCreated?: (internal: string) => Promise<void>;
  /** A skeleton's removal set `.mcp/.gitignore` aside under a name of its own and is about to check and unlink it. */
  gitignoreAside?: (internal: string) => Promise<void>;
}

export const internalDirSeams: InternalDirSeams = {};
