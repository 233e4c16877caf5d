// Durability through real processes: slice nodes SIGKILLed and restarted lose
// no acknowledged write; a torn log tail leaves a prefix of the history; a
// corrupt record stops the start with the file and offset named.
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startLocalCluster, startSliceNode, stopProcess, type ClusterOptions, type ManagedProcess, type SliceNodeOptions } from '../coordinator/cli/local-cluster.js';
import { KeysliceError } from '../shared/errors.js';
import { readRecords } from '../slice-worker/record-file.js';
import type { DurabilityMode } from '../shared/limits.js';
import { restartNode, rng } from './cluster-fixture.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function cluster(opts: { nodes: number; workers: number; durability?: DurabilityMode; snapshotAfterBytes?: number }) {
  const dataDir = mkdtempSync(join(tmpdir(), 'keyslice-durability-'));
  // One copy: the worker log's own durability. No router processes: the coordinator serves the request path itself
  // (the same Router code, in its process), so that each of these clusters starts one process fewer; the stories here
  // are about the slice nodes' logs.
  const options: Partial<ClusterOptions> = { replicationFactor: 1, routers: 0, ...opts };
  const c = await startLocalCluster({ dataDir, ...options });
  const client = await KeysliceClient.connect(c.url);
  cleanups.push(async () => {
    await client.close();
    await c.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });
  /** Restarts node i in place with the cluster's node options (the fixture's restartNode) and `extra`; resolves when
   * every slice of `table` reports again (DescribeSlices complete), asked at most 100 times 50 ms apart. */
  const restart = async (i: number, table: string, extra: Partial<SliceNodeOptions> = {}) => {
    await restartNode({ cluster: c, dataDir, options }, c.nodes[i], extra);
    for (let attempt = 0; attempt < 100; attempt++) {
      if (await client.describeSlices(table).then((l) => l.complete, () => false)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`${c.nodes[i].name} was not served again after a restart`);
  };
  return { c, client, dataDir, restart };
}

/** Writers that each own their keys (so writes to one key are sequential), recording what was
 * acknowledged and what may or may not have landed (a retryable error: the answer was lost). */
class AckedWriters {
  readonly acked = new Map<string, number>();
  readonly unsure = new Map<string, Set<number>>();
  acks = 0;
  private stopped = false;
  private version = 0;
  private running: Promise<void>[] = [];

  start(client: KeysliceClient, table: string, writers: number, keysPerWriter: number, r: () => number, writesMax: number): void {
    const writer = async (w: number) => {
      for (let n = 0; n < writesMax && !this.stopped; n++) {
        const id = `w${w}-${Math.floor(r() * keysPerWriter)}`;
        const v = ++this.version;
        try {
          await client.putItem(table, { id, v, pad: 'x'.repeat(100) });
          this.acked.set(id, v);
          this.unsure.delete(id);
          this.acks++;
        } catch (err) {
          if (!(err instanceof KeysliceError) || !err.retryable) throw err;
          if (!this.unsure.has(id)) this.unsure.set(id, new Set());
          this.unsure.get(id)!.add(v);
          await new Promise((res) => setTimeout(res, 5));
        }
      }
    };
    this.running = Array.from({ length: writers }, (_, w) => writer(w));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.running);
  }
}

async function crashRounds(mode: DurabilityMode, rounds: number) {
  const workers = 2;
  const snapshotAfterBytes = 16 * 1024; // small, so that snapshots and segment changes happen during the test
  const { c, client, restart } = await cluster({ nodes: 2, workers, durability: mode, snapshotAfterBytes });
  const T = 'crash';
  await client.createTable(T, { name: 'id', type: 'string' });
  const r = rng(mode === 'fsync' ? 1 : 2);

  // The value read back must be the last acknowledged one, or a later one whose answer was lost in the crash.
  const load = new AckedWriters();
  load.start(client, T, 8, 20, r, 100_000);

  for (let round = 0; round < rounds; round++) {
    // The load's pacing: a kill at a random moment after the node came back. 25-150 ms: 8 writers land tens of
    // writes on both nodes in that (the next node is drawn after), and the round's time is the restart's.
    await new Promise((res) => setTimeout(res, 25 + r() * 125));
    const i = Math.floor(r() * c.nodes.length);
    await stopProcess(c.nodes[i].child, 'SIGKILL');
    await restart(i, T);
  }
  await load.stop();

  expect(load.acks).toBeGreaterThan(rounds * 5); // the load really ran between the kills
  await expectAcknowledged(client, T, load.acked, load.unsure);
}

/** Every acknowledged write is there: the value read is the last acknowledged one, or a later one whose
 * answer was lost in a crash; no item holds a value that was never written. */
