// A write sent twice is applied once, through real processes (docs/replication.md, "A write sent twice is
// applied once"): a coordinator and three slice nodes at R=3. Writers increment a few counters (ADD n 1) and
// put fresh items under a condition (attribute_not_exists) on slices that one node leads, while that node is
// frozen (SIGSTOP), and then, once it runs again, while the node that took over those slices is killed
// (SIGKILL) and restarted. The writes in flight on each lost leader have an unknown outcome; the router sends
// them again with their request ids. Every write must succeed; each counter must equal the increments
// acknowledged for it (none applied twice, none lost); and every conditional put must succeed once (applied
// twice, its second copy would fail its condition). It reports how many resends met an id already applied
// (keyslice_node_duplicate_writes_total in /metrics): each was answered from memory, not applied again. Not
// asserted above 0: a resend meets an applied id only if the lost leader's record of it reached a follower first
// (3, 2 and 0 in three runs).
import { beforeAll, describe, expect, it } from 'vitest';
import { stopProcess, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { KeysliceError } from '../shared/errors.js';
import { initHashing, sliceOf } from '../shared/hashing.js';
import { allLed, leaderOf, leadsNothing, restartNode, statusUntil, useCluster } from './cluster-fixture.js';
import { parseExposition, samples } from './prometheus-text.js';

const c = useCluster({ nodes: 3, slices: 12, replicationFactor: 3, durability: 'fsync' });
const T = 'resend';
const WRITERS = 6;
const COUNTERS = 4;
/** Bounds: each writer's writes, the whole run's load, and each wait for a failover. */
const WRITES_PER_WRITER_MAX = 20_000;
const LOAD_MS_MAX = 90_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Scrapes of /metrics that duplicateWrites makes at most, and the wait between two. */
const SCRAPE_TRIES_MAX = 20;
const SCRAPE_RETRY_MS = 250;

/** Per node, the writes of T answered from a remembered request id since that node started
 * (keyslice_node_duplicate_writes_total), from a scrape in which all 3 nodes reported: a scrape leaves out a node whose
 * slices changed owners while it was asked, twice (keyslice_node_load_reported 0, docs/metrics.md; leaderships move
 * back to a node that restarted), so it is scraped again, bounded in tries; the last scrape's is returned whatever it
 * holds. */
async function duplicateWrites(): Promise<Map<string, number>> {
  let out = new Map<string, number>();
  for (let tries = 1; tries <= SCRAPE_TRIES_MAX; tries++) {
    const res = await fetch(`${c.cluster.url}/metrics`, { signal: AbortSignal.timeout(15_000) });
    out = new Map<string, number>();
    for (const s of samples(parseExposition(await res.text()), 'keyslice_node_duplicate_writes_total')) if (s.labels.table === T) out.set(s.labels.node, s.value);
    if (out.size === 3) return out;
    await sleep(SCRAPE_RETRY_MS);
  }
  return out;
}


beforeAll(async () => {
  await initHashing();
  await c.client.createTable(T, { name: 'id', type: 'string' });
  await allLed(c);
  // Items on most slices, so that DescribeSlices names their leaders.
  await c.client.batchWrite(T, { puts: Array.from({ length: 25 }, (_, i) => ({ id: `seed${i}` })) });
});

describe('writes in flight on a leader that is lost (R=3, real processes)', () => {
  it('all succeed, each applied exactly once: counters equal their acknowledged increments', async () => {
    // Counters and conditional puts on the slices that one node leads now.
    const layout = await c.client.describeSlices(T);
    const first = c.cluster.nodes.find((n) => layout.slices.some((s) => s.node === n.url))!;
    const itsSlices = new Set(layout.slices.filter((s) => s.node === first.url).map((s) => s.slice));
    const onFirst = (prefix: string, count: number) => {
      const out: string[] = [];
      for (let n = 0; n < 1_000_000 && out.length < count; n++) if (itsSlices.has(sliceOf('string', `${prefix}${n}`, layout.sliceCount))) out.push(`${prefix}${n}`);
      return out;
    };
    const counters = onFirst('counter', COUNTERS);
    const putKeys = Array.from({ length: WRITERS }, (_, w) => onFirst(`put${w}-`, WRITES_PER_WRITER_MAX));

    const acked = new Map<string, number>(counters.map((k) => [k, 0]));
    const putsAcked: string[] = [];
    const failures: string[] = [];
    let stop = false;
    const started = Date.now();
    const writers = Array.from({ length: WRITERS }, async (_, w) => {
      for (let n = 0; n < WRITES_PER_WRITER_MAX && !stop && Date.now() - started < LOAD_MS_MAX; n++) {
        const put = n % 4 === 3;
        const id = put ? putKeys[w][n] : counters[(w + n) % COUNTERS];
        const request = put
          ? c.http.request('PutItem', { table: T, item: { id, w }, condition: 'attribute_not_exists(id)' })
          : c.http.request('UpdateItem', { table: T, key: { id }, update: 'ADD n :one', values: { ':one': 1 } });
        try {
          await request;
          if (put) putsAcked.push(id);
          else acked.set(id, acked.get(id)! + 1);
        } catch (err) {
          failures.push(`${put ? 'conditional put' : 'update'} of ${id}: ${err instanceof KeysliceError ? `${err.code}: ${err.message}` : String(err)}`);
        }
      }
    });

    let frozen: ManagedProcess | null = null;
    let second: ManagedProcess | null = null;
    let beforeKill = new Map<string, number>();
    let killed = '';
    try {
      await sleep(1_000);
      // The leader freezes with writes in flight; another is elected for its slices; it wakes.
      frozen = first;
      frozen.child.kill('SIGSTOP');
      await statusUntil(c, 'the frozen leader replaced', leadsNothing(first));
      await sleep(1_000);
      frozen.child.kill('SIGCONT');
      frozen = null;
      // Whichever node leads the counters now is killed, with writes in flight, and restarted.
      second = await leaderOf(c, T, counters[0]);
      await sleep(1_000);
      // Its counts go with it: what it counted until now, read first (the resends of the freeze met it).
      beforeKill = await duplicateWrites();
      killed = second.url;
      await stopProcess(second.child, 'SIGKILL');
      await statusUntil(c, 'the killed leader replaced', leadsNothing(second));
      await sleep(1_000);
      await restartNode(c, second);
      await allLed(c, 'every slice led again');
      await sleep(500);
    } finally {
      if (frozen !== null) frozen.child.kill('SIGCONT');
      stop = true;
      await Promise.all(writers);
    }

    const updates = [...acked.values()].reduce((a, b) => a + b, 0);
    // Every node's count now, and what the killed node had counted before it was killed (its count starts again at 0).
    const atEnd = await duplicateWrites();
    const freeze = [...beforeKill.values()].reduce((a, b) => a + b, 0);
    const duplicates = [...atEnd.values()].reduce((a, b) => a + b, 0) + (beforeKill.get(killed) ?? 0);
    console.log(
      `write resend: ${updates} increments and ${putsAcked.length} conditional puts acknowledged in ${Date.now() - started} ms, ${failures.length} failed; ` +
        `${duplicates} resends met an id already applied and were answered from memory (${freeze} of them before the kill)`,
    );
    expect(atEnd.size, 'every node reports its duplicate writes').toBe(3);
    expect(failures).toEqual([]);
    expect(updates).toBeGreaterThan(0);
    for (const [id, n] of acked) expect((await c.http.request('GetItem', { table: T, key: { id } })).item?.n ?? 0, id).toBe(n);
    for (const id of putsAcked) expect((await c.http.request('GetItem', { table: T, key: { id } })).item, id).not.toBeNull();
  }, 180_000);
});
