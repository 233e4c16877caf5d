// The node's hand-off to a worker thread (slice-worker/worker-channel.ts), on a real
// thread: a worker's answer comes back in a buffer of its own size. msgpackr packs
// results into a buffer it reuses and grows to the largest result so far; an answer
// cloned as the view it is copied that whole buffer on every task (hundreds of KiB
// for a one-op GetItem once a large item had been read), which was most of a slice
// node's CPU per op at one request in flight (bench/PROFILE.md, 2026-11-25).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocketServer } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  PackedPage,
  splitPackedList,
  BATCH_REPLY_HEADROOM,
  decodeNodeFrame,
  decodeReplicationMessage,
  decodeSliceResults,
  encodeBatchReply,
  encodeNodeFrame,
  encodeOwnedResults,
  encodeReplicationMessage,
  encodeSliceOps,
  encodeSliceResults,
  KEPT_IN_LIST,
  NODE_PROTOCOL_VERSION,
  NodeFrame,
  packClientList,
  RESULT_ERROR,
  RESULT_OK,
  SliceOp,
  withReplyHeadroom,
  type SliceOpMessage,
  type SliceOpResult,
} from '../shared/protocol.js';
import { NAME_ATTRIBUTE } from '../shared/values.js';
import { APPEND_OK_NUMBERS, COORDINATOR, type ReplicationMessage } from '../shared/replication-protocol.js';
import { SLICE_COUNT_MAX } from '../shared/limits.js';
// The built module: its thread is dist/slice-worker/worker-thread.js, next to it (`npm test` builds first; run
// `npm run build` before running this file alone, or it tests the last build).
import { WorkerChannel } from '../dist/slice-worker/worker-channel.js';

const TABLE = 7;
const SLICE = 3;
const BIG_BYTES = 300_000;

describe('worker channel', () => {
  let dir: string;
  let channel: WorkerChannel;
  const failures: unknown[] = [];
  let failed: (err: unknown) => void = () => {};
  const failure = new Promise<never>((_, reject) => (failed = reject));
  failure.catch(() => {});

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'keyslice-worker-channel-'));
    channel = new WorkerChannel(
      { workerIndex: 0, workerCount: 1, dataDir: dir, durability: 'os', snapshotAfterBytes: 1 << 30, capacity: { readsPerSecond: 0, writesPerSecond: 0 }, host: '127.0.0.1', clusterSecret: '', epoch: new BigInt64Array(new SharedArrayBuffer(8)) },
      (err) => {
        failures.push(err);
        failed(err);
      },
    );
    await Promise.race([channel.open(), failure]);
    const assigned = await channel.run(encodeSliceOps([[SliceOp.Assign, 1, [SLICE]]]), true);
    expect(decodeSliceResults(assigned as Uint8Array)[0][0]).toBe(RESULT_OK);
  });

  afterAll(async () => {
    await channel?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  const run = async (ops: SliceOpMessage[]) => {
    const out = await channel.run(encodeSliceOps(ops));
    if (typeof out === 'string') throw new Error(out);
    return out;
  };

  it('answers a small read in a buffer of its own size after a large one', async () => {
    const big = { k: 'big', pad: 'x'.repeat(BIG_BYTES) };
    await run([[SliceOp.Put, TABLE, SLICE, 'big', big, BIG_BYTES + 16, null, null]]);
    const bigAnswer = await run([[SliceOp.Get, TABLE, SLICE, 'big', null, false]]);
    expect((decodeSliceResults(bigAnswer)[0][1] as { pad: string }).pad.length).toBe(BIG_BYTES);
    for (let i = 0; i < 3; i++) {
      const small = await run([[SliceOp.Get, TABLE, SLICE, 'missing', null, false]]);
      expect(decodeSliceResults(small)).toEqual([[RESULT_OK, null]]);
      // Its own size, and the headroom in front where the node writes its BatchReply's head (worker-thread.ts).
      expect(small.buffer.byteLength).toBe(BATCH_REPLY_HEADROOM + small.byteLength);
    }
    expect(failures).toEqual([]);
  });

  it('runs batches in the order they came, those that waited for the thread in one task', async () => {
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => run([[SliceOp.Put, TABLE, SLICE, `k${i}`, { k: `k${i}`, v: i }, 16, null, null], [SliceOp.Get, TABLE, SLICE, `k${i - 1}`, null, false]])));
    answers.forEach((a, i) => {
      const [, got] = decodeSliceResults(a);
      expect(got).toMatchObject(i === 0 ? [RESULT_OK, null] : [RESULT_OK, { k: `k${i - 1}`, v: i - 1 }]);
    });
    expect(failures).toEqual([]);
  });
});