async function expectAcknowledged(client: KeysliceClient, table: string, acked: Map<string, number>, unsure: Map<string, Set<number>>) {
  const everything = await client.getAllItems({ table });
  const byId = new Map(everything.map((i) => [i.id as string, i.v as number]));
  const written = new Set([...acked.keys(), ...unsure.keys()]);
  for (const id of byId.keys()) expect(written.has(id), `${id} was never written`).toBe(true);
  for (const [id, v] of acked) {
    const got = byId.get(id);
    const allowed = got === v || (got !== undefined && got > v && unsure.get(id)?.has(got));
    expect(allowed, `${id}: acknowledged ${v}, read ${got}`).toBe(true);
  }
  for (const [id, versions] of unsure) {
    if (acked.has(id)) continue;
    const got = byId.get(id);
    expect(got === undefined || versions.has(got), `${id}: read ${got}, never acknowledged`).toBe(true);
  }
}

// KEYSLICE_CRASH_ROUNDS raises the fsync rounds for a longer run (e.g. 100).
const FSYNC_ROUNDS = Number(process.env.KEYSLICE_CRASH_ROUNDS ?? 20);

describe('crash: SIGKILL slice nodes under a write load', () => {
  it(`loses no acknowledged write over ${FSYNC_ROUNDS} kill/restart rounds (fsync)`, () => crashRounds('fsync', FSYNC_ROUNDS), 120_000 + FSYNC_ROUNDS * 3_000);
  it('loses no acknowledged write over 5 kill/restart rounds (os: a process crash only)', () => crashRounds('os', 5), 60_000);
});

describe('a snapshot in progress', () => {
  // One node, one worker, many items: a snapshot takes long enough to be seen (its .snap.tmp file) and
  // to be killed in the middle of. A worker that stopped serving while it wrote one would acknowledge
  // no write while the .tmp file is there, but for the few that were already on their way back.
  const ITEMS = 100_000;
  const WRITERS = 8;
  const ACKS_DURING_ONE_SNAPSHOT = 5 * WRITERS;
  const ROUNDS = 3;

  it('serves writes while it is written, and a node killed in the middle of one loses no acknowledged write', async () => {
    const snapshotAfterBytes = 512 * 1024;
    const { c, client, dataDir, restart } = await cluster({ nodes: 1, workers: 1, snapshotAfterBytes });
    const T = 'midsnap';
    await client.createTable(T, { name: 'id', type: 'string' });
    const load = new AckedWriters();
    let next = 0;
    const loader = async () => {
      while (next < ITEMS) {
        const from = next;
        next = Math.min(ITEMS, next + 25);
        const puts = Array.from({ length: next - from }, (_, i) => ({ id: `p${from + i}`, v: 0, pad: 'x'.repeat(150) }));
        expect(await client.batchWrite(T, { puts })).toEqual([]);
        for (const p of puts) load.acked.set(p.id, 0);
      }
    };
    await Promise.all(Array.from({ length: 16 }, loader));

    load.start(client, T, WRITERS, 200, rng(4), 1_000_000);

    const workerDir = join(dataDir, c.nodes[0].name, 'worker-0');
    let killedMidSnapshot = 0;
    try {
      for (let round = 0; round < ROUNDS; round++) {
        // Wait for a snapshot file in the making that sees writes acknowledged while it is there.
        let seenTmp: string | undefined; // the snapshot file in the making, when there is one
        let acksWhenSeen = 0; // load.acks when seenTmp first appeared
        let served = false;
        for (const deadline = Date.now() + 30_000; !served && Date.now() < deadline; ) {
          const tmp = readdirSync(workerDir).find((f) => f.endsWith('.snap.tmp'));
          if (tmp !== seenTmp) {
            seenTmp = tmp;
            acksWhenSeen = load.acks;
          } else served = tmp !== undefined && load.acks - acksWhenSeen >= ACKS_DURING_ONE_SNAPSHOT;
          if (!served) await new Promise((res) => setTimeout(res, 5));
        }
        expect(served, `round ${round}: no snapshot in the making saw ${ACKS_DURING_ONE_SNAPSHOT} writes acknowledged`).toBe(true);
        await stopProcess(c.nodes[0].child, 'SIGKILL');
        if (seenTmp !== undefined && readdirSync(workerDir).includes(seenTmp)) killedMidSnapshot++;
        await restart(0, T);
      }
      // And snapshots complete while the writes go on: a newer one replaces the one recovered from.
      const newest = () => readdirSync(workerDir).filter((f) => f.endsWith('.snap')).sort().at(-1) ?? '';
      const recoveredFrom = newest();
      for (const deadline = Date.now() + 30_000; newest() <= recoveredFrom && Date.now() < deadline; ) await new Promise((res) => setTimeout(res, 20));
      expect(newest() > recoveredFrom, `no snapshot completed after ${recoveredFrom}`).toBe(true);
    } finally {
      await load.stop();
    }
    expect(killedMidSnapshot, 'a kill landed while a snapshot was being written').toBeGreaterThan(0);
    await expectAcknowledged(client, T, load.acked, load.unsure);
  }, 240_000);
});

