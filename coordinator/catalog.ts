// The table catalog: names, key schemas and internal ids, owned by the
// coordinator and persisted in its data folder. A table id is never reused, so
// a table created again under an old name never sees the old table's items.
import { join } from 'node:path';
import type { EvenDistribution, KeySchema, TableDescription } from '../shared/api.js';
import { assert, KeysliceError } from '../shared/errors.js';
import { KEY_TYPES } from '../shared/key-encoding.js';
import { EVEN_DISTRIBUTION_BUCKETS_DEFAULT, EVEN_DISTRIBUTION_BUCKETS_MAX, TABLE_NAME_CHARS_MAX, TABLE_NAME_CHARS_MIN, TABLES_MAX } from '../shared/limits.js';
import { isPlainObject, validateAttributeName } from '../shared/values.js';
import { readStateFile, writeStateFile } from './state-file.js';

export interface Table extends TableDescription {
  id: number;
}

interface CatalogState {
  nextTableId: number;
  tables: Table[];
}

const TABLE_NAME = new RegExp(`^[A-Za-z0-9_.-]{${TABLE_NAME_CHARS_MIN},${TABLE_NAME_CHARS_MAX}}$`);

export class Catalog {
  private readonly tables = new Map<string, Table>();
  private nextTableId = 1;

  private constructor(private readonly path: string) {}

  static open(dataDir: string): Catalog {
    const catalog = new Catalog(join(dataDir, 'catalog.json'));
    const state = readStateFile<CatalogState>(catalog.path);
    if (state !== null) {
      catalog.nextTableId = state.nextTableId;
      for (const t of state.tables) {
        assert(t.id < state.nextTableId, `table id ${t.id} below nextTableId`);
        catalog.tables.set(t.name, t);
      }
    }
    return catalog;
  }

  get(name: unknown): Table {
    if (typeof name !== 'string') throw new KeysliceError('ValidationError', '"table" must be a table name (a string)');
    const t = this.tables.get(name);
    if (t === undefined) throw new KeysliceError('TableNotFound', `table "${name}" does not exist`);
    return t;
  }

  names(): string[] {
    return [...this.tables.keys()].sort();
  }

  create(name: unknown, shardingKey: unknown, sortingKey: unknown, evenDistribution: unknown): Table {
    if (typeof name !== 'string' || !TABLE_NAME.test(name)) {
      throw new KeysliceError(
        'ValidationError',
        `table name must be ${TABLE_NAME_CHARS_MIN} to ${TABLE_NAME_CHARS_MAX} characters of A-Z, a-z, 0-9, "_", "-" and "."; got ${JSON.stringify(name)}`,
      );
    }
    const sharding = keySchema(shardingKey, 'shardingKey');
    const sorting = sortingKey === undefined || sortingKey === null ? null : keySchema(sortingKey, 'sortingKey');
    if (sorting !== null && sorting.name === sharding.name) {
      throw new KeysliceError('ValidationError', 'the sharding key and the sorting key must be different attributes');
    }
    const even = evenDistributionOption(evenDistribution, sharding, sorting);
    if (this.tables.has(name)) throw new KeysliceError('TableExists', `table "${name}" already exists`);
    if (this.tables.size >= TABLES_MAX) throw new KeysliceError('LimitExceeded', `a cluster holds at most ${TABLES_MAX} tables`);
    const table: Table = { id: this.nextTableId, name, shardingKey: sharding, sortingKey: sorting, evenDistribution: even, createdAt: Date.now() };
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

  private save(): void {
    writeStateFile(this.path, { nextTableId: this.nextTableId, tables: [...this.tables.values()] } satisfies CatalogState);
  }
}

export function describe(table: Table): TableDescription {
  return { name: table.name, shardingKey: table.shardingKey, sortingKey: table.sortingKey, evenDistribution: table.evenDistribution ?? null, createdAt: table.createdAt };
}

function keySchema(v: unknown, field: string): KeySchema {
  if (!isPlainObject(v) || typeof v.name !== 'string') {
    throw new KeysliceError('ValidationError', `"${field}" must be {"name": <attribute>, "type": "string" | "number" | "binary"}`);
  }
  validateAttributeName(v.name, field);
  if (!KEY_TYPES.includes(v.type as never)) {
    throw new KeysliceError('ValidationError', `${field}.type must be one of ${KEY_TYPES.join(', ')}; got ${JSON.stringify(v.type)}`);
  }
  return { name: v.name, type: v.type as KeySchema['type'] };
}

function evenDistributionOption(v: unknown, sharding: KeySchema, sorting: KeySchema | null): EvenDistribution | null {
  if (v === undefined || v === null) return null;
  if (!isPlainObject(v) || Object.keys(v).some((k) => k !== 'buckets')) {
    throw new KeysliceError('ValidationError', '"evenDistribution" must be {"buckets": N} (N defaults to ' + EVEN_DISTRIBUTION_BUCKETS_DEFAULT + ')');
  }
  const buckets = v.buckets ?? EVEN_DISTRIBUTION_BUCKETS_DEFAULT;
  if (!Number.isInteger(buckets) || (buckets as number) < 1 || (buckets as number) > EVEN_DISTRIBUTION_BUCKETS_MAX) {
    throw new KeysliceError('ValidationError', `evenDistribution.buckets must be a whole number from 1 to ${EVEN_DISTRIBUTION_BUCKETS_MAX}`);
  }
  if (sharding.type !== 'string' || sorting === null) {
    throw new KeysliceError('ValidationError', 'even distribution needs a string sharding key (the bucket is appended to it) and a sorting key (the bucket is its hash)');
  }
  return { buckets: buckets as number };
}
