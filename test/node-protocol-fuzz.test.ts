// The slice node's port against a peer that has the cluster secret and sends
// nonsense, through real processes. First the frames of the hardening issue (an
// Epoch frame with a string or 2^52, op bytes that do not decode, an Assign
// without slices), then a few thousand seeded frames of every kind
// (test/node-fuzz-model.ts). After each frame a probe (a Batch of epoch 0, which
// the node refuses with a BatchError WrongOwner naming its epoch N) tells whether the node
// kept the connection, and at what epoch it is. Afterwards the node is the same
// process, at the same epoch, its coordinator never lost it, and every item
// written before reads back as written.
//
// Replay: KEYSLICE_FUZZ_SEED=<seed> (printed on failure); KEYSLICE_FUZZ_FRAMES sets the count.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Unpackr } from 'msgpackr';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prng } from '../bench/keys.js';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startLocalCluster, type LocalCluster } from '../coordinator/cli/local-cluster.js';
import { CLUSTER_SECRET_HEADER, NodeFrame, RESULT_ERROR, SliceOp } from '../shared/protocol.js';
import { epochOfRefusal } from './node-dial.js';
import { fuzzFrame, plainPackr, recordPackr, type FuzzFrame } from './node-fuzz-model.js';

const SEED = Number(process.env.KEYSLICE_FUZZ_SEED ?? Date.now() % 2 ** 31);
const FRAMES = Number(process.env.KEYSLICE_FUZZ_FRAMES ?? 3000);
const TIME_BUDGET_MS = 90_000;
const WAIT_MS = 10_000;
const ITEMS = 200;
const unpackr = new Unpackr({ useRecords: true, mapsAsObjects: true });

let dataDir: string;
let cluster: LocalCluster;
let client: KeysliceClient;
const lines: string[] = [];

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'keyslice-fuzz-'));
  cluster = await startLocalCluster({ dataDir, nodes: 2, workers: 2, slices: 16, durability: 'os', log: (l) => lines.push(l) });
  client = await KeysliceClient.connect(cluster.url);
  await client.createTable('fuzz', { name: 'id', type: 'string' });
  for (let i = 0; i < ITEMS; i += 25) {
    expect(await client.batchWrite('fuzz', { puts: Array.from({ length: 25 }, (_, j) => ({ id: `item-${i + j}`, v: i + j })) })).toEqual([]);
  }
});
afterAll(async () => {
  await client?.close();
  await cluster?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

/** A connection to a slice node with the cluster secret, as any secret holder could open. */
class Peer {
  readonly ws: WebSocket;
  closed = false;
  /** The close frame's code and reason, once closed. */
  closedWith: [number, string] | null = null;
  private readonly waiters = new Map<number, (frame: unknown[]) => void>();
  private readonly onClose: (() => void)[] = [];
  private nextProbe = 1e12;

  private constructor(url: string) {
    this.ws = new WebSocket(url, { headers: { [CLUSTER_SECRET_HEADER]: cluster.clusterSecret ?? '' } });
    this.ws.on('message', (data: Buffer) => {
      const frame = unpackr.unpack(data) as unknown[];
      if (frame[0] === NodeFrame.BatchReply || frame[0] === NodeFrame.BatchError) this.waiters.get(frame[1] as number)?.(frame);
    });
    this.ws.on('close', (code, reason) => {
      this.closed = true;
      this.closedWith = [code, reason.toString()];
      for (const f of this.onClose.splice(0)) f();
    });
    this.ws.on('error', () => {});
  }

  static open(url: string): Promise<Peer> {
    const p = new Peer(url);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no Hello from the node')), WAIT_MS);
      p.ws.once('message', () => {
        clearTimeout(timer);
        resolve(p);
      });
      p.ws.once('close', () => reject(new Error('the node closed the connection before its Hello')));
    });
  }

  send(bytes: Uint8Array): void {
    this.ws.send(bytes);
  }

  /** The frames that answer batch `id` (one per part), or what came before the connection closed. */
  replies(id: number, count: number): Promise<unknown[][]> {
    const got: unknown[][] = [];
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(id);
        resolve(got);
      };
      const timer = setTimeout(() => reject(new Error(`batch ${id}: ${got.length} of ${count} answers within ${WAIT_MS} ms`)), WAIT_MS);
      this.waiters.set(id, (frame) => {
        got.push(frame);
        if (got.length === count) done();
      });
      if (this.closed) done();
      else this.onClose.push(done);
    });
  }

  /** The node's epoch (a Batch of epoch 0 is refused naming it: epochOfRefusal), or null once the connection is closed. */
  async epoch(): Promise<number | null> {
    if (this.closed) return null;
    const id = this.nextProbe++;
    const answer = this.replies(id, 1);
    this.send(recordPackr.pack([NodeFrame.Batch, id, 0, []]));
    const [frame] = await answer;
    if (frame === undefined) return null;
    const epoch = epochOfRefusal(frame);
    if (epoch === null) throw new Error(`unexpected probe answer ${JSON.stringify(frame)}`);
    return epoch;
  }
}

