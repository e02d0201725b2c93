import { createRequire } from "node:module";

/** This server's version, as package.json gives it. */
export const { version: SERVER_VERSION } = createRequire(import.meta.url)("../package.json") as {
  version: string;
};
