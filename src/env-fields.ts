import { z } from "zod";

// The kinds of value a setting in the environment takes, each with the words a bad value's problem
// line gives. A leaf: the configuration (src/config/) and each agent's plugin, which names its own
// settings, build their schemas of them.

export const bool = z
  .enum(["true", "false", "1", "0", "yes", "no"], { error: "expected true or false" })
  .transform((v) => v === "true" || v === "1" || v === "yes");

export const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.coerce
    .number({ error: "expected a whole number" })
    .int({ error: "expected a whole number" })
    .min(min, { error: `expected a whole number >= ${min}` })
    .max(max, { error: `expected a whole number <= ${max}` });

export const list = z.string().transform((v) =>
  v
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean),
);

/** USD per million tokens. */
export const usdRate = z.number().nonnegative();

/** JSON: prices by model name, each in `entry`'s shape (`shape` says it in the error). */
export const priceTable = <T extends z.ZodType>(entry: T, shape: string) =>
  z
    .string()
    .transform((v, ctx) => {
      try {
        return JSON.parse(v) as unknown;
      } catch {
        ctx.addIssue({ code: "custom", message: "expected JSON" });
        return z.NEVER;
      }
    })
    .pipe(z.record(z.string().min(1), entry, { error: `expected ${shape} per million tokens` }));

export const httpUrl = z.url({
  protocol: /^https?$/,
  error: "expected an http:// or https:// URL",
});

export const oneOf = <T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `expected one of: ${values.join(", ")}` });
