import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

// An OTLP/HTTP trace receiver on loopback, as a collector would be: it takes the JSON bodies the
// exporter POSTs to /v1/traces and keeps their spans, flattened for assertions.

/** A received span, its attributes as plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's numbering: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, unknown>;
  /** 0 unset, 1 ok, 2 error. */
  status: { code: number; message?: string };
  resource: Record<string, unknown>;
}

export interface OtlpReceiver {
  /** The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it. */
  url: string;
  spans: ReceivedSpan[];
  /** Export requests received, whatever they held. */
  requests: number;
  close(): Promise<void>;
}

interface AnyValue {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
}
type KeyValues = { key: string; value: AnyValue }[] | undefined;
interface ExportBody {
  resourceSpans?: {
    resource?: { attributes?: KeyValues };
    scopeSpans?: {
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        attributes?: KeyValues;
        status?: { code?: number; message?: string };
      }[];
    }[];
  }[];
}

function plain(value: AnyValue): unknown {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  return value.arrayValue?.values?.map(plain);
}

const record = (kvs: KeyValues) =>
  Object.fromEntries((kvs ?? []).map(({ key, value }) => [key, plain(value)]));

/** Starts a receiver; with `status` other than 200 it refuses every export with that status. */
export async function startOtlpReceiver(status = 200): Promise<OtlpReceiver> {
  const receiver: Omit<OtlpReceiver, "url" | "close"> = { spans: [], requests: 0 };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      receiver.requests++;
      if (status === 200 && req.url === "/v1/traces") {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ExportBody;
        for (const rs of body.resourceSpans ?? []) {
          const resource = record(rs.resource?.attributes);
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              receiver.spans.push({
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId ?? "",
                name: s.name,
                kind: s.kind,
                attributes: record(s.attributes),
                status: { code: s.status?.code ?? 0, message: s.status?.message },
                resource,
              });
            }
          }
        }
      }
      res.writeHead(status, { "Content-Type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(receiver, {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  });
}
