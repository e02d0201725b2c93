import { stringify } from "yaml";
import { openApiDocument } from "./openapi.js";

/**
 * openapi.yaml as committed: paths and component schemas sorted by name so that the file does
 * not churn when routes are registered in another order.
 */
export function openApiYaml(): string {
  const doc = openApiDocument();
  const sorted = {
    ...doc,
    paths: sortKeys(doc.paths ?? {}),
    components: { ...doc.components, schemas: sortKeys(doc.components?.schemas ?? {}) },
  };
  return stringify(sorted, { lineWidth: 0, aliasDuplicateObjects: false });
}

function sortKeys<T>(obj: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(obj).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