const mapEpoch = async () => ((await (await fetch(`${cluster.url}/cluster/status`, { signal: AbortSignal.timeout(WAIT_MS) })).json()) as { epoch: number }).epoch;

/** The node is the same process, at `epoch`, its coordinator never lost it, and every item is there. */
async function expectIntact(epoch: number, coordinatorLinesBefore: number): Promise<void> {
  for (const n of cluster.nodes) expect(n.child.exitCode === null && n.child.signalCode === null, `${n.name} is alive`).toBe(true);
  const peer = await Peer.open(cluster.nodes[0].url);
  expect(await peer.epoch()).toBe(epoch);
  peer.ws.close();
  expect(await mapEpoch()).toBe(epoch);
  expect(lines.slice(coordinatorLinesBefore).filter((l) => /disconnected|broke the protocol|malformed/.test(l) && l.startsWith('[coordinator]'))).toEqual([]);
  const items = await client.getAllItems({ table: 'fuzz' });
  expect(items.filter((i) => String(i.id).startsWith('item-')).map((i) => i.v).sort((a, b) => Number(a) - Number(b))).toEqual(Array.from({ length: ITEMS }, (_, i) => i));
  await client.putItem('fuzz', { id: 'after', v: epoch });
  expect(await client.getItem('fuzz', 'after')).toMatchObject({ v: epoch });
}

