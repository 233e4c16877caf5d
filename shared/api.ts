// The operation set: one definition behind both transports (HTTP/JSON and
// WebSocket/msgpack) and the TypeScript client. Payloads are plain values.
import type { AccessEntry, AdviceReport } from './advice.js';
import type { NumberValue } from './decimal.js';
import type { ErrorCode } from './errors.js';
import type { KeyType, KeyValue } from './key-encoding.js';
import type { Item, Value } from './values.js';

/** One key column. */
export interface KeySchema {
  name: string;
  type: KeyType;
}

/** A sharding or sorting key: one column, or a list of columns whose values form
 * a tuple, ordered column by column (docs/key-encoding.md). A list of one column
 * is that column. */
export type KeyColumns = KeySchema | KeySchema[];

/** Spreads each sharding key over `buckets` stored sharding keys `<key>_<bucket>`,
 * bucket = xxHash32(sorting key) % buckets; reads by the original key gather them. */
export interface EvenDistribution {
  buckets: number;
}

export interface TableDescription {
  name: string;
  /** As created: one column as an object, several as a list. */
  shardingKey: KeyColumns;
  sortingKey: KeyColumns | null;
  evenDistribution: EvenDistribution | null;
  createdAt: number;
}

/** An item's primary key: its key attributes, or its object name: `<sharding>`
 * or `<sharding>.<sorting>` (split at the leftmost period) with one column on
 * each side; with several, every column's text joined by periods, where '%' and
 * '.' in all but the last are written %25 and %2E (docs/key-encoding.md). */
export type KeyRef = Item | string;

type Lower = { gt: KeyValue; gte?: never } | { gte: KeyValue; gt?: never };
type Upper = { lt: KeyValue; lte?: never } | { lte: KeyValue; lt?: never };

/** A condition on one sorting column: equal, a range bounded on one side or
 * both (`{gt: a, lte: b}`: a contradictory one matches nothing), between
 * (inclusive, low <= high), or begins with (string and binary). */
export type SortCondition =
  | { eq: KeyValue }
  | Lower
  | Upper
  | (Lower & Upper)
  | { between: [KeyValue, KeyValue] }
  | { beginsWith: string | Uint8Array };

/** The sorting key of a query. One column: its condition. Several: an object
 * naming the first columns in order, each with a value (equal) except perhaps
 * the last named one, which may take a condition:
 * `{SellerID: "a100", CardID: {gte: 10, lte: 100}}`. */
export type SortingKeyCondition = SortCondition | Record<string, KeyValue | SortCondition>;

/** The sharding key of a query: the value (one column), the values in column
 * order, or an object naming every sharding column. */
export type ShardingKeyValue = KeyValue | KeyValue[] | Record<string, KeyValue>;

export type ReturnValues = 'none' | 'old' | 'new';

/** Placeholders of a request's expressions (docs/expressions.md): `#name` to an
 * attribute name, `:value` to a value. Each must be used by some expression. */
export interface Placeholders {
  names?: Record<string, string>;
  values?: Record<string, Value>;
}

/** A write's condition (an expression). When it is false the write fails with
 * ConditionalCheckFailed and changes nothing; with
 * `returnValuesOnConditionCheckFailure: 'old'` the error carries the item as it was. */
export interface WriteCondition extends Placeholders {
  condition?: string;
  returnValuesOnConditionCheckFailure?: 'none' | 'old';
}

/** A write's idempotency id (docs/replication.md, "A client's write sent twice"): on a replicated slice, a
 * write sent again with the same id within IDEMPOTENCY_WINDOW_MS of the first is applied at most once and
 * answers what the first answered; the same id with a different request on the same slice is refused
 * (IdempotentParameterMismatch, nothing applied). 1 to IDEMPOTENCY_ID_CHARS_MAX printable ASCII characters,
 * chosen by the caller (a UUID is fine), unique per logical write. Not honored on a slice of one replica (R=1),
 * whose node keeps no ids: there it is checked and dropped. */
export interface Idempotent {
  idempotencyId?: string;
}

/** Which attributes to return: top-level names, or a projection expression (nested paths). Not both. */
export interface ProjectionOptions {
  attributes?: string[];
  projection?: string;
  names?: Record<string, string>;
}

