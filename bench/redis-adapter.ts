// Redis as the benchmarks drive it (through ioredis connections, loaded from
// bench/peers): a hash per item (HSET / HGETALL) and a sorted set per sharding
// key for range reads. The sorted set is what a user picks for "the items of one
// key in sorting order": every member has score 0 and is `<sorting key,
// zero-padded>|<the item as JSON>`, so ZRANGEBYLEX ... LIMIT 0 100 answers the
// 100 items themselves in one round trip (no HGETALL per item), and the client
// parses them.
//
// One server, or a Redis Cluster: then the adapter is a cluster-aware client of
// its own. It reads the slot map with CLUSTER SLOTS, sends each command to the
// shard that owns its key's slot (bench/redis-slot.ts), splits a pipeline into
// one pipeline per shard, and on a MOVED answer reads the map again and resends
// (a bounded number of times).
import { chunk, inBatches, NotFound, type Adapter, type Row } from './driver.js';
import { keySlot, REDIS_CLUSTER_SLOTS } from './redis-slot.js';

export interface RedisLike {
  hset(key: string, ...fieldsAndValues: string[]): Promise<number>;
  hgetall(key: string): Promise<Record<string, string>>;
  zrangebylex(key: string, min: string, max: string, limit: 'LIMIT', offset: number, count: number): Promise<string[]>;
  call(command: string, ...args: (string | number)[]): Promise<unknown>;
  multi(): RedisPipeline;
  pipeline(): RedisPipeline;
  quit(): Promise<string>;
  disconnect(): void;
  info(section: string): Promise<string>;
  once(event: string, fn: (...a: unknown[]) => void): void;
}
export interface RedisPipeline {
  hset(key: string, ...fieldsAndValues: string[]): RedisPipeline;
  zadd(key: string, score: number, member: string): RedisPipeline;
  exec(): Promise<[Error | null, unknown][] | null>;
}
export type RedisCtor = new (options: Record<string, unknown>) => RedisLike;

const REQUEST_TIMEOUT_MS = 10_000;
const LOAD_IN_FLIGHT = 8;
/** Load pipelines of this many rows (each an HSET and a ZADD). */
const LOAD_ROWS_PER_PIPELINE = 500;
/** A command answered MOVED is sent again after a fresh slot map, at most this many times. */
const MOVED_RETRIES_MAX = 3;

export const SEQ_DIGITS = 10;
const lexSeq = (seq: number) => String(seq).padStart(SEQ_DIGITS, '0');

const isMoved = (err: unknown) => err instanceof Error && /^(MOVED|ASK) /.test(err.message);

/** A connection to one Redis server at 127.0.0.1:`port`, ready. */
export async function connectRedis(Redis: RedisCtor, port: number): Promise<RedisLike> {
  const r = new Redis({ host: '127.0.0.1', port, commandTimeout: REQUEST_TIMEOUT_MS, maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: false });
  await new Promise<void>((done, fail) => {
    r.once('ready', () => done());
    r.once('error', (e) => fail(e as Error));
  });
  return r;
}

export class RedisAdapter implements Adapter {
  /** Shard -> its connections (one server: one shard). */
  private readonly shards: RedisLike[][] = [];
  /** "host:port" -> shard index. */
  private readonly shardAt = new Map<string, number>();
  /** Slot -> shard (a cluster only; null: one server, every key on shard 0). */
  private slotOwner: Uint16Array | null = null;
  /** MOVED (or ASK) answers met; with a right slot map, none. */
  redirects = 0;

  private constructor(
    private readonly Redis: RedisCtor,
    private readonly connections: number,
    /** Put before every key, so that several clients' data sets do not meet (like a table per client). */
    private readonly prefix: string,
  ) {}

  /** `connections` connections to the one server at 127.0.0.1:`port`. */
  static async open(Redis: RedisCtor, port: number, connections: number, prefix = ''): Promise<RedisAdapter> {
    const a = new RedisAdapter(Redis, connections, prefix);
    await a.shardFor(`127.0.0.1:${port}`);
    return a;
  }

