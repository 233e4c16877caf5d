// A worker's batch port while its node takes a new assignment (slice-worker/batch-port.ts), through real
// processes: one node, 2 workers. The node publishes a new epoch only once every worker took its part of the
// Assign; a worker that took its part already while the other one was still busy owned the new epoch's slices
// but ran a batch of the old epoch, which its port let in. A scan there walks the slices the worker owns, so
// one of the old epoch left out the slice that the new assignment took away, and said nothing (a router whose map
// was still at the old epoch counted the page). Such a batch is refused WrongOwner, as after the publication.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Unpackr } from 'msgpackr';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startLocalCluster, type LocalCluster } from '../coordinator/cli/local-cluster.js';
import { CLUSTER_SECRET_HEADER, NODE_PROTOCOL_HEADER, NODE_PROTOCOL_VERSION, NodeFrame, SliceOp } from '../shared/protocol.js';
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
function dial(url: string, headers: Record<string, string>, first: boolean): Promise<{ ws: WebSocket; hello: unknown[] | null }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { [CLUSTER_SECRET_HEADER]: cluster.clusterSecret ?? '', ...headers } });
    const timer = setTimeout(() => reject(new Error(`${url}: nothing within ${WAIT_MS} ms`)), WAIT_MS);
    ws.on('error', () => {});
    if (first) {
      ws.once('message', (data: Buffer) => {
        clearTimeout(timer);
        resolve({ ws, hello: unpackr.unpack(data) as unknown[] });
      });
    } else {
      ws.once('open', () => {
        clearTimeout(timer);
        resolve({ ws, hello: null });
      });
    }
  });
}

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

describe('a batch port while its node takes an assignment', () => {
  it('refuses a batch of the old epoch on a worker that took the new assignment before the node published it', async () => {
    const nodeUrl = cluster.nodes[0].url;
    const node = await dial(nodeUrl, {}, true);
    const hello = node.hello!;
    const clusterId = hello[4] as string; // Hello: [kind, protocol, workers, nodeId, clusterId, batch ports]
    const ports = hello[5] as number[];
    expect(ports).toHaveLength(2);
    const probe = await batch(node.ws, 1, 0, 0, []);
    const epoch = Number(/node is at epoch (\d+)/.exec(String(probe[3]))![1]);
    const protocol = { [NODE_PROTOCOL_HEADER]: String(NODE_PROTOCOL_VERSION) };
    const port0 = (await dial(`ws://127.0.0.1:${ports[0]}`, protocol, false)).ws;
    const port1 = (await dial(`ws://127.0.0.1:${ports[1]}`, protocol, false)).ws;
    const table = 1; // the cluster's first table
    const scan = [SliceOp.Scan, table, 0, null, 10_000, null, null, SLICES, false];
    const slicesOf = (answer: unknown[]) => {
      expect(answer[0], JSON.stringify(answer).slice(0, 300)).toBe(NodeFrame.BatchReply);
      const [result] = unpackr.unpack(answer[3] as Uint8Array) as unknown[][];
      const entries = (result[result.length - 1] as unknown[])[0] as [number, string, unknown, number][];
      return new Set(entries.map(([slice]) => slice));
    };
    // Worker 0 owns the even slices, and answers for slice 0 at this epoch.
    expect(slicesOf(await batch(port0, 2, epoch, 0, [scan])).has(0)).toBe(true);

    // Worker 1 busy for a while (read-only scans), then the node is assigned every slice but 0 at the next epoch:
    // worker 0 takes its part at once, worker 1 once its batch is done, and only then is the new epoch published.
    const busy = batch(port1, 3, epoch, 1, Array.from({ length: 512 }, () => scan));
    await sleep(20);
    node.ws.send(recordPackr.pack([NodeFrame.Assign, epoch + 1, SLICES, Array.from({ length: SLICES - 1 }, (_, i) => i + 1), clusterId, null]));
    await sleep(50);
    const stale = batch(port0, 4, epoch, 0, [scan]);
    const [answer, busyAnswer] = await Promise.all([stale, busy]);
    // The busy batch ran at the old epoch (else this test shows nothing).
    expect(busyAnswer[0], 'worker 1 was still busy at the old epoch').toBe(NodeFrame.BatchReply);
    // Worker 0 no longer owns slice 0: its scan at the old epoch is refused, not answered without slice 0.
    expect(answer.slice(0, 3), answer[0] === NodeFrame.BatchReply ? `answered for slices ${[...slicesOf(answer)].join(',')}` : '').toEqual([NodeFrame.BatchError, 4, 'WrongOwner']);
    // Once published, the new epoch's batches run there, without slice 0.
    await busy;
    expect(slicesOf(await batch(port0, 5, epoch + 1, 0, [scan])).has(0)).toBe(false);
    node.ws.close();
    port0.close();
    port1.close();
  }, 60_000);
});
