// What DynamoDB knows about a table and keyslice's catalog does not: billing
// mode, provisioned throughput (recorded and answered, not enforced), tags,
// table class and deletion protection. Kept in one small state file in the
// coordinator's data folder, written atomically like the catalog. An entry
// belongs to one incarnation of a table (its catalog createdAt): a table
// deleted and created again, through either API, starts from the defaults.
import { join } from 'node:path';
import { readStateFile, writeStateFile } from '../../shared/state-file.js';

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
  tables: Record<string, TableSettings>;
}

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
    const state = store.path === null ? null : readStateFile<SettingsState>(store.path);
    for (const [name, s] of Object.entries(state?.tables ?? {})) store.tables.set(name, s);
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
    writeStateFile(this.path, { tables: Object.fromEntries(this.tables) } satisfies SettingsState);
  }
}
