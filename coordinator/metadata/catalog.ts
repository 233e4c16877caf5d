// The table catalog: names, key schemas and internal ids, owned by the
// coordinator and persisted in its data folder. A table id is never reused, so
// a table created again under an old name never sees the old table's items.
import { join } from 'node:path';
import type { EvenDistribution, KeyColumns, KeySchema, TableDescription } from '../../shared/api.js';
import type { StoredTable } from '../../shared/cluster-view.js';
import { KeysliceError } from '../../shared/errors.js';
import { KEY_TYPES } from '../../shared/key-encoding.js';
import {
  ATTRIBUTE_NAME_BYTES_MAX,
  EVEN_DISTRIBUTION_BUCKETS_DEFAULT,
  EVEN_DISTRIBUTION_BUCKETS_MAX,
  SHARDING_KEY_COLUMNS_MAX,
  SORTING_KEY_COLUMNS_MAX,
  TABLE_NAME_CHARS_MAX,
  TABLE_NAME_CHARS_MIN,
  TABLES_MAX,
} from '../../shared/limits.js';
import { isPlainObject, validateAttributeName } from '../../shared/values.js';
import { readStateFields, type StateFields, writeStateFile } from '../../shared/state-file.js';

export interface Table extends TableDescription {
  id: number;
  /** The key columns as lists (derived from shardingKey and sortingKey, not persisted):
   * at least one sharding column, no sorting column for a simple key. */
  sharding: KeySchema[];
  sorting: KeySchema[];
}

/** A table as the catalog file keeps it: its description and its id. */
export type { StoredTable };

interface CatalogState {
  /** CATALOG_FORMAT; absent in catalogs written before it was kept (read as the current one). */
  format?: number;
  nextTableId: number;
  tables: StoredTable[];
}

/** The format this coordinator writes and the newest it reads (readCatalogFile). Raise it when a change would be
 * misread by a coordinator that does not know it. */
export const CATALOG_FORMAT = 1;

const COLUMN_FIELDS = ['name', 'type'];
const EVEN_DISTRIBUTION_FIELDS = ['buckets'];

const TABLE_NAME = new RegExp(`^[A-Za-z0-9_.-]{${TABLE_NAME_CHARS_MIN},${TABLE_NAME_CHARS_MAX}}$`);
/** TABLE_NAME in words: CreateTable's refusal and the catalog file's say it alike. */
const TABLE_NAME_RULE = `${TABLE_NAME_CHARS_MIN} to ${TABLE_NAME_CHARS_MAX} characters of A-Z, a-z, 0-9, "_", "-" and "."`;

/** A table by the name a request gave: the catalog's and a router's copy answer alike. */
export function tableNamed(tables: ReadonlyMap<string, Table>, name: unknown): Table {
  if (typeof name !== 'string') throw new KeysliceError('ValidationError', '"table" must be a table name (a string)');
  const t = tables.get(name);
  if (t === undefined) throw new KeysliceError('TableNotFound', `table "${name}" does not exist`);
  return t;
}

export class Catalog {
  private readonly tables = new Map<string, Table>();
  private nextTableId = 1;
  /** Called after every change that is in force (routers are told: metadata/feed.ts). */
  onChange: () => void = () => {};

  private constructor(private readonly path: string) {}

  /** The catalog of the data folder (empty where it has none yet); StateFileError, with the sentence, where its
   * file is refused (readCatalogFile). */
  static open(dataDir: string): Catalog {
    const catalog = new Catalog(join(dataDir, 'catalog.json'));
    const state = readCatalogFile(catalog.path);
    if (state !== null) {
      catalog.nextTableId = state.nextTableId;
      for (const t of state.tables) catalog.tables.set(t.name, t);
    }
    return catalog;
  }

  get(name: unknown): Table {
    return tableNamed(this.tables, name);
  }

  names(): string[] {
    return [...this.tables.keys()].sort();
  }

  /** Why no table can be made now (e.g. fewer nodes than the replication factor), or null. */
  createProblem: () => string | null = () => null;

  create(name: unknown, shardingKey: unknown, sortingKey: unknown, evenDistribution: unknown): Table {
    if (typeof name !== 'string' || !TABLE_NAME.test(name)) {
      throw new KeysliceError(
        'ValidationError',
        `table name must be ${TABLE_NAME_RULE}; got ${JSON.stringify(name)}`,
      );
    }
    const shape = tableShape(name, shardingKey, sortingKey, evenDistribution);
    if (this.tables.has(name)) throw new KeysliceError('TableExists', `table "${name}" already exists`);
    if (this.tables.size >= TABLES_MAX) throw new KeysliceError('LimitExceeded', `a cluster holds at most ${TABLES_MAX} tables`);
    const problem = this.createProblem();
    if (problem !== null) throw new KeysliceError('InvalidState', problem);
    const table = { ...shape, id: this.nextTableId, createdAt: Date.now() };
    this.tables.set(name, table);
    this.nextTableId++;
    this.save();
    return table;
  }