/** How fresh a read must be. `consistentRead` true (the default) reads from the slice's leader: every write
 * acknowledged before the read is seen. false lets any replica of the slice answer, a follower included: it
 * answers from the committed writes it has applied, which may miss the latest ones for a moment (about
 * REPLICA_TICK_MS once writes stop; with no bound for a follower cut off from its leader while routers still
 * reach it: docs/replication.md), in exchange for spreading reads over every replica.
 * A full-table scan (GetItems without a sharding key) always reads from the leaders. */
export interface ReadOptions {
  consistentRead?: boolean;
}

/** One item of a batch that failed while the others went through. `list` and
 * `index` say where it was in the request; `name` is its object name. */
export interface ItemFailure {
  list: 'puts' | 'deletes' | 'keys';
  index: number;
  name: string;
  code: ErrorCode;
  message: string;
  retryable: boolean;
  /** Unavailable: the router already waited out its failover bounds for this item (ErrorDetails.routerRetried). */
  routerRetried?: true;
}

export interface Operations {
  CreateTable: {
    request: { table: string; shardingKey: KeyColumns; sortingKey?: KeyColumns | null; evenDistribution?: Partial<EvenDistribution> | null };
    response: { table: TableDescription };
  };
  DescribeTable: { request: { table: string }; response: { table: TableDescription } };
  ListTables: { request: Record<string, never>; response: { tables: string[] } };
  DeleteTable: { request: { table: string }; response: { table: TableDescription } };
  /** `returnValues: 'old'` answers the item it replaced (null: there was none). */
  PutItem: {
    request: { table: string; item: Item; returnValues?: 'none' | 'old' } & WriteCondition & Idempotent;
    response: { item?: Item | null };
  };
  GetItem: {
    request: { table: string; key: KeyRef } & ProjectionOptions & ReadOptions;
    response: { item: Item | null };
  };
  /** Creates the item if it is missing (unless the condition is false for a missing item). */
  UpdateItem: {
    request: {
      table: string;
      key: KeyRef;
      /** An update expression: SET, REMOVE, ADD (numbers, set elements), DELETE (set elements). */
      update?: string;
      /** The structured form (not with `update`): attributes to set (created or replaced). */
      set?: Item;
      /** Attributes to remove. */
      remove?: string[];
      /** Numbers to add; a missing attribute counts as 0. */
      add?: Record<string, NumberValue>;
      returnValues?: ReturnValues;
    } & WriteCondition &
      Idempotent;
    response: { item?: Item | null };
  };
  /** `returnValues: 'old'` also answers the deleted item (null: there was none). */
  DeleteItem: {
    request: { table: string; key: KeyRef; returnValues?: 'none' | 'old' } & WriteCondition & Idempotent;
    response: { deleted: boolean; item?: Item | null };
  };
  /** A range scan (with `shardingKey` or `keyCondition`) or a full-table scan (without).
   * `limit` counts examined items: a `filter` can make a page short, even empty, with a marker. */
  GetItems: {
    request: {
      table: string;
      shardingKey?: ShardingKeyValue;
      /** Even distribution: read this one bucket (the stored key `<shardingKey>_<bucket>`) instead of all. */
      bucket?: number;
      sortingKey?: SortingKeyCondition;
      /** The same as `shardingKey` and `sortingKey`, as an expression: `pk = :p AND sk > :a AND sk <= :b`. */
      keyCondition?: string;
      /** A condition on each examined item: only those for which it holds are returned. */
      filter?: string;
      values?: Record<string, Value>;
      reverse?: boolean;
      limit?: number;
      marker?: string;
      /** Parallel scan (no shardingKey): this call reads segment `segment` of `totalSegments`. */
      segment?: number;
      totalSegments?: number;
    } & ProjectionOptions &
      ReadOptions;
    /** `marker` is present when more items may follow; pass it back to continue.
     * `examined`: how many stored items the slices read for this page, a filter's
     * rejects included; a range scan reads only items inside its key range (with
     * even distribution, a bucket may read a few items ahead that the next page
     * reads again; a full-table scan's workers each read up to `limit`). */
    response: { items: Item[]; examined: number; marker?: string };
  };
  /** Every write is attempted; the ones that failed at run time (a node unavailable)
   * are listed in `failures`, the others are applied. A malformed request fails whole. With an
   * `idempotencyId`, each write of the batch gets its own id derived from it and its place in its list. */
  BatchWrite: {
    request: { table: string; puts?: Item[]; deletes?: KeyRef[] } & Idempotent;
    response: { failures: ItemFailure[] };
  };
  /** Items come back in the order of `keys`, null where there is none or where it
   * failed; the failed ones are listed in `failures`. */
  BatchGet: {
    request: { table: string; keys: KeyRef[] } & ProjectionOptions & ReadOptions;
    response: { items: (Item | null)[]; failures: ItemFailure[] };
  };
  /** Where a table's items live and how busy each slice is: every slice that holds
   * items or saw load in the window, each node, the hottest sharding keys, and
   * the busiest slice over the mean of all slices; rates and cumulative counters.
   * With a node down (or not answering within LOAD_REPORT_TIMEOUT_MS) the answer is
   * partial: `complete` is false and `unreported` names the node and its slices. */
  DescribeSlices: {
    request: { table: string };
    response: TableLoad;
  };
  /** The key-design advisor (docs/advisor.md): a design (a table's, or given by its
   * columns) and its alternatives judged on sample items and an optional access log,
   * placed over this cluster's slices and nodes; nothing is stored. */
  Advise: {
    request: {
      table?: string;
      shardingKey?: KeyColumns;
      sortingKey?: KeyColumns | null;
      evenDistribution?: Partial<EvenDistribution> | null;
      items: Item[];
      accessLog?: AccessEntry[];
      expectedItems?: number;
      momentWrites?: number;
    };
    response: AdviceReport;
  };
}