describe('torn and corrupt logs', () => {
  /** One node, one worker: a single log, one record per sequential write. */
  async function loadHistory(count: number, durability: DurabilityMode = 'fsync') {
    const { c, client, dataDir, restart } = await cluster({ nodes: 1, workers: 1, durability });
    await client.createTable('hist', { name: 'id', type: 'number' });
    for (let i = 0; i < count; i++) await client.putItem('hist', { id: i, payload: `item ${i}` });
    const node = c.nodes[0];
    await stopProcess(node.child, 'SIGKILL');
    const workerDir = join(dataDir, node.name, 'worker-0');
    const segment = join(workerDir, readdirSync(workerDir).find((f) => f.endsWith('.log'))!);
    return { c, client, dataDir, node, segment, restart };
  }

  it('a log cut at a random offset gives exactly a prefix of the acknowledged history', async () => {
    const count = 150;
    const { c, client, segment, restart } = await loadHistory(count);
    const original = readFileSync(segment);
    const r = rng(3);
    for (let round = 0; round < 4; round++) {
      const cut = Math.floor(r() * original.length);
      writeFileSync(segment, original);
      truncateSync(segment, cut);
      await restart(0, 'hist');
      const ids = (await client.getAllItems({ table: 'hist' })).map((i) => i.id as number).sort((a, b) => a - b);
      expect(ids, `cut at ${cut} of ${original.length}`).toEqual(Array.from({ length: ids.length }, (_, i) => i));
      expect(ids.length).toBeLessThan(count + 1);
      await stopProcess(c.nodes[0].child, 'SIGKILL');
    }
    // Uncut, everything is there.
    writeFileSync(segment, original);
    await restart(0, 'hist');
    expect(await client.getAllItems({ table: 'hist' })).toHaveLength(count);
  });

  it('os mode: a power loss that kept a new segment and lost the tail of the one before starts from the longest intact prefix and says so; fsync mode refuses', async () => {
    // startSegment (at a snapshot) syncs the old segment off the thread once the new one exists: the page cache may
    // write the new one out and lose the old one's tail. The node used to refuse to start on that image.
    const count = 150;
    const { client, dataDir, node, segment, restart } = await loadHistory(count, 'os');
    const original = readFileSync(segment);
    const { records } = readRecords(segment, original, 1);
    // The image, as if a snapshot had started a segment at record `split` (and never completed): the old segment
    // lost its tail down to the middle of record split - 10, the new one holds records split and on.
    const split = records[records.length - 20];
    const torn = records[records.length - 30];
    const later = join(dirname(segment), `wal-${String(split.lsn).padStart(16, '0')}.log`);
    writeFileSync(later, original.subarray(split.offset));
    writeFileSync(segment, original.subarray(0, torn.offset + 30));

    let refused: Error | null = null;
    try {
      const started = await startSliceNode({ name: 'fsync-mode', dataDir: join(dataDir, node.name), port: 0, workers: 1, durability: 'fsync' });
      await stopProcess(started.child);
    } catch (err) {
      refused = err as Error;
    }
    expect(refused?.message, 'fsync mode refuses: there every record was synced before the next segment began').toMatch(/CorruptFileError|corrupt record/);
    expect(readdirSync(dirname(segment)).filter((f) => f.includes('.log')).sort()).toEqual([basename(segment), basename(later)]);

    const lines: string[] = [];
    await restart(0, 'hist', { log: (l) => lines.push(l) });
    const ids = (await client.getAllItems({ table: 'hist' })).map((i) => i.id as number).sort((a, b) => a - b);
    expect(ids.length, 'a prefix, cut before the torn record').toBeGreaterThan(0);
    expect(ids.length).toBeLessThan(count - 25);
    expect(ids).toEqual(Array.from({ length: ids.length }, (_, i) => i));
    expect(readdirSync(dirname(segment)).filter((f) => f.includes('.log')).sort()).toEqual([basename(segment), `${basename(later)}.cut`]);
    const said = lines.find((l) => l.includes('recovered'));
    expect(said, lines.join(' | ')).toContain(`moved the segment after it aside: ${later}.cut`);
    expect(said).toContain(`ended the log at record ${torn.lsn - 1}`);
    expect(said).toContain('cut a torn tail of 30 bytes');
  });

  it('a flipped byte inside the log stops the start, naming the file and offset', async () => {
    const { dataDir, node, segment } = await loadHistory(40);
    const bad = readFileSync(segment);
    const at = Math.floor(bad.length / 2);
    bad[at] ^= 0x40;
    copyFileSync(segment, `${segment}.orig`);
    writeFileSync(segment, bad);
    let failure: ManagedProcess | Error = new Error('not started');
    try {
      failure = await startSliceNode({ name: 'corrupt', dataDir: join(dataDir, node.name), port: 0, workers: 1 });
    } catch (err) {
      failure = err as Error;
    }
    if (!(failure instanceof Error)) {
      await stopProcess(failure.child);
      throw new Error('a node with a corrupt log started');
    }
    expect(failure.message).toContain(segment);
    expect(failure.message).toMatch(/at offset \d+/);
  });
});