  delete(name: unknown): Table {
    const table = this.get(name);
    this.tables.delete(table.name);
    this.save();
    return table;
  }

  /** The tables as the file keeps them (what routers get). */
  stored(): StoredTable[] {
    return [...this.tables.values()].map(({ sharding, sorting, ...stored }) => stored);
  }

  private save(): void {
    writeStateFile(this.path, { format: CATALOG_FORMAT, nextTableId: this.nextTableId, tables: this.stored() } satisfies CatalogState);
    this.onChange();
  }
}

/** The catalog file at `path`, or null where there is none, each field checked before any is used: a file that is
 * damaged, changed by hand or written by a newer coordinator is refused (StateFileError) in one sentence naming the
 * file, the field and what is wrong, and the coordinator does not start. A table's key design is checked as
 * CreateTable checks it (tableShape); its id is below nextTableId (ids are never reused), and names and ids are
 * distinct. */
function readCatalogFile(path: string): { nextTableId: number; tables: Table[] } | null {
  const read = readStateFields(path, 'coordinator', CATALOG_FORMAT);
  if (read === null) return null;
  const f: StateFields = read.f;
  const saved = read.saved;
  const nextTableId = f.whole(saved.nextTableId, 'nextTableId', 1, Number.MAX_SAFE_INTEGER);
  const tables = f.listOf(saved.tables, 'tables', undefined, (e, at) => {
    const t = f.object(e, at);
    if (typeof t.name !== 'string' || !TABLE_NAME.test(t.name)) f.wrong(`${at}.name`, `must be a table name (${TABLE_NAME_RULE})`);
    const id = f.whole(t.id, `${at}.id`, 1, nextTableId - 1);
    const createdAt = f.whole(t.createdAt, `${at}.createdAt`, 0, Number.MAX_SAFE_INTEGER);
    return { ...storedKeyDesign(f, t, at), name: t.name, id, createdAt };
  }, TABLES_MAX);
  tables.forEach((t, i) => {
    const first = tables.findIndex((u) => u.name === t.name || u.id === t.id);
    if (first !== i) f.wrong(`tables[${i}]`, `has the ${tables[first].name === t.name ? `name "${t.name}"` : `id ${t.id}`} of tables[${first}]`);
  });
  return { nextTableId, tables };
}

/** A stored table's key design, checked as read: the shape every coordinator wrote (a column {name, type} or a list of
 * 1 to the most columns, of distinct attributes; evenDistribution null or {buckets} beside a sorting key), kept as
 * written. Not CreateTable's rules (tableShape): those refuse what a client may ask for from now on and may tighten (an
 * attribute name with a lone surrogate was taken until 2026-11-27), and a table made before must still open: a valid
 * catalog refused is a coordinator that does not start. */
function storedKeyDesign(f: StateFields, t: Record<string, unknown>, at: string): Pick<Table, 'shardingKey' | 'sortingKey' | 'evenDistribution' | 'sharding' | 'sorting'> {
  const column = (c: unknown, cAt: string): KeySchema => {
    const o = f.object(c, cAt);
    const name = f.string(o.name, `${cAt}.name`, ATTRIBUTE_NAME_BYTES_MAX);
    if (name === '') f.wrong(`${cAt}.name`, 'must be an attribute name; it is ""');
    return { name, type: f.oneOf(o.type, `${cAt}.type`, KEY_TYPES) };
  };
  const columns = (v: unknown, field: string, max: number): { described: KeyColumns; list: KeySchema[] } => {
    if (!Array.isArray(v)) {
      const one = column(v, field);
      return { described: one, list: [one] };
    }
    if (v.length === 0) f.wrong(field, 'must be a column or a list of 1 or more; it is []');
    const list = f.listOf(v, field, undefined, column, max);
    return { described: list, list };
  };
  const sharding = columns(t.shardingKey, `${at}.shardingKey`, SHARDING_KEY_COLUMNS_MAX);
  const sorting = t.sortingKey === null || t.sortingKey === undefined ? null : columns(t.sortingKey, `${at}.sortingKey`, SORTING_KEY_COLUMNS_MAX);
  const names = [...sharding.list, ...(sorting?.list ?? [])].map((c) => c.name);
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice !== undefined) f.wrong(`${at} (table "${t.name as string}")`, `names key column ${JSON.stringify(twice)} twice`);
  let evenDistribution: EvenDistribution | null = null;
  if (t.evenDistribution !== null && t.evenDistribution !== undefined) {
    const e = f.object(t.evenDistribution, `${at}.evenDistribution`);
    evenDistribution = { buckets: f.whole(e.buckets, `${at}.evenDistribution.buckets`, 1, EVEN_DISTRIBUTION_BUCKETS_MAX) };
    if (sorting === null) f.wrong(`${at}.evenDistribution`, 'is set on a table without a sorting key');
  }
  return { shardingKey: sharding.described, sortingKey: sorting?.described ?? null, evenDistribution, sharding: sharding.list, sorting: sorting?.list ?? [] };
}

