// What the test database pools (./pglite-pool.ts, ./postgres-databases.ts) share: how a database
// given back is emptied for its next caller, and how they tell that a caller changed its schema.

/** The public schema's tables, quoted, each with those its foreign keys reference. */
export const TABLES_QUERY = `select format('%I', c.relname) as name,
    coalesce(json_agg(distinct format('%I', r.relname)) filter (where r.oid <> c.oid), '[]') as refs
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
  left join pg_constraint k on k.conrelid = c.oid and k.contype = 'f'
  left join pg_class r on r.oid = k.confrelid
  where n.nspname = 'public' and c.relkind = 'r'
  group by c.oid, c.relname`;

export interface TableRefs {
  name: string;
  refs: string[];
}

/**
 * One statement deleting every row of `tables`, each table before those it references. Deleting
 * the few rows a test leaves costs a tenth of truncating every table, which makes each table's
 * files again (README "Development"); the schema has no sequences to restart.
 */
export function emptyingStatement(tables: TableRefs[]): string {
  const left = new Map(tables.map((table) => [table.name, table.refs]));
  const order: string[] = [];
  while (left.size > 0) {
    const referenced = new Set([...left.values()].flat());
    const free = [...left.keys()].filter((name) => !referenced.has(name));
    if (free.length === 0) {
      throw new Error(`these tables' foreign keys make a cycle: ${[...left.keys()].join(", ")}`);
    }
    for (const name of free) {
      order.push(name);
      left.delete(name);
    }
  }
  return `do $$ begin ${order.map((name) => `delete from public.${name};`).join(" ")} end $$`;
}

/** What a test could add or change of the schema, counted. */
export const SHAPE_QUERY = `select concat_ws(',',
  (select count(*) from pg_trigger where not tgisinternal),
  (select count(*) from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'public'),
  (select count(*) from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast')),
  (select count(*) from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = 'public' and a.attnum > 0 and not a.attisdropped),
  (select count(*) from pg_roles),
  (select count(*) from drizzle.__drizzle_migrations)) as shape`;
