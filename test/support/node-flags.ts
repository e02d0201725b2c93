/**
 * Node flags of the tests' own processes (vitest's workers, the servers they start from the
 * precompiled build): `--liftoff-only` keeps WebAssembly, the embedded database, on V8's baseline
 * compiler. Only the compiler tier differs; what the code does is the same.
 */
export const TEST_NODE_FLAGS = ["--liftoff-only"] as const;