/** A table's key design checked as CreateTable checks it, without creating it (id 0):
 * the advisor places sample items with the same code as the cluster. */
export function tableShape(name: string, shardingKey: unknown, sortingKey: unknown, evenDistribution: unknown): Table {
  const sharding = keyColumns(shardingKey, 'shardingKey', SHARDING_KEY_COLUMNS_MAX);
  const sorting = sortingKey === undefined || sortingKey === null ? [] : keyColumns(sortingKey, 'sortingKey', SORTING_KEY_COLUMNS_MAX);
  const seen = new Set<string>();
  for (const column of [...sharding, ...sorting]) {
    if (seen.has(column.name)) throw new KeysliceError('ValidationError', `key column "${column.name}" appears twice; every key column must be a different attribute`);
    seen.add(column.name);
  }
  const even = evenDistributionOption(evenDistribution, sorting);
  return withColumns({
    id: 0,
    name,
    shardingKey: describeColumns(sharding),
    sortingKey: sorting.length === 0 ? null : describeColumns(sorting),
    evenDistribution: even,
    createdAt: 0,
  });
}

export function describe(table: Table): TableDescription {
  return { name: table.name, shardingKey: table.shardingKey, sortingKey: table.sortingKey, evenDistribution: table.evenDistribution ?? null, createdAt: table.createdAt };
}

/** A table of the catalog file with its columns as lists (files written before
 * keys had several columns hold one column as an object, which reads the same). */
export function withColumns(t: StoredTable): Table {
  const list = (k: KeyColumns) => (Array.isArray(k) ? k : [k]);
  return { ...t, sharding: list(t.shardingKey), sorting: t.sortingKey === null ? [] : list(t.sortingKey) };
}

/** One column is described as the column, several as the list. */
function describeColumns(columns: KeySchema[]): KeyColumns {
  return columns.length === 1 ? columns[0] : columns;
}

function refuseUnknownFields(v: Record<string, unknown>, where: string, accepted: readonly string[]): void {
  for (const field of Object.keys(v)) {
    if (!accepted.includes(field)) {
      throw new KeysliceError('ValidationError', `${where} does not take "${field}" (it takes ${accepted.join(', ')})`);
    }
  }
}

/** `shardingKey` or `sortingKey`: one column {name, type}, or a list of 1 to `max` of them. */
function keyColumns(v: unknown, field: string, max: number): KeySchema[] {
  const shape = `{"name": <attribute>, "type": ${KEY_TYPES.map((t) => `"${t}"`).join(' | ')}}`;
  if (Array.isArray(v)) {
    if (v.length === 0 || v.length > max) {
      throw new KeysliceError('ValidationError', `"${field}" takes 1 to ${max} columns; got ${v.length}`);
    }
    return v.map((c, i) => keyColumn(c, `${field}[${i}]`, shape));
  }
  if (!isPlainObject(v)) throw new KeysliceError('ValidationError', `"${field}" must be one column ${shape} or a list of 1 to ${max} of them`);
  return [keyColumn(v, field, shape)];
}

function keyColumn(v: unknown, where: string, shape: string): KeySchema {
  if (!isPlainObject(v)) throw new KeysliceError('ValidationError', `${where} must be a column ${shape}`);
  // A field we do not know (say "hashPrefix" or "order") would change nothing; refuse it rather than drop it.
  refuseUnknownFields(v, where, COLUMN_FIELDS);
  if (typeof v.name !== 'string') throw new KeysliceError('ValidationError', `${where}.name must be an attribute name (a string); ${where} must be ${shape}`);
  validateAttributeName(v.name, where);
  if (!KEY_TYPES.includes(v.type as never)) {
    throw new KeysliceError('ValidationError', `${where}.type must be one of ${KEY_TYPES.join(', ')}; got ${JSON.stringify(v.type)}`);
  }
  return { name: v.name, type: v.type as KeySchema['type'] };
}

function evenDistributionOption(v: unknown, sorting: KeySchema[]): EvenDistribution | null {
  if (v === undefined || v === null) return null;
  if (!isPlainObject(v)) {
    throw new KeysliceError('ValidationError', '"evenDistribution" must be {"buckets": N} (N defaults to ' + EVEN_DISTRIBUTION_BUCKETS_DEFAULT + ')');
  }
  refuseUnknownFields(v, 'evenDistribution', EVEN_DISTRIBUTION_FIELDS);
  const buckets = v.buckets ?? EVEN_DISTRIBUTION_BUCKETS_DEFAULT;
  if (!Number.isInteger(buckets) || (buckets as number) < 1 || (buckets as number) > EVEN_DISTRIBUTION_BUCKETS_MAX) {
    throw new KeysliceError('ValidationError', `evenDistribution.buckets must be a whole number from 1 to ${EVEN_DISTRIBUTION_BUCKETS_MAX}`);
  }
  if (sorting.length === 0) {
    throw new KeysliceError('ValidationError', 'even distribution needs a sorting key: an item\'s bucket is the hash of its sorting key');
  }
  return { buckets: buckets as number };
}
