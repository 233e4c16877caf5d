// What DynamoDB knows about a table and keyslice's catalog does not: billing
// mode, provisioned throughput (recorded and answered, not enforced), tags,
// table class and deletion protection. Kept in one small state file in the
// coordinator's data folder, written atomically like the catalog. An entry
// belongs to one incarnation of a table (its catalog createdAt): a table
// deleted and created again, through either API, starts from the defaults.
import { join } from 'node:path';
import { TAG_KEY_CHARS_MAX, TAG_VALUE_CHARS_MAX } from '../../shared/limits.js';
import { readStateFields, type StateFields, writeStateFile } from '../../shared/state-file.js';

export interface Tag {
  Key: string;
  Value: string;
}

export interface TableSettings {
  createdAt: number;
  billingMode: 'PROVISIONED' | 'PAY_PER_REQUEST';
  readCapacityUnits: number;
  writeCapacityUnits: number;
  /** ms since the epoch, of the last throughput increase and decrease. */
  lastIncreaseAt: number | null;
  lastDecreaseAt: number | null;
  decreasesToday: number;
  tableClass: 'STANDARD' | 'STANDARD_INFREQUENT_ACCESS';
  deletionProtection: boolean;
  tags: Tag[];
}

interface SettingsState {
  /** DYNAMODB_TABLES_FORMAT; absent in files written before it was kept (read as the current one). */
  format?: number;
  tables: Record<string, TableSettings>;
}

/** The format this coordinator writes and the newest it reads (readSettingsFile). Raise it when a change would be
 * misread by a coordinator that does not know it. */
export const DYNAMODB_TABLES_FORMAT = 1;
const BILLING_MODES: readonly TableSettings['billingMode'][] = ['PROVISIONED', 'PAY_PER_REQUEST'];
const TABLE_CLASSES: readonly TableSettings['tableClass'][] = ['STANDARD', 'STANDARD_INFREQUENT_ACCESS'];

/** A table created through the native API looks to DynamoDB clients like an on-demand table. */
export function defaultSettings(createdAt: number): TableSettings {
  return {
    createdAt,
    billingMode: 'PAY_PER_REQUEST',
    readCapacityUnits: 0,
    writeCapacityUnits: 0,
    lastIncreaseAt: null,
    lastDecreaseAt: null,
    decreasesToday: 0,
    tableClass: 'STANDARD',
    deletionProtection: false,
    tags: [],
  };
}

export class TableSettingsStore {
  private readonly tables = new Map<string, TableSettings>();

  /** `path` null: kept in memory only (no data folder). */
  private constructor(private readonly path: string | null) {}

  static open(dataDir: string | null): TableSettingsStore {
    const store = new TableSettingsStore(dataDir === null ? null : join(dataDir, 'dynamodb-tables.json'));
    if (store.path !== null) for (const [name, s] of readSettingsFile(store.path)) store.tables.set(name, s);
    return store;
  }

  /** The settings of the table incarnation created at `createdAt`. */
  get(name: string, createdAt: number): TableSettings {
    const s = this.tables.get(name);
    return s !== undefined && s.createdAt === createdAt ? s : defaultSettings(createdAt);
  }

  set(name: string, settings: TableSettings): void {
    this.tables.set(name, settings);
    this.save();
  }

  delete(name: string): void {
    if (this.tables.delete(name)) this.save();
  }

  private save(): void {
    if (this.path === null) return;
    writeStateFile(this.path, { format: DYNAMODB_TABLES_FORMAT, tables: Object.fromEntries(this.tables) } satisfies SettingsState);
  }
}

/** The settings file at `path` (none: no entry), each field checked before any is used: a file that is damaged,
 * changed by hand or written by a newer coordinator is refused (StateFileError) in one sentence naming the file, the
 * field and what is wrong, and the coordinator does not start. Each field as this file has always held it: a
 * throughput is any whole number from 0 (UpdateTable sets no upper bound, so none is asked here). */
function readSettingsFile(path: string): [string, TableSettings][] {
  const read = readStateFields(path, 'coordinator', DYNAMODB_TABLES_FORMAT);
  if (read === null) return [];
  const f: StateFields = read.f;
  const saved = read.saved;
  const time = (v: unknown, at: string) => f.whole(v, at, 0, Number.MAX_SAFE_INTEGER);
  const units = (v: unknown, at: string): number => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) f.wrong(at, `must be a whole number from 0; it is ${JSON.stringify(v) ?? 'missing'}`);
    return v;
  };
  return Object.entries(f.object(saved.tables, 'tables')).map(([name, v]) => {
    const at = `tables[${JSON.stringify(name)}]`;
    const s = f.object(v, at);
    return [name, {
      createdAt: time(s.createdAt, `${at}.createdAt`),
      billingMode: f.oneOf(s.billingMode, `${at}.billingMode`, BILLING_MODES),
      readCapacityUnits: units(s.readCapacityUnits, `${at}.readCapacityUnits`),
      writeCapacityUnits: units(s.writeCapacityUnits, `${at}.writeCapacityUnits`),
      lastIncreaseAt: s.lastIncreaseAt === null ? null : time(s.lastIncreaseAt, `${at}.lastIncreaseAt`),
      lastDecreaseAt: s.lastDecreaseAt === null ? null : time(s.lastDecreaseAt, `${at}.lastDecreaseAt`),
      decreasesToday: time(s.decreasesToday, `${at}.decreasesToday`),
      tableClass: f.oneOf(s.tableClass, `${at}.tableClass`, TABLE_CLASSES),
      deletionProtection: f.boolean(s.deletionProtection, `${at}.deletionProtection`),
      tags: f.listOf(s.tags, `${at}.tags`, undefined, (t, tAt) => {
        const tag = f.object(t, tAt);
        return { Key: f.string(tag.Key, `${tAt}.Key`, TAG_KEY_CHARS_MAX), Value: f.string(tag.Value, `${tAt}.Value`, TAG_VALUE_CHARS_MAX) };
      }),
    }];
  });
}
