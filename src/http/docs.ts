import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import { Hono } from "hono";
import { etag } from "hono/etag";
import { html } from "hono/html";
import { secureHeaders } from "hono/secure-headers";
import type { AppEnv } from "./context.js";

// The API reference at /docs is Scalar's standalone bundle served from the installed package
// (pinned by the lockfile), so the page works with no internet and loads code from this origin
// only: a CDN would blank the page offline and put third-party code where users paste keys.

const packageDir = join(
  dirname(createRequire(import.meta.url).resolve("@scalar/api-reference")),
  "..",
);

const { version } = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as {
  version: string;
};
/** The bundle's path carries its version, so a browser may keep it until an upgrade renames it. */
const assetUrl = `/docs/assets/api-reference-${version}.js`;

interface Bundle {
  body: Uint8Array<ArrayBuffer>;
  gzipped: Uint8Array<ArrayBuffer>;
  /** The content's digest: an ETag names one encoding of it, so gzip gets a tag of its own. */
  digest: string;
}

// Read on the first visit to /docs rather than at start-up: most servers never serve it.
let bundle: Promise<Bundle> | undefined;
function loadBundle(): Promise<Bundle> {
  bundle ??= (async () => {
    const body = await readFile(join(packageDir, "dist/browser/standalone.js"));
    const digest = createHash("sha256").update(body).digest("base64url");
    const gzipped = await promisify(gzip)(body);
    // Copied once into the type Hono's c.body takes, rather than on every request.
    return { body: new Uint8Array(body), gzipped: new Uint8Array(gzipped), digest };
  })();
  return bundle;
}

/**
 * Scalar's options: read the contract from this server and reach nothing else (no web fonts,
 * telemetry, AI agent or MCP service of Scalar's, no request proxy).
 */
const scalarConfiguration = {
  url: "/openapi.json",
  withDefaultFonts: false,
  telemetry: false,
  agent: { disabled: true },
  mcp: { disabled: true },
  showDeveloperTools: "never",
};

// No inline script at all: the page's one script tag loads the bundle from this origin. Styles
// may be inline, as the bundle sets many (style attributes, and stylesheets its components
// inject without a nonce); with every fetch kept to this origin they cannot send data elsewhere.
const contentSecurityPolicy = {
  defaultSrc: ["'none'"],
  scriptSrc: ["'self'"],
  styleSrc: ["'self'", "'unsafe-inline'"],
  imgSrc: ["'self'", "data:"],
  fontSrc: ["'self'", "data:"],
  connectSrc: ["'self'"],
  baseUri: ["'none'"],
  formAction: ["'none'"],
  frameAncestors: ["'none'"],
};

/** GET /docs (the page) and the bundle it loads. */
export function docsRouter(): Hono<AppEnv> {
  const router = new Hono<AppEnv>();

  router.get(
    "/docs",
    // HSTS is the operator's call for the whole origin, not this page's.
    secureHeaders({ contentSecurityPolicy, strictTransportSecurity: false }),
    (c) =>
      c.html(html`<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <link rel="icon" href="data:," />
    <title>agent-bridge API</title>
  </head>
  <body>
    <noscript>
      <p>This reference needs JavaScript. The contract it shows is at <a href="/openapi.json">/openapi.json</a>.</p>
    </noscript>
    <script id="api-reference" data-configuration="${JSON.stringify(scalarConfiguration)}"></script>
    <script src="${assetUrl}"></script>
  </body>
</html>
`),
  );

  router.get(assetUrl, etag(), async (c) => {
    const { body, gzipped, digest } = await loadBundle();
    const zipped = /\bgzip\b/.test(c.req.header("Accept-Encoding") ?? "");
    c.header("Content-Type", "text/javascript; charset=utf-8");
    c.header("Cache-Control", "public, max-age=31536000, immutable");
    c.header("ETag", zipped ? `"${digest}-gzip"` : `"${digest}"`);
    c.header("Vary", "Accept-Encoding");
    c.header("X-Content-Type-Options", "nosniff");
    if (zipped) c.header("Content-Encoding", "gzip");
    return c.body(zipped ? gzipped : body);
  });

  return router;
}
