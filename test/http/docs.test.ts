import { mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { launchOfflineChromium } from "../support/chromium.js";

const artifacts = fileURLToPath(new URL("../../test-artifacts/", import.meta.url));

describe("the API reference at /docs", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp("pglite");
  });
  afterAll(() => t.close());

  const bundleUrl = async () => {
    const page = await (await t.app.request("/docs")).text();
    const src = /<script src="(\/docs\/assets\/[^"]+)"><\/script>/.exec(page)?.[1];
    if (!src) throw new Error(`no bundle in ${page}`);
    return src;
  };

  it("is a page that loads code from this server only, under a strict Content-Security-Policy", async () => {
    const res = await t.app.request("/docs");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(res.headers.get("content-security-policy")).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    const page = await res.text();
    expect(page).toMatch(/<noscript>[\s\S]*<a href="\/openapi.json">[\s\S]*<\/noscript>/);
    // One script, from this server; no inline code and no other origin.
    expect(page.match(/<script[^>]*>[^<]*<\/script>/g)).toEqual([
      expect.stringMatching(/^<script id="api-reference" data-configuration="[^"]+"><\/script>$/),
      expect.stringMatching(/^<script src="\/docs\/assets\/[^"]+"><\/script>$/),
    ]);
    expect(page).not.toMatch(/https?:\/\//);
  });

  it("serves the installed reference bundle with a long cache, an ETag, and gzip when asked", async () => {
    const src = await bundleUrl();
    const plain = await t.app.request(src);
    expect(plain.status).toBe(200);
    expect(plain.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(plain.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(plain.headers.get("content-encoding")).toBeNull();
    const body = await plain.text();
    expect(body).toContain("createApiReference");
    const tag = plain.headers.get("etag") ?? "";
    expect(tag).toMatch(/^"[\w-]+"$/);

    const unchanged = await t.app.request(src, { headers: { "If-None-Match": tag } });
    expect(unchanged.status).toBe(304);
    expect(await unchanged.text()).toBe("");

    const zipped = await t.app.request(src, { headers: { "Accept-Encoding": "gzip, br" } });
    expect(zipped.headers.get("content-encoding")).toBe("gzip");
    expect(zipped.headers.get("etag")).not.toBe(tag);
    expect(zipped.headers.get("vary")).toBe("Accept-Encoding");
    const unzipped = await new Response(
      zipped.body?.pipeThrough(new DecompressionStream("gzip")),
    ).text();
    expect(unzipped).toBe(body);
  });

  describe("in a real browser with no network beyond loopback", () => {
    let server: { url: string; close(): Promise<void> };
    beforeAll(async () => {
      server = await listen(t.app);
    });
    afterAll(() => server.close());

    // A whole browser starting and rendering the reference on a 2-core machine beside three other
    // test files: 5-15 s in CI, and past the default 60 s once when the machine ran slow. The
    // waits end the moment the page shows the text; these are only their bounds.
    it("renders the routes, fetching nothing from elsewhere and breaking no policy (screenshot in test-artifacts/docs.png)", {
      timeout: 180_000,
    }, async () => {
      // Launched in the test, so that a missing Chromium fails it (with how to install one).
      const browser = await launchOfflineChromium();
      onTestFinished(() => browser.close());
      const page = await browser.newPage();
      const elsewhere: string[] = [];
      const problems: string[] = [];
      page.on("Network.requestWillBeSent", (p) => {
        const { url } = p.request as { url: string };
        if (!url.startsWith(`${server.url}/`) && !url.startsWith("data:")) elsewhere.push(url);
      });
      page.on("Runtime.exceptionThrown", (p) => problems.push(JSON.stringify(p.exceptionDetails)));
      // Content-Security-Policy violations and failed loads land here.
      page.on("Log.entryAdded", (p) => {
        const entry = p.entry as { level: string; text: string };
        if (entry.level === "error") problems.push(entry.text);
      });
      await Promise.all([
        page.send("Network.enable"),
        page.send("Runtime.enable"),
        page.send("Log.enable"),
      ]);

      // A deep link, as a user shares one: the reference opens the operation it names.
      await page.send("Page.navigate", {
        url: `${server.url}/docs#tag/runs/POST/v1/sessions/{id}/messages`,
      });
      const rendered = await page.waitForText("/v1/sessions/{id}/messages", 120_000).then(
        () => true,
        (error: Error) => error.message,
      );
      mkdirSync(artifacts, { recursive: true });
      await page.screenshot(`${artifacts}docs.png`);
      // One comparison, so that a blank page also shows what failed to load and why.
      expect({ rendered, elsewhere, problems }).toEqual({
        rendered: true,
        elsewhere: [],
        problems: [],
      });
    });
  });
});