  /** A cluster-aware client of the Redis Cluster that the node at 127.0.0.1:`seedPort` belongs to:
   * `connections` connections to each of its shards. */
  static async openCluster(Redis: RedisCtor, seedPort: number, connections: number, prefix = ''): Promise<RedisAdapter> {
    const a = new RedisAdapter(Redis, connections, prefix);
    await a.shardFor(`127.0.0.1:${seedPort}`);
    a.slotOwner = new Uint16Array(REDIS_CLUSTER_SLOTS);
    await a.readSlotMap();
    return a;
  }

  get shardCount(): number {
    return this.shards.length;
  }

  private async shardFor(address: string): Promise<number> {
    const known = this.shardAt.get(address);
    if (known !== undefined) return known;
    const port = Number(address.slice(address.lastIndexOf(':') + 1));
    const conns: RedisLike[] = [];
    for (let i = 0; i < this.connections; i++) conns.push(await connectRedis(this.Redis, port));
    this.shards.push(conns);
    this.shardAt.set(address, this.shards.length - 1);
    return this.shards.length - 1;
  }

  /** CLUSTER SLOTS: [[first, last, [host, port, id], ...replicas], ...]; every slot must have an owner. */
  private async readSlotMap(): Promise<void> {
    const ranges = (await this.shards[0][0].call('CLUSTER', 'SLOTS')) as [number, number, [string, number, ...unknown[]]][];
    const owner = new Int32Array(REDIS_CLUSTER_SLOTS).fill(-1);
    for (const [first, last, [host, port]] of ranges) {
      const shard = await this.shardFor(`${host === '' ? '127.0.0.1' : host}:${port}`);
      owner.fill(shard, first, last + 1);
    }
    const unowned = owner.indexOf(-1);
    if (unowned !== -1) throw new Error(`Redis Cluster: slot ${unowned} has no owner in CLUSTER SLOTS`);
    this.slotOwner!.set(owner);
  }

  private shardOf(key: string): number {
    return this.slotOwner === null ? 0 : this.slotOwner[keySlot(key)];
  }

