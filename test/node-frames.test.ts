// The checks of shared/protocol.ts alone (no processes): every node frame is
// checked whole before use, and every slice op before a worker runs it. The
// frames of the hardening issue, then thousands of seeded near-valid ops
// (test/node-fuzz-model.ts), each of which must be refused, and the valid ops
// they start from, each of which must pass.
import { describe, expect, it } from 'vitest';
import { prng } from '../bench/keys.js';
import { batchError, checkSliceOp, checkSliceResult, closeReason, decodeNodeFrame, errorOfBatchError, staleBatchError, decodeReplicationMessage, encodeReplicationMessage, decodeSliceOps, EFFECT_DELETE, EFFECT_DROP_SLICE, EFFECT_DROP_TABLE, EFFECT_SET, MalformedFrame, NODE_PROTOCOL_VERSION, NodeFrame, SliceOp, type NodeFrameReceiver, readAppend, sliceSetOf, writeAppend } from '../shared/protocol.js';
import { checkReplicationMessage } from '../shared/replication-protocol.js';
import { Unpackr } from 'msgpackr';
import { MOVE_EFFECTS_BYTES_MAX, REPLICAS_LISTED_MAX, REPLICATION_APPEND_RECORDS_MAX } from '../shared/limits.js';
import { brokenOp, plainPackr, randomBytes, recordPackr, validOps } from './node-fuzz-model.js';
import { expectEqual } from './expect-equal.js';

const CLUSTER = '0123456789abcdef0123456789abcdef';
const INCARNATION = 'fedcba9876543210fedcba9876543210';
const frame = (v: unknown, to: NodeFrameReceiver = 'node') => decodeNodeFrame(recordPackr.pack(v), to);
const SEED = Number(process.env.KEYSLICE_FUZZ_SEED ?? 7);
/** An Append's bytes as msgpackr reads them (the decoder's way for any layout but writeAppend's). */
const msgpackrAppend = (bytes: Uint8Array): unknown => new Unpackr({ useRecords: false, mapsAsObjects: true, copyBuffers: true }).unpack(bytes);