describe('a worker whose replica resigns between two chunks of one task', () => {
  it('answers the earlier chunk\'s write on that slice Unavailable (outcome unknown), not OK, and keeps the task\'s other writes in the worker log', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyslice-worker-resign-'));
    const failures: unknown[] = [];
    const sent: ReplicationMessage[] = [];
    const OWN = SLICE + 1;
    const newChannel = () =>
      new WorkerChannel(
        { workerIndex: 0, workerCount: 1, dataDir: dir, durability: 'os', snapshotAfterBytes: 1 << 30, capacity: { readsPerSecond: 0, writesPerSecond: 0 }, host: '127.0.0.1', clusterSecret: '', epoch: new BigInt64Array(new SharedArrayBuffer(8)) },
        (err) => failures.push(err),
        (slice, _to, m) => sent.push(decodeReplicationMessage(m, 0, 'coordinator', slice)),
      );
    let channel = newChannel();
    const results = async (p: Promise<unknown>) => {
      const out = await p;
      if (typeof out === 'string') throw new Error(out);
      return decodeSliceResults(out as Uint8Array);
    };
    /** Waits (bounded: 5 s) until `ok`. */
    const until = async (what: string, ok: () => boolean | Promise<boolean>) => {
      const deadline = Date.now() + 5_000;
      while (!(await ok())) {
        if (Date.now() > deadline) throw new Error(`${what}: not within 5 s`);
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    try {
      await channel.open();
      // The worker is the one replica of SLICE (a set of one commits alone), and leads it.
      expect((await results(channel.run(encodeSliceOps([[SliceOp.Assign, 1, [SLICE, OWN]]]), true, { self: 0, replicated: [SLICE], peers: [] })))[0][0]).toBe(RESULT_OK);
      channel.deliver([[SLICE, COORDINATOR, Uint8Array.from(encodeReplicationMessage({ type: 'Prepare', term: 1 })), 0]]);
      await until('prepared', () => sent.some((m) => m.type === 'Prepared'));
      channel.deliver([[SLICE, COORDINATOR, Uint8Array.from(encodeReplicationMessage({ type: 'Lead', term: 1, followers: [], sets: [] })), 0]]);
      let writes = 0;
      const put = (key: string): SliceOpMessage => [SliceOp.Put, TABLE, SLICE, key, { k: key }, 16, null, [0xfeed, ++writes]];
      await until('serving', async () => (await results(channel.run(encodeSliceOps([put('first')]))))[0][0] === RESULT_OK);

      // One task: a read that keeps the thread busy, then a write on OWN (a slice of one replica: the worker log;
      // without a request id, as a router sends it there) and one on SLICE, then the node's new assignment that takes SLICE away (the channel runs what waited
      // meanwhile as one task, in order).
      const busy = channel.run(encodeSliceOps([[SliceOp.Get, TABLE, SLICE, 'first', null, false]]));
      const write = results(channel.run(encodeSliceOps([[SliceOp.Put, TABLE, OWN, 'kept', { k: 'kept' }, 16, null, null], put('lost')])));
      const assign = results(channel.run(encodeSliceOps([[SliceOp.Assign, 2, [OWN]]]), true, { self: 0, replicated: [], peers: [] }));
      await busy;
      const [kept, lost] = await write;
      expect((await assign)[0][0]).toBe(RESULT_OK);
      expect(kept[0]).toBe(RESULT_OK);
      expect(lost[0], JSON.stringify(lost)).not.toBe(RESULT_OK);
      expect(lost.slice(0, 2)).toEqual([RESULT_ERROR, 'Unavailable']);
      expect(failures).toEqual([]);
      // The acknowledged write on OWN is in the worker log: the resign's roll-back of SLICE did not take it along.
      await channel.destroy();
      channel = newChannel();
      await channel.open();
      expect((await results(channel.run(encodeSliceOps([[SliceOp.Assign, 3, [OWN]]]), true, { self: 0, replicated: [], peers: [] })))[0][0]).toBe(RESULT_OK);
      expect(await results(channel.run(encodeSliceOps([[SliceOp.Get, TABLE, OWN, 'kept', null, false]])))).toEqual([[RESULT_OK, expect.objectContaining({ k: 'kept' })]]);
      expect(failures).toEqual([]);
    } finally {
      await channel.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("a follower's AppendOks of one turn", () => {
  it('go to its leader in entries the leader takes, every one, however many answers a turn holds', async () => {
    // A follower answers each Append (and each KeepAlive that brings a commit point) once it is durable: a turn that
    // took more Appends than a slice count (a worker that fell behind its leaders, then caught up in one turn) has
    // that many AppendOks for one node. The leader's worker refuses an AppendOks entry of more than SLICE_COUNT_MAX
    // (decodeNodeFrame) and closes the link, so the sender may put no more in one entry.
    // The leader's node is a stand-in here: a node port that greets with Hello naming one worker's batch port, and
    // that batch port, which keeps every frame the follower's worker sends it on its own link (peer-links.ts).
    const dir = mkdtempSync(join(tmpdir(), 'keyslice-worker-appendoks-'));
    const failures: unknown[] = [];
    const sent: [number, ReplicationMessage][] = [];
    const frames: Buffer[] = [];
    const batchPort = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    batchPort.on('connection', (ws) => ws.on('message', (data: Buffer) => frames.push(data)));
    await new Promise<void>((r) => batchPort.once('listening', () => r()));
    const nodePort = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    nodePort.on('connection', (ws) => ws.send(encodeNodeFrame([NodeFrame.Hello, NODE_PROTOCOL_VERSION, 1, '0'.repeat(32), null, [(batchPort.address() as { port: number }).port], '1'.repeat(32)])));
    await new Promise<void>((r) => nodePort.once('listening', () => r()));
    const channel = new WorkerChannel(
      { workerIndex: 0, workerCount: 1, dataDir: dir, durability: 'os', snapshotAfterBytes: 1 << 30, capacity: { readsPerSecond: 0, writesPerSecond: 0 }, host: '127.0.0.1', clusterSecret: '', epoch: new BigInt64Array(new SharedArrayBuffer(8)) },
      (err) => failures.push(err),
    );
    const LEADER = 0;
    const ANSWERS = SLICE_COUNT_MAX + 1;
    /** Each frame as the leader's worker takes it: checked whole with its messages (decodeNodeFrame, receiver 'worker'). */
    const answered = () => {
      for (const f of frames.splice(0)) {
        const frame = decodeNodeFrame(f, 'worker');
        expect(frame[0]).toBe(NodeFrame.Replicate);
        if (frame[0] === NodeFrame.Replicate) for (const [slice, m] of frame[2]) sent.push([slice, m]);
      }
      return sent.reduce((n, [, m]) => n + (m.type !== 'AppendOks' ? 0 : m.slices.length / APPEND_OK_NUMBERS), 0);
    };
    try {
      await channel.open();
      // This worker (node 1) follows SLICE; node 0 leads it at term 1 and sends it ANSWERS empty Appends in one go.
      const peers: [number, string][] = [[LEADER, `ws://127.0.0.1:${(nodePort.address() as { port: number }).port}`]];
      const assigned = await channel.run(encodeSliceOps([[SliceOp.Assign, 1, [SLICE]]]), true, { self: 1, replicated: [SLICE], peers });
      expect(decodeSliceResults(assigned as Uint8Array)[0][0]).toBe(RESULT_OK);
      const append = Uint8Array.from(encodeReplicationMessage({ type: 'Append', term: 1, prevIndex: 0, prevTerm: 0, records: [], commitIndex: 0, sentAt: 5, leased: false }));
      channel.deliver(Array.from({ length: ANSWERS }, () => [SLICE, LEADER, append, 1] as [number, number, Uint8Array, number]));
      const deadline = Date.now() + 30_000;
      while (answered() < ANSWERS && failures.length === 0) {
        if (Date.now() > deadline) throw new Error(`${answered()} of ${ANSWERS} AppendOks within 30 s`);
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(failures).toEqual([]);
      expect(answered()).toBe(ANSWERS);
    } finally {
      await channel.destroy();
      await new Promise((r) => batchPort.close(r));
      await new Promise((r) => nodePort.close(r));
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe("the node's BatchReply around a worker's answer", () => {
  it('is byte for byte the frame encodeNodeFrame packs, its head written in front of the results without a copy', () => {
    for (const batchId of [0, 1, 0x3f, 0x40, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0xffffffff]) {
      for (const size of [0, 1, 0xff, 0x100, 0xffff, 0x10000, 70_000]) {
        const results = withReplyHeadroom([Uint8Array.from({ length: size }, (_, i) => i & 0xff)]);
        const expected = Buffer.from(encodeNodeFrame([NodeFrame.BatchReply, batchId, 3, results]));
        const frame = encodeBatchReply(batchId, 3, results);
        expect(Buffer.compare(Buffer.from(frame), expected), `batch ${batchId}, ${size} bytes`).toBe(0);
        expect(frame.buffer, 'the results are not copied').toBe(results.buffer);
        const [kind, id, worker, bytes] = decodeNodeFrame(frame, 'coordinator') as [number, number, number, Uint8Array];
        expect([kind, id, worker]).toEqual([NodeFrame.BatchReply, batchId, 3]);
        expect(Buffer.compare(bytes, results)).toBe(0);
      }
    }
    // Bytes without the headroom (not a worker's answer) are packed as a new frame.
    const plain = Uint8Array.of(1, 2, 3);
    const frame = encodeBatchReply(9, 1, plain);
    expect(frame.buffer).not.toBe(plain.buffer);
    expect(Buffer.from(frame)).toEqual(Buffer.from(encodeNodeFrame([NodeFrame.BatchReply, 9, 1, plain])));
  });
});

describe("a worker's answer written once (encodeOwnedResults)", () => {
  it('is byte for byte what encodeSliceResults packs, with the packed lists spliced in, in a buffer of its own', () => {
    const list = (n: number) => packClientList(Array.from({ length: n }, (_, i) => ({ [NAME_ATTRIBUTE]: `d_${i}`, device: 'd', seq: i, payload: 'x'.repeat(160) })));
    const big = list(100);
    const cases: SliceOpResult[][] = [
      [[RESULT_OK, [big, 'k\x01last', true, null, 100]]],
      [[RESULT_OK, [big, null, false, ['a', 'b'], 2]], [RESULT_OK, null], [RESULT_ERROR, 'WrongOwner', 'moved'], [RESULT_OK, [new Uint8Array(big), 'x', false, null, 70]]],
      // A small list, an item object and a scan's entries beside a packed list: packed with msgpackr as before.
      [[RESULT_OK, [list(1), null, false, null, 1]], [RESULT_OK, { [NAME_ATTRIBUTE]: 'a', v: 1 }], [RESULT_OK, [big, 'k', true, null, 100]]],
      [[RESULT_OK, [[[3, 'k1', KEPT_IN_LIST, 230], [3, 'k2', null, 12]], true, big]]],
      [[RESULT_OK, [[[3, 'k1', { [NAME_ATTRIBUTE]: 'a' }, 230]], true, big]]],
    ];
    for (const results of cases) {
      const own = encodeOwnedResults(results);
      expect(Buffer.compare(Buffer.from(own), Buffer.from(encodeSliceResults(results)))).toBe(0);
      expect(own.byteOffset).toBe(BATCH_REPLY_HEADROOM);
      expect(own.buffer.byteLength).toBe(BATCH_REPLY_HEADROOM + own.byteLength);
    }
  });
  it("writes a range page not yet joined (PackedPage) as its joined bytes would be written, at any size, beside other results", () => {
    // A page's items as the store keeps them: some as latin1 text, some as views of a packed list (splitPackedList).
    const page = (n: number) => {
      const bytes = list(n);
      return { bytes, page: new PackedPage(splitPackedList(bytes).map((b, i) => (i % 3 === 0 ? b : Buffer.from(b).toString('latin1')))) };
    };
    const list = (n: number) => packClientList(Array.from({ length: n }, (_, i) => ({ [NAME_ATTRIBUTE]: `d_${i}`, device: 'd', seq: i, payload: 'é'.repeat(80) })));
    for (const n of [0, 1, 5, 100, 400]) {
      const a = page(n);
      const b = page(3);
      const shapes = (x: Uint8Array | PackedPage, y: Uint8Array | PackedPage): SliceOpResult[] => [
        [RESULT_OK, [x, 'k\x01last', true, ['a', 'b'], n]],
        [RESULT_OK, { [NAME_ATTRIBUTE]: 'a', v: 1 }],
        [RESULT_ERROR, 'WrongOwner', 'moved'],
        [RESULT_OK, [y, null, false, null, 3]],
      ];
      const own = encodeOwnedResults(shapes(a.page, b.page));
      expect(Buffer.compare(Buffer.from(own), Buffer.from(encodeSliceResults(shapes(a.bytes, b.bytes)))), `${n} items`).toBe(0);
      expect(Buffer.compare(Buffer.from(encodeSliceResults(shapes(a.page, b.page))), Buffer.from(encodeSliceResults(shapes(a.bytes, b.bytes)))), `${n} items`).toBe(0);
      expect(Buffer.compare(Buffer.from(a.page.bytes()), Buffer.from(a.bytes))).toBe(0);
      expect(own.byteOffset).toBe(BATCH_REPLY_HEADROOM);
      expect(own.buffer.byteLength).toBe(BATCH_REPLY_HEADROOM + own.byteLength);
    }
  });
});
