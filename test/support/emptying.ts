// What the test database pools (./pglite-pool.ts, ./postgres-databases.ts) share: how a database
// given back is emptied for its next caller, and how they tell that a caller changed its schema.

/**
 * The public schema's tables (`kind` "table"), quoted, each with those its foreign keys
 * reference, and its sequences (`kind` "sequence": the identity columns' counters).
 */
export const RELATIONS_QUERY = `select 'table' as kind, format('%I', c.relname) as name,
    coalesce(json_agg(distinct format('%I', r.relname)) filter (where r.oid <> c.oid), '[]') as refs
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
  left join pg_constraint k on k.conrelid = c.oid and k.contype = 'f'
  left join pg_class r on r.oid = k.confrelid
  where n.nspname = 'public' and c.relkind = 'r'
  group by c.oid, c.relname
  union all
  select 'sequence', format('%I', c.relname), '[]'
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
  where n.nspname = 'public' and c.relkind = 'S'`;

export interface Relation {
  kind: "table" | "sequence";
  name: string;
  refs: string[];
}

/**
 * One statement deleting every row of the tables, each table before those it references, and
 * restarting the sequences, so that the next key is numbered as a new database's first is.
 * Deleting the few rows a test leaves costs a tenth of truncating every table, which makes each
 * table's files again (docs/development.md).
 */
export function emptyingStatement(relations: Relation[]): string {
  const left = new Map(
    relations.filter((r) => r.kind === "table").map((table) => [table.name, table.refs]),
  );
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
  const deletes = order.map((name) => `delete from public.${name};`);
  const restarts = relations
    .filter((r) => r.kind === "sequence")
    .map((sequence) => `alter sequence public.${sequence.name} restart;`);
  return `do $$ begin ${[...deletes, ...restarts].join(" ")} end $$`;
}

/**
 * The schema as a caller could change it, as one digest: the public schema's columns, their
 * types, nullability and defaults, its constraints, indexes, triggers (and whether each is
 * enabled), functions, types, policies, rules and grants; settings made for the database; the
 * roles; and the migrations run.
 */
export const SHAPE_QUERY = `select md5(concat_ws(' | ',
  (select string_agg(format('%s.%s %s %s %s', c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
       a.attnotnull, pg_get_expr(d.adbin, d.adrelid)), ', ' order by c.relname, a.attnum)
     from pg_attribute a join pg_class c on c.oid = a.attrelid
     join pg_namespace n on n.oid = c.relnamespace
     left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
     where n.nspname = 'public' and a.attnum > 0 and not a.attisdropped),
  (select string_agg(format('%s %s %s', c.relname, c.relkind, c.relacl), ', ' order by c.relname)
     from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast')),
  (select string_agg(format('%s %s', k.conname, pg_get_constraintdef(k.oid)), ', ' order by k.conname)
     from pg_constraint k join pg_namespace n on n.oid = k.connamespace where n.nspname = 'public'),
  (select string_agg(pg_get_indexdef(i.indexrelid), ', ' order by i.indexrelid::regclass::text)
     from pg_index i join pg_class c on c.oid = i.indrelid
     join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'public'),
  (select string_agg(format('%s %s %s', t.tgrelid::regclass, t.tgenabled,
       case when t.tgisinternal then 'internal' else pg_get_triggerdef(t.oid) end), ', '
       order by t.tgrelid::regclass::text, t.tgisinternal, t.tgname)
     from pg_trigger t),
  (select string_agg(format('%s %s', p.proname, md5(p.prosrc)), ', ' order by p.proname, p.oid)
     from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'public'),
  (select count(*) from pg_type t join pg_namespace n on n.oid = t.typnamespace where n.nspname = 'public'),
  (select count(*) from pg_policy),
  (select count(*) from pg_rewrite r join pg_class c on c.oid = r.ev_class
     join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'public'),
  (select count(*) from pg_db_role_setting s join pg_database d on d.oid = s.setdatabase
     where d.datname = current_database()),
  (select count(*) from pg_roles),
  (select count(*) from drizzle.__drizzle_migrations))) as shape`;