  /** One command on the shard of `key`, again after a fresh slot map if it answers MOVED. */
  private async onKey<T>(c: number, key: string, send: (r: RedisLike) => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const conns = this.shards[this.shardOf(key)];
      try {
        return await send(conns[c % conns.length]);
      } catch (err) {
        if (!isMoved(err) || this.slotOwner === null || attempt >= MOVED_RETRIES_MAX) throw err;
        this.redirects++;
        await this.readSlotMap();
      }
    }
  }

  /** A pipeline split by shard (`add` queues one row's commands; its keys all hash to `keyOf(row)`'s shard
   * or not: each command is checked, MOVED answers resend the rows that had them). */
  private async pipelined(c: number, rows: Row[], keyOf: (row: Row) => string, add: (p: RedisPipeline, row: Row) => void): Promise<void> {
    let pending = rows;
    for (let attempt = 0; pending.length > 0; attempt++) {
      const byShard = new Map<number, Row[]>();
      for (const row of pending) {
        const s = this.shardOf(keyOf(row));
        const list = byShard.get(s);
        if (list === undefined) byShard.set(s, [row]);
        else list.push(row);
      }
      const moved: Row[] = [];
      await Promise.all([...byShard].map(async ([s, shardRows]) => {
        const conns = this.shards[s];
        const p = conns[c % conns.length].pipeline();
        for (const row of shardRows) add(p, row);
        const res = await p.exec();
        if (res === null) throw new Error('pipeline failed');
        const perRow = res.length / shardRows.length;
        for (let i = 0; i < shardRows.length; i++) {
          const errs = res.slice(i * perRow, (i + 1) * perRow).map(([e]) => e).filter((e): e is Error => e !== null);
          if (errs.length === 0) continue;
          if (this.slotOwner !== null && errs.every(isMoved)) moved.push(shardRows[i]);
          else throw errs[0];
        }
      }));
      if (moved.length === 0) return;
      if (attempt >= MOVED_RETRIES_MAX) throw new Error(`${moved.length} rows still answered MOVED after ${attempt + 1} slot maps`);
      this.redirects += moved.length;
      await this.readSlotMap();
      pending = moved;
    }
  }

  itemKey(device: string, seq: number): string {
    return `${this.prefix}item:${device}:${lexSeq(seq)}`;
  }
  rangeKey(device: string): string {
    return `${this.prefix}range:${device}`;
  }
  private static rangeMember(row: Row): string {
    return `${lexSeq(row.seq)}|${JSON.stringify(row)}`;
  }
  private static hashFields(row: Row): string[] {
    return ['device', row.device, 'seq', String(row.seq), 'payload', row.payload];
  }

  /** Point writes as the anchor measures them: HSET of the item's hash only. */
  async put(c: number, row: Row): Promise<void> {
    const key = this.itemKey(row.device, row.seq);
    await this.onKey(c, key, (r) => r.hset(key, ...RedisAdapter.hashFields(row)));
  }
  /** A write that also makes the item visible to range reads, as a keyslice PutItem does: MULTI HSET + ZADD EXEC.
   * One server only (in a cluster the two keys are in different slots: CROSSSLOT). */
  async putIndexed(c: number, row: Row): Promise<void> {
    if (this.slotOwner !== null) throw new Error('putIndexed: MULTI over two slots is refused by a Redis Cluster');
    const res = await this.shards[0][c % this.connections].multi().hset(this.itemKey(row.device, row.seq), ...RedisAdapter.hashFields(row)).zadd(this.rangeKey(row.device), 0, RedisAdapter.rangeMember(row)).exec();
    const err = res?.find(([e]) => e !== null)?.[0];
    if (res === null || err) throw err ?? new Error('MULTI was aborted');
  }
  /** Several point writes (HSET each) in one pipeline per shard: a batch write. */
  async putMany(c: number, rows: Row[]): Promise<void> {
    await this.pipelined(c, rows, (row) => this.itemKey(row.device, row.seq), (p, row) => p.hset(this.itemKey(row.device, row.seq), ...RedisAdapter.hashFields(row)));
  }
  async get(c: number, device: string, seq: number): Promise<void> {
    const key = this.itemKey(device, seq);
    const h = await this.onKey(c, key, (r) => r.hgetall(key));
    if (h.payload === undefined) throw new NotFound();
  }
  async range(c: number, device: string, n: number): Promise<number> {
    const key = this.rangeKey(device);
    const members = await this.onKey(c, key, (r) => r.zrangebylex(key, `[${lexSeq(0)}`, `(${lexSeq(n)}`, 'LIMIT', 0, n));
    let count = 0;
    for (const m of members) if ((JSON.parse(m.slice(m.indexOf('|') + 1)) as Row).device === device) count++;
    return count;
  }
  /** Each row as its hash and as a member of its sharding key's sorted set, in pipelines. */
  async load(rows: Row[]): Promise<void> {
    let k = 0;
    await inBatches(chunk(rows, LOAD_ROWS_PER_PIPELINE), LOAD_IN_FLIGHT, async (batch) => {
      // HSET and ZADD of one row are two keys, maybe on two shards: one pipelined() pass for each.
      const c = k++;
      await this.pipelined(c, batch, (row) => this.itemKey(row.device, row.seq), (p, row) => p.hset(this.itemKey(row.device, row.seq), ...RedisAdapter.hashFields(row)));
      await this.pipelined(c, batch, (row) => this.rangeKey(row.device), (p, row) => p.zadd(this.rangeKey(row.device), 0, RedisAdapter.rangeMember(row)));
    });
  }
  async close(): Promise<void> {
    await Promise.allSettled(this.shards.flat().map((r) => r.quit()));
  }
}