describe('node frames', () => {
  it('refuses the frames of the issue: an Epoch that is not a number, an Assign without slices', () => {
    expect(() => frame([NodeFrame.Epoch, 'zzz'])).toThrow(MalformedFrame);
    expect(() => frame([NodeFrame.Epoch, 2 ** 53 + 2])).toThrow(/not a whole number/);
    expect(() => frame([NodeFrame.Epoch, -1])).toThrow(MalformedFrame);
    expect(() => frame([NodeFrame.Assign, 5, 16, null, CLUSTER, null])).toThrow(/slices/);
    expect(() => frame([NodeFrame.Assign, 5, 16, [0, 0], CLUSTER, null])).toThrow(/distinct/);
    expect(() => frame([NodeFrame.Assign, 5, 16, [16], CLUSTER, null])).toThrow(/below 16/);
    expect(() => frame([NodeFrame.Assign, 5, 16, [0]])).toThrow(/5 fields/);
    expect(() => frame([NodeFrame.Assign, 5, 16, [0], CLUSTER])).toThrow(/has 5 fields, got 4/);
    expect(() => frame([NodeFrame.Assign, 5, 16, [0], 'not-an-id', null])).toThrow(/cluster id/);
    // A well-formed Epoch of 2^52 passes the shape check: the node refuses it because of
    // the connection it comes on (test/node-protocol-fuzz.test.ts).
    expect(frame([NodeFrame.Epoch, 2 ** 52])).toEqual([NodeFrame.Epoch, 2 ** 52]);
    expect(frame([NodeFrame.Assign, 5, 16, [3, 1], CLUSTER, null])).toEqual([NodeFrame.Assign, 5, 16, [3, 1], CLUSTER, null]);
  });

  it('takes only the kinds its side receives, and checks batches part by part', () => {
    expect(() => frame([NodeFrame.Hello, NODE_PROTOCOL_VERSION, 2, CLUSTER, null, [1, 2], INCARNATION])).toThrow(/not one a slice node receives/);
    expect(() => frame([NodeFrame.Batch, 1, 1, []], 'coordinator')).toThrow(/not one a coordinator receives/);
    expect(frame([NodeFrame.Hello, NODE_PROTOCOL_VERSION, 2, CLUSTER, null, [7301, 7302], INCARNATION], 'coordinator')).toHaveLength(7);
    expect(() => frame([NodeFrame.Hello, 3, 2], 'coordinator')).toThrow(new RegExp(`speaks node protocol 3, this coordinator ${NODE_PROTOCOL_VERSION}`));
    // A Hello of the version before, whole (it named no incarnation): refused for its version, not as malformed.
    expect(() => frame([NodeFrame.Hello, NODE_PROTOCOL_VERSION - 1, 2, CLUSTER, null, [7301, 7302]], 'coordinator')).toThrow(
      `the slice node speaks node protocol ${NODE_PROTOCOL_VERSION - 1}, this coordinator ${NODE_PROTOCOL_VERSION}`,
    );
    expect(() => frame([NodeFrame.Hello, NODE_PROTOCOL_VERSION, 0, CLUSTER, null, [], INCARNATION], 'coordinator')).toThrow(/worker count/);
    // A batch port per worker (node protocol 19), each a port number.
    for (const ports of [null, [7301], [7301, 0], [7301, 65536], [7301, 'x']]) {
      expect(() => frame([NodeFrame.Hello, NODE_PROTOCOL_VERSION, 2, CLUSTER, null, ports, INCARNATION], 'coordinator'), JSON.stringify(ports)).toThrow(/batch ports/);
    }
    // The node process's incarnation (node protocol 29): 32 hex digits.
    for (const incarnation of [null, 'x', CLUSTER.toUpperCase(), CLUSTER.slice(1), 7]) {
      expect(() => frame([NodeFrame.Hello, NODE_PROTOCOL_VERSION, 2, CLUSTER, null, [7301, 7302], incarnation], 'coordinator'), String(incarnation)).toThrow(
        /^Hello: the incarnation \(the node process's id, made at its start\) is 32 hex digits, not /,
      );
    }
    expect(() => frame([NodeFrame.Hello, NODE_PROTOCOL_VERSION, 2, CLUSTER, null, [7301, 7302]], 'coordinator')).toThrow(/has 6 fields, got 5/);
    // A worker's batch port takes Batch frames (routers') and Replicate frames (peers' workers', node protocol 25) only.
    expect(frame([NodeFrame.Batch, 1, 2, [[0, Buffer.from([0x90])]]], 'worker')).toHaveLength(4);
    expect(frame([NodeFrame.Replicate, 1, []], 'worker')).toEqual([NodeFrame.Replicate, 1, []]);
    for (const kind of [NodeFrame.Assign, NodeFrame.Epoch, NodeFrame.Hello, NodeFrame.BatchReply]) {
      expect(() => frame([kind, 1], 'worker')).toThrow(/not one a worker's batch port receives/);
    }
    const ops = Buffer.from([0x90]);
    expect(frame([NodeFrame.Batch, 1, 2, [[0, ops], [1, ops]]])).toHaveLength(4);
    for (const parts of [null, [[0]], [[0, 'ops']], [[-1, ops]], [[0, ops], [0, ops]], [[64, ops]]]) {
      expect(() => frame([NodeFrame.Batch, 1, 2, parts]), JSON.stringify(parts)).toThrow(MalformedFrame);
    }
    expect(() => frame([NodeFrame.BatchError, 1, 'NoSuchCode', 'm', null], 'coordinator')).toThrow(MalformedFrame);
    expect(() => decodeNodeFrame(Buffer.from([0x92, 0x01]), 'node')).toThrow(/not valid msgpack/); // a list of 2 that ends after 1
  });

  it("checks a BatchError's epoch: a refusal for the batch's epoch names the node's (node protocol 26), no other one names any", () => {
    const stale = staleBatchError(4, 3, 7);
    expect(frame(stale, 'coordinator')).toEqual([NodeFrame.BatchError, 4, 'WrongOwner', 'batch for epoch 3, node is at epoch 7', 7]);
    expect(frame(batchError(5, 'MalformedRequest', 'm'), 'coordinator')).toEqual([NodeFrame.BatchError, 5, 'MalformedRequest', 'm', null]);
    for (const epoch of [null, -1, 1.5, 'x', 2 ** 53 + 2]) {
      expect(() => frame([NodeFrame.BatchError, 1, 'WrongOwner', 'm', epoch], 'coordinator'), JSON.stringify(epoch)).toThrow(/BatchError WrongOwner: the node's epoch .* is not a whole number/);
    }
    expect(() => frame([NodeFrame.BatchError, 1, 'MalformedRequest', 'm', 3], 'coordinator')).toThrow(/names epoch 3, which only a WrongOwner does/);
    // The frame of node protocol 25, without the field: refused whole (nodes of 25 and 26 refuse each other at Hello).
    expect(() => frame([NodeFrame.BatchError, 1, 'WrongOwner', 'batch for epoch 3, node is at epoch 7'], 'coordinator')).toThrow(/has 4 fields, got 3/);
    // The ops of the batch fail with the refusal, the node's epoch in its details; another refusal's carry none.
    const err = errorOfBatchError(stale);
    expect([err.code, err.message, err.details]).toEqual(['WrongOwner', 'batch for epoch 3, node is at epoch 7', { nodeEpoch: 7 }]);
    expect(errorOfBatchError(batchError(5, 'Internal', 'worker 0 failed')).details).toBeUndefined();
    // A node never refuses a batch for the epoch it is at.
    expect(() => staleBatchError(4, 7, 7)).toThrow(/invariant broken/);
  });

  it('checks Assign replication whole: every replica set includes this node, every other replica is a peer with a URL', () => {
    const good = { self: 1, peers: [[0, 'ws://127.0.0.1:7201'], [2, 'ws://127.0.0.1:7203']], replicas: [[3, [1, 0, 2]], [4, [0, 1]], [5, [1]]] };
    expect(frame([NodeFrame.Assign, 5, 16, [3, 5], CLUSTER, good])[5]).toEqual(good);
    const bad: [unknown, RegExp][] = [
      [{ ...good, extra: 1 }, /no field "extra"/],
      [{ ...good, self: -1 }, /self -1 is not a node index/],
      [{ ...good, self: 'x' }, /self "x" is not a node index/],
      [[1, [], []], /null or \{self, peers, replicas\}/],
      [{ ...good, peers: [[1, 'ws://h:1']] }, /peer 1 is this node or named twice/],
      [{ ...good, peers: [[0, 'ws://h:1'], [0, 'ws://h:2']] }, /peer 0 is this node or named twice/],
      [{ ...good, peers: [[0, 'http://h:1']] }, /URL "http:\/\/h:1" is not ws:\/\/host:port/],
      [{ ...good, peers: [[0]] }, /a peer is \[node index, url\]/],
      [{ ...good, replicas: [[16, [1]]] }, /below the slice count/],
      [{ ...good, replicas: [[3, [1]], [3, [1]]] }, /each slice once/],
      [{ ...good, replicas: [[3, []]] }, new RegExp(`1 to ${REPLICAS_LISTED_MAX} nodes`)],
      [{ ...good, replicas: [[3, [1, ...Array.from({ length: REPLICAS_LISTED_MAX }, (_, i) => i + 10)]]] }, new RegExp(`1 to ${REPLICAS_LISTED_MAX} nodes`)],
      [{ ...good, replicas: [[3, [1, 0, 0]]] }, /names a node twice/],
      [{ ...good, replicas: [[3, [0, 2]]] }, /does not include this node \(1\)/],
      [{ ...good, replicas: [[3, [1, 9]]] }, /replica 9 is not among the peers/],
      [{ ...good, replicas: [[3, [1, 'x']]] }, /replica "x" is not among the peers/],
    ];
    for (const [replication, why] of bad) {
      expect(() => frame([NodeFrame.Assign, 5, 16, [3], CLUSTER, replication]), JSON.stringify(replication)).toThrow(why);
    }
  });

  /** A Replicate frame as a sender puts it on the wire: each message its own bytes, KeepAlives a map. The bytes are
   * msgpackr's, not encodeReplicationMessage's: these stories are of the receiver, which must refuse what a broken
   * or foreign peer sends, and our own writer asserts against the malformed Appends among them (its bytes have their
   * own story below). */
  const wire = (f: unknown[]): unknown[] =>
    !Array.isArray(f[2]) ? f : [f[0], f[1], (f[2] as unknown[]).map((e) => (Array.isArray(e) && e.length === 2 && typeof e[1] === 'object' && e[1] !== null && !(e[1] instanceof Uint8Array) && !['KeepAlives', 'AppendOks'].includes((e[1] as { type?: string }).type ?? '') ? [e[0], plainPackr.pack(e[1])] : e))];
  /** What the receiver makes of it: the coordinator and a worker's batch port (peers' frames) decode every message
   * with the frame; a slice node (the coordinator's frames) checks the frame, and its worker each message's bytes
   * before it uses them. */
  const receive = (f: unknown[], to: NodeFrameReceiver) => {
    const got = frame(wire(f), to);
    if (to === 'node' && got[0] === NodeFrame.Replicate) for (const [slice, m] of got[2]) if (m instanceof Uint8Array) decodeReplicationMessage(m, got[1], 'node', slice);
    return got;
  };

  it('checks Replicate frames, for both receivers: the sender, each slice, each message (on a slice node, its worker)', () => {
    const append = { type: 'Append', term: 2, prevIndex: 0, prevTerm: 0, records: [{ term: 2, index: 1, payload: Buffer.from([1]), checksum: 5 }], commitIndex: 0, sentAt: 12, leased: true };
    const appendOks = { type: 'AppendOks', slices: [5, 2, 9, 4, 12, 6, 2, 3, 3, 12] };
    const ok = [NodeFrame.Replicate, 2, [[8, append], [9, { type: 'AppendOk', term: 2, matchIndex: 1, commitIndex: 1, sentAt: 12 }], [4, { type: 'KeepAliveOk', term: 2, sentAt: 12 }], [3, { type: 'KeepAlives', slices: [3, 2, 9, 12, 1, 5, 2, 7, 12, 0] }], [5, appendOks]]];
    // A node's own port takes the coordinator's Replicate only (node protocol 25): a peer's is refused by the decoder,
    // with the frame, whatever its messages, not later by the node.
    for (const from of [0, 2]) {
      for (const f of [ok, [NodeFrame.Replicate, from, []], [NodeFrame.Replicate, from, [[4, { type: 'KeepAliveOk', term: 2, sentAt: 12 }]]]]) {
        expect(() => frame(wire([f[0], from, f[2]]), 'node'), JSON.stringify(f).slice(0, 60)).toThrow(new MalformedFrame(`Replicate: a node's own port takes replication from the coordinator only, not from node ${from} (peers send to its workers' batch ports since node protocol 25)`));
      }
    }
    // The coordinator's frame, on a slice node's main thread: each message as its bytes, for its worker to check.
    const atNode = receive([NodeFrame.Replicate, -1, [[0, { type: 'Prepare', term: 3 }], [1, { type: 'Ping', seq: 1 }]]], 'node');
    expect((atNode[2] as unknown[][]).map(([, m]) => m instanceof Uint8Array)).toEqual([true, true]);
    // A worker's batch port (a peer's worker sends there, node protocol 25) decodes and checks every message with the
    // frame, before any is used; it takes none from the coordinator (its messages come through the node's main thread).
    const atWorker = frame(wire(ok), 'worker');
    expect((atWorker[2] as [number, { type: string }][]).map(([slice, m]) => [slice, m.type])).toEqual([[8, 'Append'], [9, 'AppendOk'], [4, 'KeepAliveOk'], [3, 'KeepAlives'], [5, 'AppendOks']]);
    const decoded = (atWorker[2] as unknown[][])[0][1] as typeof append;
    expect({ ...decoded, records: decoded.records.map((r) => ({ ...r, payload: [...r.payload] })) }).toEqual({ ...append, records: [{ ...append.records[0], payload: [1] }] });
    expect(() => frame(wire([NodeFrame.Replicate, -1, [[0, { type: 'Prepare', term: 3 }]]]), 'worker')).toThrow(/batch port takes replication from peers only/);
    expect(() => frame(wire([NodeFrame.Replicate, 2, [[7, { type: 'Ping', seq: 1 }]]]), 'worker')).toThrow(/slice 7: Ping is not sent from one replica to another/);
    expect(() => frame([NodeFrame.Replicate, 2, [[8, Buffer.from([0x92, 0x01])]]], 'worker')).toThrow(/slice 8: a replication message is not valid msgpack/);
    expect(() => frame([NodeFrame.Replicate, 2, [[8, Buffer.from(encodeReplicationMessage({ type: 'KeepAlives', slices: [8, 2, 0, 0, 0] }))]]], 'worker')).toThrow(/KeepAlives travel as a map/);
    // Node protocol 27: a turn's Pings to a worker and its Pongs travel folded, each as bytes, every slice checked.
    const pings = { type: 'Pings', slices: [0, 5, 2, 6] };
    const atNodePings = receive([NodeFrame.Replicate, -1, [[0, pings]]], 'node');
    expect(decodeReplicationMessage((atNodePings[2] as [number, Uint8Array][])[0][1], -1, 'node', 0)).toEqual(pings);
    const pongs = { type: 'Pongs', slices: [7, 1, 2, 1, 2, 9, 9, 1, 2, 0, 1, 4] };
    expect(receive([NodeFrame.Replicate, 2, [[7, pongs]]], 'coordinator')[2]).toEqual([[7, pongs]]);
    // Each under its first slice, which picks the worker a Pings goes to.
    expect(() => receive([NodeFrame.Replicate, -1, [[2, pings]]], 'node')).toThrow(/slice 2: a Pings's entry is under its first slice, 0/);
    expect(() => receive([NodeFrame.Replicate, 2, [[9, pongs]]], 'coordinator')).toThrow(/slice 9: a Pongs's entry is under its first slice, 7/);
    const answers = [NodeFrame.Replicate, 2, [[7, { type: 'Pong', seq: 1, term: 2, leading: false, commitTerm: 2, lastIndex: 1 }], [8, { type: 'Prepared', term: 3, lastTerm: 2, lastIndex: 1, leaseWaitMs: 900, ledTerm: 0 }]]];
    const atCoordinator = receive(answers, 'coordinator');
    expect(atCoordinator[2]).toEqual(answers[2]);
    expect(receive([NodeFrame.Replicate, -1, [[0, { type: 'Prepare', term: 3 }], [1, { type: 'Ping', seq: 1 }]]], 'node')[1]).toBe(-1);
    expect(receive([NodeFrame.Replicate, -1, [[0, { type: 'LeadOn', term: 4, from: 3, followers: [1, 2], sets: [[0, 1, 2], [0, 1]] }]]], 'node')[1]).toBe(-1);
    // Each hop carries its own messages only: a peer runs no election, the coordinator sends no records.
    const hops: [unknown[], NodeFrameReceiver, RegExp][] = [
      [[NodeFrame.Replicate, 2, [[7, { type: 'Ping', seq: 1 }]]], 'worker', /slice 7: Ping is not sent from one replica to another/],
      [[NodeFrame.Replicate, 2, [[7, { type: 'Prepare', term: 9 }]]], 'worker', /Prepare is not sent from one replica to another/],
      [[NodeFrame.Replicate, 2, [[7, { type: 'Pong', seq: 1, term: 2, leading: false, commitTerm: 2, lastIndex: 1 }]]], 'worker', /Pong is not sent from one replica/],
      [[NodeFrame.Replicate, -1, [[0, append]]], 'node', /slice 0: Append is not sent by the coordinator/],
      [[NodeFrame.Replicate, -1, [[0, { type: 'Refused', term: 1, code: 'StaleTerm', message: '', lastIndex: 0, commitIndex: 0 }]]], 'node', /Refused is not sent by the coordinator/],
      [ok, 'coordinator', /slice 8: Append is not sent to the coordinator/],
      [[NodeFrame.Replicate, 2, [[4, { type: 'KeepAliveOk', term: 2, sentAt: 12 }]]], 'coordinator', /slice 4: KeepAliveOk is not sent to the coordinator/],
      [[NodeFrame.Replicate, -1, [[4, { type: 'KeepAliveOk', term: 2, sentAt: 12 }]]], 'node', /KeepAliveOk is not sent by the coordinator/],
      [[NodeFrame.Replicate, 2, [[7, { type: 'LeadOn', term: 4, from: 3, followers: [1], sets: [[0, 1]] }]]], 'worker', /LeadOn is not sent from one replica to another/],
      [[NodeFrame.Replicate, 2, [[5, appendOks]]], 'coordinator', /slice 5: AppendOks is not sent to the coordinator/],
      [[NodeFrame.Replicate, -1, [[5, appendOks]]], 'node', /AppendOks is not sent by the coordinator/],
      [[NodeFrame.Replicate, 2, [[0, { type: 'Pings', slices: [0, 1] }]]], 'worker', /slice 0: Pings is not sent from one replica to another/],
      [[NodeFrame.Replicate, 2, [[0, { type: 'Pings', slices: [0, 1] }]]], 'coordinator', /slice 0: Pings is not sent to the coordinator/],
      [[NodeFrame.Replicate, -1, [[7, { type: 'Pongs', slices: [7, 1, 2, 1, 2, 9] }]]], 'node', /slice 7: Pongs is not sent by the coordinator/],
    ];
    for (const [f, to, why] of hops) expect(() => receive(f, to), JSON.stringify(f).slice(0, 80)).toThrow(why);
    const bad: [unknown[], RegExp][] = [
      [[NodeFrame.Replicate, -2, []], /sender -2 is not a node index or -1/],
      [[NodeFrame.Replicate, 'x', []], /sender "x"/],
      [[NodeFrame.Replicate, 0], /has 2 fields, got 1/],
      [[NodeFrame.Replicate, 0, null], /list of at most 4096/],
      [[NodeFrame.Replicate, 0, Array(4097).fill([0, { type: 'Ping', seq: 1 }])], /list of at most 4096/],
      [[NodeFrame.Replicate, 0, [[0]]], /an entry is \[slice, message\]/],
      [[NodeFrame.Replicate, 0, [[65536, { type: 'Ping', seq: 1 }]]], /an entry is \[slice, message\]/],
      [[NodeFrame.Replicate, 0, [[1, { type: 'Elect', term: 1 }]]], /slice 1: unknown replication message "Elect"/],
      [[NodeFrame.Replicate, 0, [[1, { type: 'Prepare', term: -1 }]]], /Prepare.term is missing/],
      [[NodeFrame.Replicate, 0, [[1, { type: 'Prepare', term: 1, x: 1 }]]], /Prepare has no field "x"/],
      [[NodeFrame.Replicate, -1, [[1, { type: 'LeadOn', term: 3, from: 3, followers: [1], sets: [] }]]], /LeadOn.from must be older than LeadOn.term/],
      [[NodeFrame.Replicate, -1, [[1, { type: 'LeadOn', term: 3, followers: [1], sets: [] }]]], /LeadOn.from is missing/],
      [[NodeFrame.Replicate, -1, [[1, { type: 'LeadOn', term: 3, from: 2, followers: [1], sets: [[]] }]]], /LeadOn.sets must be/],
      // A replica twice in a set would count twice toward its majority.
      [[NodeFrame.Replicate, -1, [[1, { type: 'Lead', term: 3, followers: [1, 2], sets: [[0, 1, 2], [0, 1, 1]] }]]], /Lead.sets must be a list of lists of distinct node indexes/],
      [[NodeFrame.Replicate, 0, [[1, { ...append, records: [{ term: 2, index: 1, payload: 'x', checksum: 5 }] }]]], /an Append record is/],
      [[NodeFrame.Replicate, 0, [[1, { type: 'AppendOk', term: 1, matchIndex: 1, sentAt: 0 }]]], /AppendOk.commitIndex is missing/],
      [[NodeFrame.Replicate, 0, [[1, { type: 'AppendOk', term: 1, matchIndex: 1, commitIndex: 1 }]]], /AppendOk.sentAt is missing/],
      [[NodeFrame.Replicate, 0, [[1, { ...append, leased: 1 }]]], /Append.leased must be true or false/],
      [[NodeFrame.Replicate, 0, [[1, { type: 'Prepared', term: 2, lastTerm: 1, lastIndex: 1, leaseWaitMs: -1, ledTerm: 0 }]]], /Prepared.leaseWaitMs is missing/],
      [[NodeFrame.Replicate, 0, [[1, { type: 'KeepAlives', slices: [1, 2] }]]], /KeepAlives.slices must be \[slice, term, commitIndex, sentAt, leased/],
      [[NodeFrame.Replicate, 0, [[1, { type: 'KeepAlives', slices: [1, 2, 3, 4, 2] }]]], /KeepAlives.slices must be/],
      [[NodeFrame.Replicate, 0, [[1, { type: 'KeepAlives', slices: [] }]]], /KeepAlives.slices must be/],
      [[NodeFrame.Replicate, 0, [[1, { type: 'KeepAlives', slices: [1, -2, 0] }]]], /KeepAlives.slices must be/],
      [[NodeFrame.Replicate, 0, [[1, { type: 'AppendOks', slices: [1, 2, 3, 4] }]]], /AppendOks.slices must be \[slice, term, matchIndex, commitIndex, sentAt/],
      [[NodeFrame.Replicate, 0, [[1, { type: 'AppendOks', slices: [] }]]], /AppendOks.slices must be/],
      [[NodeFrame.Replicate, 0, [[1, { type: 'AppendOks', slices: [1, 2, 3, 4, 0.5] }]]], /AppendOks.slices must be/],
      [[NodeFrame.Replicate, 0, [[1, { type: 'AppendOks', slices: [1, 2, 3, 4, 5], x: 1 }]]], /AppendOks has no field "x"/],
      [[NodeFrame.Replicate, -1, [[1, { type: 'Pings', slices: [1, 2, 3] }]]], /Pings.slices must be \[slice, seq, \.\.\.\]/],
      [[NodeFrame.Replicate, -1, [[1, { type: 'Pings', slices: [] }]]], /Pings.slices must be/],
      [[NodeFrame.Replicate, -1, [[1, { type: 'Pings', slices: [1, -1] }]]], /Pings.slices must be/],
      [[NodeFrame.Replicate, 0, [[1, { type: 'Pongs', slices: [1, 2, 3, 1, 2] }]]], /Pongs.slices must be \[slice, seq, term, leading \(0 or 1\), commitTerm, lastIndex/],
      [[NodeFrame.Replicate, 0, [[1, { type: 'Pongs', slices: [1, 2, 3, 2, 2, 9] }]]], /Pongs.slices must be/],
      [[NodeFrame.Replicate, 0, [[1, { type: 'Refused', term: 1, code: 'Nope', message: '', lastIndex: 0, commitIndex: 0 }]]], /Refused.code must be one of/],
      [[NodeFrame.Replicate, 0, [[1, Buffer.from([0x92, 0x01])]]], /slice 1: a replication message is not valid msgpack/],
    ];
    // A message other than KeepAlives as a map rather than its bytes: refused with the frame, by every receiver of a peer's.
    for (const to of ['worker', 'coordinator'] as const) expect(() => frame([NodeFrame.Replicate, 0, [[1, { type: 'AppendOk', term: 1, matchIndex: 1, commitIndex: 1, sentAt: 0 }]]], to)).toThrow(/slice 1: a message is its bytes/);
    // A peer's frame by the receivers of a peer's, the coordinator's by those of the coordinator's (a batch port takes none).
    for (const [f, why] of bad) for (const to of f[1] === -1 ? (['node', 'coordinator'] as const) : (['worker', 'coordinator'] as const)) expect(() => receive(f, to), JSON.stringify(f).slice(0, 80)).toThrow(why);
    // KeepAlives as a message's bytes (a sender's own encoding, not the map a link splits): refused by the worker's
    // check, not handed whole to a replica (which asserts that none reaches it).
    const keepAlives = Buffer.from(encodeReplicationMessage({ type: 'KeepAlives', slices: [1, 2, 0, 12, 0] }));
    for (const from of [-1, 0]) expect(() => decodeReplicationMessage(keepAlives, from, 'node', 1)).toThrow(MalformedFrame);
    expect(() => decodeReplicationMessage(keepAlives, 0, 'node', 1)).toThrow(/KeepAlives travel as a map/);
    const asBytes = Buffer.from(encodeReplicationMessage({ type: 'AppendOks', slices: [1, 2, 3, 3, 12] }));
    expect(() => decodeReplicationMessage(asBytes, 0, 'node', 1)).toThrow(/AppendOks travel as a map/);
  });

  it(`survives ${2000} random byte strings and msgpack values (seed ${SEED})`, () => {
    const r = prng(SEED);
    for (let i = 0; i < 2000; i++) {
      const bytes = i % 2 === 0 ? randomBytes(r, 80) : plainPackr.pack([Math.floor(r() * 9), ...Array.from({ length: Math.floor(r() * 5) }, () => [r(), 'x', null][Math.floor(r() * 3)])]);
      for (const to of ['node', 'coordinator'] as const) {
        try {
          decodeNodeFrame(bytes, to);
        } catch (err) {
          expect(err, `seed ${SEED}, case ${i}`).toBeInstanceOf(MalformedFrame);
        }
      }
    }
  });
});

describe('replication messages as bytes', () => {
  // Around each boundary of msgpack's whole-number forms (fixint, 8, 16 and 32 bits, then a double) and of bin lengths.
  const widths = [0, 1, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0xffffffff, 0x100000000, 2 ** 52];
  const lengths = [0, 1, 0xff, 0x100, 0xffff, 0x10000];
  /** A random Append of `records` records, each number at one of the widths; a payload `long` of one of the bin
   * lengths' boundaries, else shorter than `short` bytes. */
  const randomAppend = (r: () => number, records: number, long: boolean, short: number) => {
    const count = () => widths[Math.floor(r() * widths.length)];
    return {
      type: 'Append' as const, term: count(), prevIndex: count(), prevTerm: count(),
      records: Array.from({ length: records }, () => ({ term: count(), index: count(), payload: Uint8Array.from(Array.from({ length: long ? lengths[Math.floor(r() * lengths.length)] : Math.floor(r() * short) }, () => Math.floor(r() * 256))), checksum: Math.min(count(), 0xffffffff) })),
      commitIndex: count(), sentAt: count(), leased: r() < 0.5,
    };
  };

  it(`writes an Append field by field into bytes that decode to the message, at every width of each number (seed ${SEED})`, () => {
    const r = prng(SEED);
    for (let i = 0; i < 300; i++) {
      const m = randomAppend(r, [0, 1, 3, 15, 16, 40][i % 6], i % 50 === 0, 300);
      // (Copied, as a worker's bytes are on their way to a peer's worker: node-side buffers are Uint8Arrays.)
      const bytes = Uint8Array.from(encodeReplicationMessage(m));
      // Read by hand (readAppend), and to what msgpackr reads from the same bytes.
      expectEqual(readAppend(bytes), m, `seed ${SEED}, case ${i}`);
      expectEqual(msgpackrAppend(bytes), m, `seed ${SEED}, case ${i}`);
      const back = decodeReplicationMessage(bytes, 2, 'node', 1);
      expectEqual(back, m, `seed ${SEED}, case ${i}`);
      expect(Object.keys(back)).toEqual(Object.keys(m));
    }
  });

  it(`reads by hand only what msgpackr reads to the same whole Append: random Appends damaged, cut or reordered go to msgpackr and its check (seed ${SEED + 1})`, () => {
    const r = prng(SEED + 1);
    const m = { type: 'Append' as const, term: 300, prevIndex: 70_000, prevTerm: 2, records: [0, 1, 2].map((i) => ({ term: 3, index: 70_001 + i, payload: Uint8Array.from({ length: 40 * i }, (_, k) => k), checksum: 4_000_000_000 })), commitIndex: 69_999, sentAt: 2 ** 40, leased: false };
    const good = Uint8Array.from(writeAppend(m));
    let byHand = 0;
    const compare = (bytes: Uint8Array, what: string) => {
      const mine = readAppend(bytes);
      let theirs: unknown;
      try {
        theirs = msgpackrAppend(bytes);
      } catch {
        theirs = undefined; // not msgpack at all
      }
      if (mine !== null) {
        byHand++;
        // What it takes, msgpackr reads the same, and it is a whole message: never one that the check refuses.
        expectEqual(theirs, mine, what);
        expect(checkReplicationMessage(theirs), what).toBeNull();
        expect(checkReplicationMessage(mine), what).toBeNull();
      }
      // Either way the decoder answers a checked message or MalformedFrame, never another error.
      try {
        const back = decodeReplicationMessage(bytes, 2, 'node', 1);
        expect(checkReplicationMessage(back), what).toBeNull();
        if (mine !== null) expectEqual(back, mine, what);
      } catch (err) {
        expect(err, what).toBeInstanceOf(MalformedFrame);
        expect(mine, what).toBeNull();
      }
    };
    // Every cut: none is read by hand (an Append ends with its leased flag).
    for (let n = 0; n < good.length; n++) {
      compare(good.subarray(0, n), `cut at ${n}`);
      expect(readAppend(good.subarray(0, n)), `cut at ${n}`).toBeNull();
    }
    expect(readAppend(Uint8Array.from([...good, 0xc0])), 'a byte past its end').toBeNull();
    // Random Appends (every width of each number, 0-3 or 16 records), each changed 1-3 times: a byte set, the bytes cut,
    // a byte put in or taken out.
    const CASES = 3_000;
    for (let i = 0; i < CASES; i++) {
      const m = randomAppend(r, i % 100 === 0 ? 1 : i % 10 === 0 ? 16 : Math.floor(r() * 4), i % 100 === 0, 64);
      let bytes = Array.from(writeAppend(m));
      const changes: string[] = [];
      for (let c = 1 + Math.floor(r() * 3); c > 0; c--) {
        const at = Math.floor(r() * (bytes.length + 1));
        const kind = r() < 0.5 ? 0 : 1 + Math.floor(r() * 3); // half of them a byte set, which can keep the layout
        const v = Math.floor(r() * 256);
        if (kind === 0 && at < bytes.length) bytes[at] = v;
        else if (kind === 1) bytes = bytes.slice(0, at);
        else if (kind === 2) bytes.splice(at, 0, v);
        else bytes.splice(at, 1);
        changes.push(`${['set', 'cut', 'insert', 'delete'][kind]} ${at}${kind === 0 || kind === 2 ? `=${v}` : ''}`);
      }
      compare(Uint8Array.from(bytes), `seed ${SEED + 1}, case ${i}: ${changes.join(', ')}`);
    }
    // Payloads' bytes set stay read by hand (a payload is any bytes), as do some numbers changed to another of the
    // same width: the comparison is made on enough taken cases, not only on refusals.
    if (process.env.KEYSLICE_TEST_LOG) console.log(`${byHand} of ${CASES} changed Appends read by hand`);
    expect(byHand).toBeGreaterThan(CASES / 20);
    // msgpackr's own layout of the same message (map16 headers, other key order): not read by hand, decoded alike.
    const { type, ...fields } = m;
    const packed = Uint8Array.from(plainPackr.pack({ ...fields, leased: true, type }));
    expect(readAppend(packed)).toBeNull();
    expect(decodeReplicationMessage(packed, 2, 'node', 1)).toEqual({ ...m, leased: true });
    // The payloads are a copy: the bytes they came in may be reused.
    const taken = readAppend(good)!;
    good.fill(0);
    expect(taken).toEqual(m);
  });

  it(`reads one Append at a time through its one cursor: a read that threw at any point leaves nothing that changes the next, and a read begun inside another is refused, asserted (seed ${SEED + 2})`, () => {
    const r = prng(SEED + 2);
    // A longer Append first (more records, so more spans and a later place), then a shorter one.
    const long = randomAppend(r, 40, false, 4);
    const longBytes = Uint8Array.from(writeAppend(long));
    const short = randomAppend(r, 2, false, 64);
    const shortBytes = Uint8Array.from(writeAppend(short));
    /** `bytes` read through a proxy that calls `onRead` with the count of the elements read before (every read of
     * readAppend's goes through an index, its copy too). */
    const watched = (bytes: Uint8Array, onRead: (k: number) => void): Uint8Array => {
      let reads = 0;
      return new Proxy(bytes, {
        get(t, key) {
          if (typeof key === 'string' && /^\d+$/.test(key)) onRead(reads++);
          return Reflect.get(t, key);
        },
      });
    };
    let reads = 0;
    expect(readAppend(watched(longBytes, () => reads++))).toEqual(long);
    expect(reads).toBeGreaterThan(longBytes.length); // the walk, then the copy
    for (let k = 0; k < reads; k++) {
      expect(() => readAppend(watched(longBytes, (i) => { if (i === k) throw new Error('thrown mid-read'); })), `read ${k}`).toThrow('thrown mid-read');
      expectEqual(readAppend(shortBytes), short, `after a throw at read ${k}`);
    }
    // A read inside another (as a getter of its bytes could make): refused at once, whatever the outer read reached.
    for (let k = 0; k < reads; k += 7) {
      expect(() => readAppend(watched(longBytes, (i) => { if (i === k) readAppend(shortBytes); })), `read ${k}`).toThrow(/readAppend is not entered again while it reads/);
      expectEqual(readAppend(longBytes), long, `after a read begun at read ${k}`);
    }
  });

  it(`refuses an Append of more than REPLICATION_APPEND_RECORDS_MAX (${REPLICATION_APPEND_RECORDS_MAX}) records, read by hand or by msgpackr`, () => {
    const append = (count: number) => ({
      type: 'Append' as const, term: 3, prevIndex: 7, prevTerm: 2, commitIndex: 7, sentAt: 1_000, leased: true,
      records: Array.from({ length: count }, (_, i) => ({ term: 3, index: 8 + i, payload: Uint8Array.of(i & 0xff), checksum: 9 })),
    });
    const most = append(REPLICATION_APPEND_RECORDS_MAX);
    expect(readAppend(Uint8Array.from(writeAppend(most)))).toEqual(most);
    expect(decodeReplicationMessage(Uint8Array.from(writeAppend(most)), 2, 'node', 1)).toEqual(most);
    const over = append(REPLICATION_APPEND_RECORDS_MAX + 1);
    expect(checkReplicationMessage(over)).toMatch(new RegExp(`at most ${REPLICATION_APPEND_RECORDS_MAX} records`));
    // In writeAppend's layout (which leaves the count to its caller, replica.ts): not read by hand, then refused.
    const bytes = Uint8Array.from(writeAppend(over));
    expect(readAppend(bytes)).toBeNull();
    expect(() => decodeReplicationMessage(bytes, 2, 'node', 1)).toThrow(new RegExp(`at most ${REPLICATION_APPEND_RECORDS_MAX} records`));
    // In msgpackr's own layout: refused alike.
    expect(() => decodeReplicationMessage(Uint8Array.from(plainPackr.pack(over)), 2, 'node', 1)).toThrow(MalformedFrame);
  });

  it('has no fallback for an Append that a leader would not send: a field that is not a whole number is a bug, asserted', () => {
    // (Before, such an Append went to msgpackr, so that the round trip above passed whatever the hand-written writer did.)
    const m = { type: 'Append' as const, term: 3, prevIndex: 7, prevTerm: 2, records: [{ term: 3, index: 8, payload: Uint8Array.of(1, 2), checksum: 9 }], commitIndex: 7, sentAt: 1_000, leased: true };
    expect(decodeReplicationMessage(Uint8Array.from(writeAppend(m)), 2, 'node', 1)).toEqual(m);
    for (const bad of [{ ...m, term: -1 }, { ...m, sentAt: 1.5 }, { ...m, prevIndex: 2 ** 53 }, { ...m, leased: 1 as unknown as boolean }]) {
      expect(() => encodeReplicationMessage(bad), JSON.stringify(bad)).toThrow(/whole numbers >= 0 and leased a boolean/);
    }
    for (const record of [{ ...m.records[0], index: 0.5 }, { ...m.records[0], checksum: -2 }, { ...m.records[0], payload: [1, 2] as unknown as Uint8Array }]) {
      expect(() => encodeReplicationMessage({ ...m, records: [record] }), JSON.stringify(record)).toThrow(/a replica record is whole numbers >= 0 and bytes/);
    }
  });

  it("refuse any type that is not a message's name with MalformedFrame, never another error (a slice node's worker checks them)", () => {
    // The raw maps {type: <value>}: a 64-bit integer (a BigInt once decoded), a map with a toString key, and others.
    const typed = (value: number[]) => Uint8Array.from([0x81, 0xa4, ...Buffer.from('type'), ...value]);
    const types = [
      [0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
      [0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0],
      [0x81, 0xa8, ...Buffer.from('toString'), 0x01],
      [0x81, 0xa7, ...Buffer.from('valueOf'), 0xc0],
      [0xc0],
      [0x92, 0x01, 0x02],
      [0xd6, 0xff, 0, 0, 0, 1],
      [0xc4, 0x01, 0x41],
      [0xa5, ...Buffer.from('Nope!')],
    ];
    for (const t of types) {
      for (const [from, to] of [[2, 'node'], [-1, 'node'], [2, 'coordinator']] as const) {
        expect(() => decodeReplicationMessage(typed(t), from, to, 7), Buffer.from(t).toString('hex')).toThrow(MalformedFrame);
      }
    }
  });
});

describe('slice ops', () => {
  it('passes every valid op, and SliceOp.Assign only from the node itself', () => {
    for (const op of validOps()) expect(checkSliceOp(op, false), JSON.stringify(op)).toBeNull();
    expect(checkSliceOp([SliceOp.Assign, 3, [0, 2]], true)).toBeNull();
    expect(checkSliceOp([SliceOp.Assign, 3, [0, 2]], false)).toMatch(/never in a batch/);
  });

  it("takes a write's request id as a router's [instance, counter] or a client's [instance, counter, true], nothing else", () => {
    const put = (id: unknown) => [SliceOp.Put, 3, 5, 'k', { id: 'k' }, 10, null, id];
    const update = (id: unknown) => [SliceOp.Update, 3, 5, 'k', { base: { id: 'k' }, actions: [], condition: null, oldOnFailure: false, returnValues: 'none' }, id];
    for (const op of [put, update]) {
      for (const ok of [null, [1, 2], [2 ** 52 - 1, 2 ** 53 - 1, true]]) expect(checkSliceOp(op(ok), false), JSON.stringify(ok)).toBeNull();
      for (const bad of [[1, 2, false], [1, 2, 1], [1, 2, true, true], [1, 0, true], [2 ** 52, 1, true], [1], 'a.b']) {
        expect(checkSliceOp(op(bad), false), JSON.stringify(bad)).toMatch(/request id: .* is not null, \[instance, counter\] or \[instance, counter, true\]/);
      }
    }
  });

  it('refuses moved changes the target would assert on: a dropped table, another slice, objects, too many bytes', () => {
    const moved = (effects: unknown[]) => Uint8Array.from(plainPackr.pack(effects));
    expect(checkSliceOp([SliceOp.MoveApply, 3, moved([[EFFECT_DROP_TABLE, 1]]), false], false)).toMatch(/set, delete and drop-slice only/);
    expect(checkSliceOp([SliceOp.MoveApply, 3, moved([[EFFECT_SET, 1, 4, 'k', {}, 1]]), true], false)).toMatch(/not \[set, table, 3/);
    expect(checkSliceOp([SliceOp.MoveApply, 3, [[EFFECT_SET, 1, 3, 'k', {}, 1]], true], false)).toMatch(/effects: not bytes/);
    expect(checkSliceOp([SliceOp.MoveApply, 3, Uint8Array.of(...moved([[EFFECT_SET, 1, 3, 'k', {}, 1]]), 0x90), true], false)).toMatch(/effects: not one msgpack value/);
    expect(checkSliceOp([SliceOp.MoveApply, 3, new Uint8Array(MOVE_EFFECTS_BYTES_MAX + 1), true], false)).toMatch(/over 134217728/);
    // Right ones: items by their headers alone, and a delete and a drop (decoded whole).
    expect(checkSliceOp([SliceOp.MoveApply, 3, moved([[EFFECT_SET, 1, 3, 'k', { a: [1, 'b'] }, 1]]), true], false)).toBeNull();
    expect(checkSliceOp([SliceOp.MoveApply, 3, moved([[EFFECT_DELETE, 1, 3, 'k'], [EFFECT_DROP_SLICE, 3, null], [EFFECT_SET, 1, 3, 'k', { m: { x: 1 } }, 1]]), true], false)).toBeNull();
  });

  it('refuses a move\'s answers that the coordinator would read or pass on wrong, node protocol 27\'s objects among them', () => {
    const read = [SliceOp.MoveRead, 3, null, 1000] as const;
    const effects = Uint8Array.from(plainPackr.pack([[EFFECT_SET, 1, 3, 'k', { a: 1 }, 10]]));
    expect(() => checkSliceResult([...read], [1, 1, effects, [1, 'k'], false])).not.toThrow();
    expect(() => checkSliceResult([...read], [0, 0, Uint8Array.of(0x90), null, true])).not.toThrow();
    const bads: unknown[] = [
      [[], [[EFFECT_SET, 1, 3, 'k', { a: 1 }, 10]], null, true], // 27's [changes, items, next, done]
      [1, 1, [[EFFECT_SET, 1, 3, 'k', { a: 1 }, 10]], null, true],
      [-1, 1, effects, null, true],
      [1, 1, effects, [1], false],
      [1, 1, effects, ['k', 1], false],
      [1, 1, effects, null, 'yes'],
      [1, 1, new Uint8Array(MOVE_EFFECTS_BYTES_MAX + 1), null, true],
      'x',
    ];
    bads.forEach((bad, i) => expect(() => checkSliceResult([...read], bad), `answer ${i}`).toThrow(MalformedFrame));
    expect(() => checkSliceResult([SliceOp.MoveFreeze, 3], effects)).not.toThrow();
    expect(() => checkSliceResult([SliceOp.MoveFreeze, 3], [[EFFECT_DELETE, 1, 3, 'k']])).toThrow(MalformedFrame);
    expect(() => checkSliceResult([SliceOp.MoveStart, 3], [5, 100])).not.toThrow();
    expect(() => checkSliceResult([SliceOp.MoveStart, 3], [5])).toThrow(MalformedFrame);
  });

  it('refuses a key that is not a byte string wherever an op names one: a worker writes its keys so (a snapshot asserts it)', () => {
    // An encoded key's chars are bytes (shared/key-encoding.ts); one past 0xff, let in, failed a worker's compaction
    // (log-format.ts keyUtf8Bytes asserts it). Each op is first checked with a byte-string key (taken), then with a
    // char past 0xff, and a lone surrogate.
    const range = (low: string, high: string) => ({ low, high, lowInclusive: true, highInclusive: true, reverse: false, withKeys: false, packed: false, limit: 1, projection: null, filter: null });
    const ops = (key: string): unknown[] => [
      [SliceOp.Put, 3, 5, key, { id: 'k' }, 10, null, null],
      [SliceOp.Put, 3, 5, key, { id: 'k' }, 10, null, [1, 2]],
      [SliceOp.Get, 3, 5, key, null, false],
      [SliceOp.Get, 3, 5, key, null, true],
      [SliceOp.Scan, 3, 0, key, 10, null, null, sliceSetOf(0, [0, 3, 15]), false],
      [SliceOp.ReplicaGet, 3, 5, key, null, false],
      [SliceOp.Delete, 3, 5, key, null, null],
      [SliceOp.Update, 3, 5, key, { base: { id: 'k' }, actions: [], condition: null, oldOnFailure: false, returnValues: 'none' }, null],
      [SliceOp.Range, 3, 5, range(key, 'z')],
      [SliceOp.Range, 3, 5, range('a', key)],
      [SliceOp.MoveApply, 5, Uint8Array.from(plainPackr.pack([[EFFECT_SET, 1, 5, key, {}, 1]])), true],
      [SliceOp.MoveApply, 5, Uint8Array.from(plainPackr.pack([[EFFECT_DELETE, 1, 5, key]])), true],
      [SliceOp.MoveRead, 5, [1, key], 100],
    ];
    for (const op of ops('k\u00ff\u0000')) expect(checkSliceOp(op, false), JSON.stringify(op)).toBeNull();
    for (const bad of ['k\u0100', '\ud800']) {
      for (const op of ops(bad)) expect(checkSliceOp(op, false), JSON.stringify(op)).toMatch(/encoded key/);
    }
  });

  it('refuses an answer that names a key that is not a byte string: a range\'s last key and keys, a move\'s next cursor', () => {
    // The router sends a range's last key back as the next page's bound, and the coordinator a move's cursor back to
    // its source: checked where they arrive, as the ops that carry them on are.
    const spec = { low: 'a', high: 'z', lowInclusive: true, highInclusive: true, reverse: false, withKeys: true, packed: false, limit: 1, projection: null, filter: null };
    const range = [SliceOp.Range, 3, 5, spec] as const;
    const effects = Uint8Array.from(plainPackr.pack([[EFFECT_SET, 1, 3, 'k', { a: 1 }, 10]]));
    const answers = (key: string): [Parameters<typeof checkSliceResult>[0], unknown][] => [
      [[...range], [[{ id: 1 }], key, true, ['k'], 1]],
      [[...range], [[{ id: 1 }], 'k', true, [key], 1]],
      [[SliceOp.MoveRead, 3, null, 1000], [1, 1, effects, [1, key], false]],
    ];
    for (const [op, r] of answers('k\u00ff\u0000')) expect(() => checkSliceResult(op, r), JSON.stringify(r)).not.toThrow();
    for (const bad of ['k\u0100', '\ud800']) {
      for (const [op, r] of answers(bad)) expect(() => checkSliceResult(op, r), JSON.stringify(r)).toThrow(/encoded key \(a byte string\)|byte strings/);
    }
  });

  it(`refuses 5000 seeded ops with one thing wrong each (seed ${SEED})`, () => {
    const r = prng(SEED);
    for (let i = 0; i < 5000; i++) {
      const op = brokenOp(r);
      // Through msgpack, as a worker gets it (undefined, NaN, Dates and Buffers as decoded).
      const [decoded] = decodeSliceOps((i % 2 === 0 ? recordPackr : plainPackr).pack([op]));
      expect(checkSliceOp(decoded, false), `seed ${SEED}, case ${i}: ${JSON.stringify(op)?.slice(0, 300)}`).toEqual(expect.any(String));
    }
  });

  it('cuts a close reason to the 123 bytes a close frame holds, at a character boundary', () => {
    expect(closeReason('x'.repeat(200))).toHaveLength(123);
    const cut = closeReason('é'.repeat(100));
    expect(Buffer.byteLength(cut)).toBe(122);
    expect(cut).toBe('é'.repeat(61));
  });

  it('reads op bytes that do not decode, or that are not a list, as MalformedFrame', () => {
    expect(() => decodeSliceOps(Buffer.from([0x92, 0x01]))).toThrow(MalformedFrame);
    expect(() => decodeSliceOps(plainPackr.pack(5))).toThrow(/a list of at most/);
    expect(() => decodeSliceOps(plainPackr.pack(Array(513).fill(0)))).toThrow(/a list of at most/);
  });
});
