// A worker's batch port (node protocol 20, slice-worker/batch-port.ts), through real
// processes: the node's Hello names one per worker; it asks for the cluster secret
// and the node protocol, takes Batch frames of its own worker only, at the epoch the
// node serves, and answers them itself; anything else closes the connection. Reads
// and writes through the router (which sends its batches there) go on working; a
// router's link across node restarts and failovers is in routers.test.ts and
// failover-process.test.ts.
import { Unpackr } from 'msgpackr';
import WebSocket from 'ws';
import { beforeAll, describe, expect, it } from 'vitest';
import { CLUSTER_SECRET_HEADER, NODE_PROTOCOL_HEADER, NODE_PROTOCOL_VERSION, NodeFrame } from '../shared/protocol.js';
import { useCluster } from './cluster-fixture.js';
import { dialNode as dial, epochOfRefusal } from './node-dial.js';
import { recordPackr } from './node-fuzz-model.js';

const WAIT_MS = 10_000;
const unpackr = new Unpackr({ useRecords: true, mapsAsObjects: true });

/** Every process's output (the router's included, through the coordinator's). */
const lines: string[] = [];
// The coordinator's own default R for 2 nodes ('auto'), as before: writes to replicated slices are held until committed.
const c = useCluster({ nodes: 2, workers: 2, slices: 16, durability: 'os', replicationFactor: 'auto', log: (l) => lines.push(l) });

beforeAll(async () => {
  await c.client.createTable('batch_port', { name: 'id', type: 'string' });
});

/** Sends one frame and waits for the next frame back, or for the close (its code). */
function ask(ws: WebSocket, frame: unknown[]): Promise<{ frame: unknown[] } | { closed: number }> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${WAIT_MS} ms`)), WAIT_MS);
    ws.once('message', (data: Buffer) => {
      clearTimeout(timer);
      resolve({ frame: unpackr.unpack(data) as unknown[] });
    });
    ws.once('close', (code) => {
      clearTimeout(timer);
      resolve({ closed: code });
    });
    ws.send(recordPackr.pack(frame));
  });
}

describe('a worker batch port', () => {
  it('is named in Hello, asks for the secret and the protocol, and answers its own batches at the node epoch', async () => {
    const secret = c.cluster.clusterSecret;
    const node = await dial(c.cluster.nodes[0].url, { [CLUSTER_SECRET_HEADER]: secret }, true);
    if (!('ws' in node)) throw new Error(`the node refused: ${node.status}`);
    const hello = node.first!;
    expect(hello.slice(0, 3)).toEqual([NodeFrame.Hello, NODE_PROTOCOL_VERSION, 2]);
    const ports = hello[5] as number[];
    expect(ports).toHaveLength(2);
    // The node's epoch, as its own connection says it (a Batch of epoch 0 is refused, naming it).
    const probe = await ask(node.ws, [NodeFrame.Batch, 1, 0, []]);
    expect('frame' in probe && probe.frame[2]).toBe('WrongOwner');
    const epoch = epochOfRefusal('frame' in probe ? probe.frame : null) ?? 0;
    expect(epoch, `the probe's answer names the node's epoch: ${JSON.stringify(probe)}`).toBeGreaterThan(0);
    node.ws.close();

    const url = (w: number) => `ws://127.0.0.1:${ports[w]}`;
    const protocol = { [NODE_PROTOCOL_HEADER]: String(NODE_PROTOCOL_VERSION) };
    expect(await dial(url(0), { ...protocol, [CLUSTER_SECRET_HEADER]: 'wrong' }, false)).toEqual({ status: 401 });
    expect(await dial(url(0), { [CLUSTER_SECRET_HEADER]: secret }, false)).toEqual({ status: 400 });
    expect(await dial(url(0), { [CLUSTER_SECRET_HEADER]: secret, [NODE_PROTOCOL_HEADER]: String(NODE_PROTOCOL_VERSION - 1) }, false)).toEqual({ status: 400 });

    for (const w of [0, 1]) {
      const port = await dial(url(w), { ...protocol, [CLUSTER_SECRET_HEADER]: secret }, false);
      if (!('ws' in port)) throw new Error(`batch port ${w} refused: ${port.status}`);
      const ops = recordPackr.pack([]);
      // A batch of another epoch is refused naming the epoch the worker serves (node protocol 26), as the node's socket does.
      const stale = await ask(port.ws, [NodeFrame.Batch, 2, epoch - 1, [[w, ops]]]);
      expect('frame' in stale && stale.frame).toEqual([NodeFrame.BatchError, 2, 'WrongOwner', expect.any(String), epoch]);
      const other = await ask(port.ws, [NodeFrame.Batch, 3, epoch, [[1 - w, ops]]]);
      expect('frame' in other && other.frame).toEqual([NodeFrame.BatchError, 3, 'MalformedRequest', expect.any(String), null]);
      const ok = await ask(port.ws, [NodeFrame.Batch, 4, epoch, [[w, ops]]]);
      expect('frame' in ok && ok.frame.slice(0, 3)).toEqual([NodeFrame.BatchReply, 4, w]);
      expect('frame' in ok && unpackr.unpack(ok.frame[3] as Uint8Array)).toEqual([]);
      // Only batches: the node's other frames are refused, and the connection with them.
      expect(await ask(port.ws, [NodeFrame.Epoch, epoch + 1])).toEqual({ closed: 1008 });
    }
  }, 60_000);

  it('carries the router requests', async () => {
    for (let i = 0; i < 50; i++) await c.client.putItem('batch_port', { id: `k${i}`, v: i });
    for (let i = 0; i < 50; i++) expect(await c.client.getItem('batch_port', { id: `k${i}` })).toMatchObject({ id: `k${i}`, v: i });
    // The requests above would be served as well by a router that sent its batches on the node's connection:
    // the router says that its link to each node became ready over that node's two batch ports.
    for (const node of c.cluster.nodes) {
      expect(lines.some((l) => l.includes(`slice node ${node.url} ready: 2 workers, batch ports `)), `${node.url}: a router link over its batch ports`).toBe(true);
    }
  }, 60_000);
});
