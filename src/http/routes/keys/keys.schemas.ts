import { z } from "@hono/zod-openapi";
import type { ApiKeyRow } from "../../../store/schema.js";

export const KeyId = z.uuid({ error: "expected a key id (a UUID)" }).openapi({
  param: { name: "id", in: "path" },
});

export const CreateKeyBody = z
  .strictObject({
    name: z.string().min(1).max(100).openapi({ example: "ci" }),
    admin: z
      .boolean()
      .default(false)
      .openapi({ description: "Admin keys see every tenant and manage keys." }),
  })
  .openapi("CreateApiKey");

export const ApiKey = z
  .object({
    id: z.string(),
    name: z.string(),
    prefix: z.string().openapi({
      description: "The key's first characters, to recognise it.",
      example: "ab_x7Kq2m",
    }),
    admin: z.boolean(),
    created_at: z.string().openapi({ format: "date-time" }),
    last_used_at: z.string().nullable().openapi({ format: "date-time" }),
    revoked_at: z.string().nullable().openapi({ format: "date-time" }),
  })
  .openapi("ApiKey");

export const NewApiKey = ApiKey.extend({
  key: z
    .string()
    .openapi({ description: "The key itself: shown this once, stored only as a hash." }),
}).openapi("NewApiKey");

export const ApiKeyList = z.object({ data: z.array(ApiKey) }).openapi("ApiKeyList");

export function toApiKey(row: ApiKeyRow): z.infer<typeof ApiKey> {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    admin: row.admin,
    created_at: row.createdAt.toISOString(),
    last_used_at: row.lastUsedAt?.toISOString() ?? null,
    revoked_at: row.revokedAt?.toISOString() ?? null,
  };
}