describe('a slice node given bad frames by a peer with the cluster secret', () => {
  it('refuses the frames of the issue, and stays alive at its epoch', async () => {
    const before = lines.length;
    const epoch = await mapEpoch();
    const url = cluster.nodes[0].url;
    // An Epoch frame with a string, and one with 2^52: the connection is closed, the epoch stays.
    for (const e of ['zzz', 2 ** 52]) {
      const peer = await Peer.open(url);
      peer.send(recordPackr.pack([NodeFrame.Epoch, e]));
      expect(await peer.epoch(), `Epoch ${e}`).toBeNull();
    }
    // A batch whose op bytes do not decode: BatchError, and the node goes on.
    let peer = await Peer.open(url);
    const answers = peer.replies(1, 1);
    peer.send(recordPackr.pack([NodeFrame.Batch, 1, epoch, [[0, Buffer.from([0x92, 0x01])]]]));
    expect(await answers).toEqual([[NodeFrame.BatchError, 1, 'MalformedRequest', expect.stringMatching(/not valid msgpack/), null]]);
    // A batch that carries an Assign op (the node's own op): an error result, the assignment stays.
    const assign = peer.replies(2, 1);
    peer.send(recordPackr.pack([NodeFrame.Batch, 2, epoch, [[0, recordPackr.pack([[SliceOp.Assign, epoch + 1, []]])]]]));
    const [[, , , results]] = (await assign) as [[number, number, number, Uint8Array]];
    expect(unpackr.unpack(results)).toEqual([[RESULT_ERROR, 'MalformedRequest', expect.stringMatching(/never in a batch/)]]);
    expect(await peer.epoch()).toBe(epoch);
    // An Assign with slices null: refused; so is a well-formed one for another cluster.
    peer.send(plainPackr.pack([NodeFrame.Assign, epoch + 1, 16, null, 'ab'.repeat(16), null]));
    expect(await peer.epoch()).toBeNull();
    peer = await Peer.open(url);
    peer.send(recordPackr.pack([NodeFrame.Assign, epoch + 1, 16, [], 'ab'.repeat(16), null]));
    expect(await peer.epoch()).toBeNull();
    // A Replicate frame from a peer (node 1) on the node's own port: a peer's worker sends to the batch ports (node
    // protocol 25), so the decoder refuses it with the frame, and the connection closes with why.
    peer = await Peer.open(url);
    peer.send(recordPackr.pack([NodeFrame.Replicate, 1, [[0, plainPackr.pack({ type: 'KeepAliveOk', term: 1, sentAt: 0 })]]]));
    expect(await peer.epoch()).toBeNull();
    expect(peer.closedWith).toEqual([1008, expect.stringMatching(/^malformed frame: Replicate: a node's own port takes replication from the coordinator only, not from node 1/)]);
    await expectIntact(epoch, before);
  });

  it(`survives ${FRAMES} seeded frames of every kind (seed ${SEED}; replay with KEYSLICE_FUZZ_SEED=${SEED})`, async () => {
    const before = lines.length;
    const epoch = await mapEpoch();
    const r = prng(SEED);
    const deadline = Date.now() + TIME_BUDGET_MS;
    let nextId = 1000;
    let peer = await Peer.open(cluster.nodes[0].url);
    let sent = 0;
    let closes = 0;
    let checkedParts = 0;
    let frame: FuzzFrame | undefined;
    try {
      for (; sent < FRAMES && Date.now() < deadline; sent++) {
        if (peer.closed) peer = await Peer.open(cluster.nodes[0].url);
        frame = fuzzFrame(r, epoch, 2, () => nextId++);
        const answers = frame.batch === undefined ? null : peer.replies(frame.batch.id, frame.batch.parts.size);
        peer.send(frame.bytes);
        if (answers !== null) {
          // Every part of a batch at the node's epoch comes back refused: BatchError, or an error for every op.
          for (const a of await answers) {
            checkedParts++;
            if (a[0] === NodeFrame.BatchError) {
              expect([a[2], a[4]], 'a refusal of a batch at the node\'s epoch names no epoch').toEqual(['MalformedRequest', null]);
              continue;
            }
            const results = unpackr.unpack(a[3] as Uint8Array) as unknown[][];
            const ops = frame.batch!.parts.get(a[2] as number);
            if (ops !== null) expect(results).toHaveLength(ops!);
            for (const res of results) expect(res.slice(0, 2)).toEqual([RESULT_ERROR, 'MalformedRequest']);
          }
        }
        const after = await peer.epoch();
        if (after === null) closes++;
        else expect(after).toBe(epoch);
        if (frame.expect === 'close') expect(after, 'the node closes the connection').toBeNull();
        if (frame.expect === 'stay') expect(after, 'the node keeps the connection').not.toBeNull();
      }
      peer.ws.close();
      console.log(`node protocol fuzz, seed ${SEED}: ${sent} frames, ${closes} closed connections, ${checkedParts} batch parts at the node's epoch answered with errors only`);
      expect(sent).toBeGreaterThan(Math.min(FRAMES, 500)); // bounded by time, but not starved by it
      expect(checkedParts).toBeGreaterThan(0);
      expect(closes).toBeGreaterThan(0);
      await expectIntact(epoch, before);
    } catch (err) {
      const last = frame === undefined ? '' : ` (frame ${sent}: ${frame.what})`;
      throw new Error(`node protocol fuzz failed with seed ${SEED}${last}; replay with KEYSLICE_FUZZ_SEED=${SEED}: ${(err as Error).message}`, { cause: err });
    }
  }, TIME_BUDGET_MS + 60_000);
});
