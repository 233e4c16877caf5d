// The operation set: one definition behind both transports (HTTP/JSON and
// WebSocket/msgpack) and the TypeScript client. Payloads are plain values.
import type { KeyType, KeyValue } from './key-encoding.js';
import type { Item } from './values.js';

export interface KeySchema {
  name: string;
  type: KeyType;
}

/** Spreads each sharding key over `buckets` stored sharding keys `<key>_<bucket>`,
 * bucket = xxHash32(sorting key) % buckets; reads by the original key gather them. */
export interface EvenDistribution {
  buckets: number;
}

export interface TableDescription {
  name: string;
  shardingKey: KeySchema;
  sortingKey: KeySchema | null;
  evenDistribution: EvenDistribution | null;
  createdAt: number;
}

/** An item's primary key: its key attributes, or its object name
 * (`<sharding>` or `<sharding>.<sorting>`, split at the leftmost period). */
export type KeyRef = Item | string;

/** A condition on the sorting key within one sharding key. */
export type SortCondition =
  | { eq: KeyValue }
  | { lt: KeyValue }
  | { lte: KeyValue }
  | { gt: KeyValue }
  | { gte: KeyValue }
  | { between: [KeyValue, KeyValue] }
  | { beginsWith: string | Uint8Array };

export type ReturnValues = 'none' | 'old' | 'new';

export interface Operations {
  CreateTable: {
    request: { table: string; shardingKey: KeySchema; sortingKey?: KeySchema | null; evenDistribution?: Partial<EvenDistribution> | null };
    response: { table: TableDescription };
  };
  DescribeTable: { request: { table: string }; response: { table: TableDescription } };
  ListTables: { request: Record<string, never>; response: { tables: string[] } };
  DeleteTable: { request: { table: string }; response: { table: TableDescription } };
  PutItem: { request: { table: string; item: Item }; response: Record<string, never> };
  GetItem: {
    request: { table: string; key: KeyRef; attributes?: string[] };
    response: { item: Item | null };
  };
  UpdateItem: {
    request: {
      table: string;
      key: KeyRef;
      /** Attributes to set (created or replaced). */
      set?: Item;
      /** Attributes to remove. */
      remove?: string[];
      /** Numbers to add; a missing attribute counts as 0. */
      add?: Record<string, number>;
      returnValues?: ReturnValues;
    };
    response: { item?: Item | null };
  };
  DeleteItem: { request: { table: string; key: KeyRef }; response: { deleted: boolean } };
  /** A range scan (with `shardingKey`) or a full-table scan (without it). */
  GetItems: {
    request: {
      table: string;
      shardingKey?: KeyValue;
      /** Even distribution: read this one bucket (the stored key `<shardingKey>_<bucket>`) instead of all. */
      bucket?: number;
      sortingKey?: SortCondition;
      reverse?: boolean;
      limit?: number;
      marker?: string;
      attributes?: string[];
      /** Parallel scan (no shardingKey): this call reads segment `segment` of `totalSegments`. */
      segment?: number;
      totalSegments?: number;
    };
    /** `marker` is present when more items may follow; pass it back to continue. */
    response: { items: Item[]; marker?: string };
  };
  BatchWrite: {
    request: { table: string; puts?: Item[]; deletes?: KeyRef[] };
    response: Record<string, never>;
  };
  /** Items come back in the order of `keys`, null where there is none. */
  BatchGet: {
    request: { table: string; keys: KeyRef[]; attributes?: string[] };
    response: { items: (Item | null)[] };
  };
  /** Where a table's items live and how busy each slice is: every slice that holds
   * items or saw load in the window, each node, the hottest sharding keys, and
   * the busiest slice over the mean of all slices. */
  DescribeSlices: {
    request: { table: string };
    response: TableLoad;
  };
}

export interface Load {
  items: number;
  bytes: number;
  readsPerSecond: number;
  writesPerSecond: number;
}

export interface SliceDescription extends Load {
  slice: number;
  node: string;
}

export interface NodeLoad extends Load {
  node: string;
}

export interface HotKey {
  /** The stored sharding key, as text (with even distribution: `<key>_<bucket>`). */
  key: string;
  slice: number;
  opsPerSecond: number;
}

export interface TableLoad {
  sliceCount: number;
  /** Rates are averages over this many seconds. */
  windowSeconds: number;
  slices: SliceDescription[];
  nodes: NodeLoad[];
  hotKeys: HotKey[];
  /** The busiest slice divided by the mean over all slices (0 when there is nothing). */
  maxOverMean: { items: number; reads: number; writes: number };
}

export type OperationName = keyof Operations;
export type Request<Op extends OperationName> = Operations[Op]['request'];
export type Response<Op extends OperationName> = Operations[Op]['response'];

export const OPERATION_NAMES: readonly OperationName[] = [
  'CreateTable',
  'DescribeTable',
  'ListTables',
  'DeleteTable',
  'PutItem',
  'GetItem',
  'UpdateItem',
  'DeleteItem',
  'GetItems',
  'BatchWrite',
  'BatchGet',
  'DescribeSlices',
];

export function isOperationName(op: unknown): op is OperationName {
  return typeof op === 'string' && (OPERATION_NAMES as readonly string[]).includes(op);
}