export interface Load {
  items: number;
  bytes: number;
  readsPerSecond: number;
  writesPerSecond: number;
}

/** Cumulative counts of a table's operations since the slice node's process started
 * (docs/metrics.md): they only grow, except that a node restart starts them at 0
 * again. Ops refused at capacity count in `throttled` only. */
export interface Counts {
  reads: number;
  writes: number;
  /** Stored bytes of the items that reads returned (GetItem) or examined (a range). */
  readBytes: number;
  /** Stored bytes of the items that writes stored (puts and updates; a delete adds 0). */
  writeBytes: number;
  throttled: number;
  /** Writes whose request id the slice had applied already (a router sent them again after an unknown outcome):
   * answered what the first copy got, applied nothing; not counted in `writes` (docs/replication.md). */
  duplicateWrites: number;
}

/** A slice's counts are those of the node that serves it now (a moved slice starts at 0 there). */
export interface SliceDescription extends Load, Counts {
  slice: number;
  node: string;
}

/** A node's counts cover every slice of the table it served since it started, moved-away ones too. */
export interface NodeLoad extends Load, Counts {
  node: string;
  /** Items and bytes of the table the node holds in memory over every slice there: those it leads (which `items`
   * and `bytes` count) and its follower replicas. A replica that left the node's set is dropped and stops counting. */
  heldItems: number;
  heldBytes: number;
}

/** A node whose part of a DescribeSlices answer is missing, and why. */
export interface UnreportedNode {
  node: string;
  /** The slices the cluster map gives it: none of them is in `slices`. */
  slices: number[];
  code: ErrorCode;
  message: string;
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
  /** The table's counters summed over the nodes that reported. */
  totals: Counts;
  /** false: some node did not report; its slices are in `unreported`, and every figure is of the rest. */
  complete: boolean;
  unreported: UnreportedNode[];
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
  'Advise',
];

export function isOperationName(op: unknown): op is OperationName {
  return typeof op === 'string' && (OPERATION_NAMES as readonly string[]).includes(op);
}

// ---- cluster status (GET /cluster/status, `keyslice status`) ----------------

export interface NodeStatusReport {
  node: string;
  /** active: takes slices; draining: giving its slices away; removed nodes are not listed. */
  status: 'active' | 'draining' | 'removed';
  /** Connected, heard from within NODE_HEARTBEAT_TIMEOUT_MS (any frame, a pong to the coordinator's ping each turn,
   * or a heartbeat), and (for a node that registered itself) heartbeating: what placement counts up. */
  up: boolean;
  /** How long nothing has come from the node although its link is open (ms), once that is NODE_HEARTBEAT_TIMEOUT_MS or
   * more: a frozen (SIGSTOP) or stalled node, not up; null otherwise (heard from lately, or its link not open). */
  silentMs: number | null;
  /** null for a node configured with --nodes or added by an operator, which need not heartbeat. */
  heartbeatMsAgo: number | null;
  /** Why the coordinator does not use this node although it answers (e.g. it came back with another data folder), or does not remove it automatically while it is down; null when neither. */
  problem: string | null;
  workers: number;
  /** Slices it leads (routing sends their requests to it). */
  slices: number;
  /** Slices it holds a replica of, leading or following (equal to slices at replication factor 1). */
  replicas: number;
  /** Replica-set changes that took its replica out and have not settled yet: they still count it (joint majorities),
   * so keyslice remove refuses it (InvalidState) until this is 0, and keyslice drain waits for that too. */
  unsettledChanges: number;
  /** Items and bytes of the slices it leads. */
  items: number;
  bytes: number;
  /** Items and bytes it holds in memory over every replica (leading or following): NodeLoad.heldItems. */
  heldItems: number;
  heldBytes: number;
  readsPerSecond: number;
  writesPerSecond: number;
}

