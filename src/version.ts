import { createRequire } from "node:module";

/** The version of the HTTP API this server serves (openapi.yaml's `info.version`). */
export const API_VERSION = "1.0.0";

/** This server's version, as package.json gives it. */
export const { version: SERVER_VERSION } = createRequire(import.meta.url)("../package.json") as {
  version: string;
};
