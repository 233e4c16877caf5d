// A worker's part of a scan while its node takes a new assignment, through real processes (one node, 2 workers,
// batches sent to a worker's batch port by hand, as a router sends them). The node publishes a new epoch only once
// every worker took its part of the Assign, so a worker that took its part while the other one was still busy ran
// batches of the old epoch on the new epoch's slices. A scan there walked the slices its worker owned then, and
// one of the old epoch left out the slice that the new assignment took away, and said nothing (a router whose map
// was still at the old epoch counted the page). A Scan names the slices it asks for, and one that names a slice
// its worker does not own when it runs is refused WrongOwner, whatever the epochs: never answered without it.
// A Stats (a load report's ask) names its slices too, and is refused the same way: a worker that reported the slices
// it owned when asked answered this one without slice 0.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Unpackr } from 'msgpackr';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startLocalCluster, type LocalCluster } from '../coordinator/cli/local-cluster.js';
import { CLUSTER_SECRET_HEADER, NODE_PROTOCOL_HEADER, NODE_PROTOCOL_VERSION, NodeFrame, RESULT_ERROR, SliceOp, sliceSetOf } from '../shared/protocol.js';
import { epochOfRefusal, openNode } from './node-dial.js';
import { recordPackr } from './node-fuzz-model.js';

const WAIT_MS = 10_000;
const SLICES = 16;
const ITEMS = 2_000;
const unpackr = new Unpackr({ useRecords: true, mapsAsObjects: true });

let dataDir: string;
let cluster: LocalCluster;
let client: KeysliceClient;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'keyslice-port-epoch-'));
  cluster = await startLocalCluster({ dataDir, nodes: 1, workers: 2, slices: SLICES, durability: 'os', replicationFactor: 1 });
  client = await KeysliceClient.connect(cluster.url);
  await client.createTable('port_epoch', { name: 'id', type: 'string' });
  for (let i = 0; i < ITEMS; i += 25) {
    expect(await client.batchWrite('port_epoch', { puts: Array.from({ length: 25 }, (_, j) => ({ id: `item-${i + j}`, pad: 'x'.repeat(40) })) })).toEqual([]);
  }
}, 120_000);
afterAll(async () => {
  await client?.close();
  await cluster?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

/** A socket with the cluster secret; resolves once open, with the first frame if `first`. */
const dial = async (url: string, headers: Record<string, string>, first: boolean) => {
  const { ws, first: hello } = await openNode(url, { [CLUSTER_SECRET_HEADER]: cluster.clusterSecret ?? '', ...headers }, first);
  return { ws, hello };
};

/** Sends a Batch of `ops` to worker `w` on `ws`; resolves with the answer frame. */
function batch(ws: WebSocket, id: number, epoch: number, w: number, ops: unknown[]): Promise<unknown[]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`batch ${id}: no answer within ${WAIT_MS} ms`)), WAIT_MS);
    const onMessage = (data: Buffer) => {
      const frame = unpackr.unpack(data) as unknown[];
      if (frame[1] !== id) return;
      clearTimeout(timer);
      ws.off('message', onMessage);
      resolve(frame);
    };
    ws.on('message', onMessage);
    ws.send(recordPackr.pack([NodeFrame.Batch, id, epoch, [[w, recordPackr.pack(ops)]]]));
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A batch's answer, for a failed expectation's message. */
function shown(frame: unknown[]): string {
  const result = frame[0] === NodeFrame.BatchReply ? (unpackr.unpack(frame[3] as Uint8Array) as unknown[][])[0] : frame;
  return JSON.stringify(result).slice(0, 300);
}

/** Whether a batch's answer is WrongOwner: the batch refused whole (BatchError), or its one op's result. */
function wrongOwner(frame: unknown[]): boolean {
  if (frame[0] === NodeFrame.BatchError) return frame[2] === 'WrongOwner';
  if (frame[0] !== NodeFrame.BatchReply) return false;
  const [result] = unpackr.unpack(frame[3] as Uint8Array) as unknown[][];
  return result[0] === RESULT_ERROR && result[1] === 'WrongOwner';
}