export interface MoveReport {
  slice: number;
  from: string;
  to: string;
  phase: 'copy' | 'catch-up' | 'freeze' | 'switch';
  /** Items and bytes of the slice when the move started, and items copied so far. */
  items: number;
  bytes: number;
  copied: number;
  startedAt: number;
}

/** The leaders of replicated slices, as counts a program can check (status's note says the same in words). */
export interface LeadersReport {
  /** Slices with more than one replica. */
  replicated: number;
  /** Of those, slices whose elected leader serves: it leads, and the slice's last replica-set change settled, so it
   * commits (on a majority of the set alone). */
  led: number;
  /** Of those, slices whose leader leads (elected, or leading on across a replica-set change) while that change has
   * not settled: it commits nothing, its first record included, until a majority of the set before the change holds
   * that record too, so the slice takes no write. For a moment during a replica move or drain step; for as long as
   * they are down where a forced removal left fewer than a majority of the old set up. Not counted in led. */
  unsettledLed: number;
  /** Slices whose last replica-set change has not settled (their elections need a majority of the old set too). */
  unsettled: number;
  /** Slices with fewer replicas than the replication factor in force (placement adds the missing ones a few slices at a
   * time: after nodes joined, or a replica left with its node). Until then losing one more node can leave such a slice
   * without a majority, so no election and no write until it is back: "unsettled" 0 alone does not say a slice has
   * its R replicas. */
  shortOfFactor: number;
  /** Slices with a replica move under way (replica rebalancing onto a node that joined: a new replica added,
   * the one it replaces not dropped yet). */
  moving: number;
  /** Replica moves and drain steps undone since the coordinator started: their new replica's node was down for
   * REPLICA_MOVE_UNDO_DOWN_MS before the move completed, and the new replica left the set again (a move's slice back
   * to its old set; a drain's new replica placed on another node that is up, where there is one). */
  movesUndone: number;
  /** Elections and leadership handovers since the coordinator started. */
  elections: number;
  handovers: number;
  /** Replica-set changes since the coordinator started whose leader led on at a new term (LeadOn) instead of an election. */
  ledOn: number;
  /** Slices, counted once per change (a drain step, a replica move, a remove), whose leading replica the change took
   * out since the coordinator started after the handover of its leadership to a replica that stays did not complete
   * within LEADER_HANDOVER_BEFORE_CHANGE_MS: the slice elected, as it did before such changes handed over first
   * (docs/replication.md, "Handing over before the leader leaves"). */
  handoversGivenUp: number;
  /** Leadership handovers since the coordinator started whose election named another replica than the one handed to
   * (usually the old leader again: the replica handed to did not answer in time, or lacked the old leader's last
   * record). Each cost an election that did not move the leadership where it was handed. */
  handoversGivenBack: number;
  termMin: number;
  termMax: number;
}

export interface ClusterStatus {
  epoch: number;
  sliceCount: number;
  unassignedSlices: number;
  /** false when some node did not answer: items/bytes/load are then partial. */
  loadComplete: boolean;
  nodes: NodeStatusReport[];
  /** Replicas per slice in force, what was asked for (--replication-factor), and why (docs/replication.md). */
  replication: { factor: number; asked: number | 'auto'; why: string; note: string; leaders: LeadersReport };
  moves: {
    inFlight: MoveReport[];
    pending: number;
    completed: number;
    failed: number;
    itemsMoved: number;
    lastError: string;
    /** Replicated slices whose drain step or replica move waits, as the coordinator last looked (at most
     * REPLICA_WAITS_REPORTED_MAX, lowest slices first): the replica that is to leave (`node`) and why it has not yet. */
    waiting: { slice: number; node: string; why: string }[];
    /** How many slices wait in all (waiting lists the first of them). */
    waitingSlices: number;
  };
}