describe("a worker's part of a scan while its node takes an assignment", () => {
  it('is refused when it names a slice the worker no longer owns, before and after the node publishes the new epoch, never answered without it', async () => {
    const nodeUrl = cluster.nodes[0].url;
    const node = await dial(nodeUrl, {}, true);
    const hello = node.hello!;
    const clusterId = hello[4] as string; // Hello: [kind, protocol, workers, nodeId, clusterId, batch ports]
    const ports = hello[5] as number[];
    expect(ports).toHaveLength(2);
    const probe = await batch(node.ws, 1, 0, 0, []);
    const epoch = epochOfRefusal(probe) ?? 0;
    expect(epoch, `the probe's answer names the node's epoch: ${JSON.stringify(probe)}`).toBeGreaterThan(0);
    const protocol = { [NODE_PROTOCOL_HEADER]: String(NODE_PROTOCOL_VERSION) };
    const port0 = (await dial(`ws://127.0.0.1:${ports[0]}`, protocol, false)).ws;
    const port1 = (await dial(`ws://127.0.0.1:${ports[1]}`, protocol, false)).ws;
    const table = 1; // the cluster's first table
    // The slices a router names to each worker by the map of this epoch: worker 0 the even ones, worker 1 the odd.
    const scanOf = (slices: number[]) => [SliceOp.Scan, table, 0, null, 10_000, null, null, sliceSetOf(0, slices), false];
    const evens = Array.from({ length: SLICES / 2 }, (_, i) => 2 * i);
    const odds = evens.map((s) => s + 1);
    const slicesOf = (answer: unknown[]) => {
      expect(answer[0], JSON.stringify(answer).slice(0, 300)).toBe(NodeFrame.BatchReply);
      const [result] = unpackr.unpack(answer[3] as Uint8Array) as unknown[][];
      const entries = (result[result.length - 1] as unknown[])[0] as [number, ...unknown[]][];
      return new Set(entries.map(([slice]) => slice));
    };
    // A load report's ask of the same worker (DescribeSlices, /metrics): its per-slice entries are [slice, items, ...].
    const statsOf = (slices: number[]) => [SliceOp.Stats, table, sliceSetOf(0, slices)];
    // Worker 0 owns the even slices, and answers for slice 0 at this epoch.
    const first = await batch(port0, 2, epoch, 0, [scanOf(evens)]);
    expect(slicesOf(first).has(0)).toBe(true);
    const [firstResult] = unpackr.unpack(first[3] as Uint8Array) as unknown[][];
    const keyOn0 = ((firstResult[1] as unknown[])[0] as [number, string][]).find(([slice]) => slice === 0)![1];
    expect(slicesOf(await batch(port0, 7, epoch, 0, [statsOf(evens)])).has(0)).toBe(true);

    // Worker 1 busy for a while (read-only scans), then the node is assigned every slice but 0 at the next epoch:
    // worker 0 takes its part at once, worker 1 once its batch is done, and only then is the new epoch published.
    const busy = batch(port1, 3, epoch, 1, Array.from({ length: 512 }, () => scanOf(odds)));
    await sleep(20);
    node.ws.send(recordPackr.pack([NodeFrame.Assign, epoch + 1, SLICES, Array.from({ length: SLICES - 1 }, (_, i) => i + 1), clusterId, null]));
    // Until worker 0 took its part: a Get of slice 0 at the old epoch is refused WrongOwner by the worker, not by the
    // port (the epoch is not published yet). Bounded in count and time.
    let took = false;
    for (let i = 0; i < 200 && !took; i++) {
      const got = await batch(port0, 100 + i, epoch, 0, [[SliceOp.Get, table, 0, keyOn0, null, false]]);
      took = got[0] === NodeFrame.BatchReply && wrongOwner(got);
      if (!took) await sleep(5);
    }
    expect(took, 'worker 0 took its part of the assignment while the old epoch was still served').toBe(true);
    const stale = batch(port0, 4, epoch, 0, [scanOf(evens)]);
    const staleStats = batch(port0, 8, epoch, 0, [statsOf(evens)]);
    const [answer, statsAnswer, busyAnswer] = await Promise.all([stale, staleStats, busy]);
    // The busy batch ran at the old epoch (else this test shows nothing).
    expect(busyAnswer[0], 'worker 1 was still busy at the old epoch').toBe(NodeFrame.BatchReply);
    // Worker 0 no longer owns slice 0: its scan that names it is refused, not answered without slice 0; and so is
    // its load report (a complete DescribeSlices would count the table without slice 0's items).
    expect(wrongOwner(answer), shown(answer)).toBe(true);
    expect(wrongOwner(statsAnswer), shown(statsAnswer)).toBe(true);
    // Refused by the worker, at the old epoch (else the port refused them, and this test shows nothing).
    expect([answer[0], statsAnswer[0]], 'the stale batches ran before the new epoch was published').toEqual([NodeFrame.BatchReply, NodeFrame.BatchReply]);
    // Once published, at the new epoch: a scan that names slice 0 is refused the same way; one of the new map's
    // slices is answered, without slice 0.
    await busy;
    const named0 = await batch(port0, 5, epoch + 1, 0, [scanOf(evens)]);
    expect(wrongOwner(named0), shown(named0)).toBe(true);
    expect(slicesOf(await batch(port0, 6, epoch + 1, 0, [scanOf(evens.slice(1))])).has(0)).toBe(false);
    const statsNamed0 = await batch(port0, 9, epoch + 1, 0, [statsOf(evens)]);
    expect(wrongOwner(statsNamed0), shown(statsNamed0)).toBe(true);
    expect(slicesOf(await batch(port0, 10, epoch + 1, 0, [statsOf(evens.slice(1))])).has(0)).toBe(false);
    node.ws.close();
    port0.close();
    port1.close();
  }, 60_000);
});
