// A drain of a node that leads slices, under writes, through real processes (docs/replication.md, "Drain"): 4 slice
// nodes at R=3, the node leading most slices drained while 4 writers update their keys and a probe times one write
// after another. Before the drained replica of a slice it leads leaves the set, its leadership is handed to a replica
// that stays (the leadership handover's catch-up wait, then an election the new leader wins with the old one's last
// record), so the change that takes the replica out is led on, not elected: no write the drained node had in flight
// gets an unknown outcome. Checked: the drain handed those leaderships over (status), no write was sent again after an
// unknown outcome (keyslice_writes_resent_total) and none failed, and every acknowledged write reads back.
import { describe, expect, it } from 'vitest';
import { KeysliceError } from '../shared/errors.js';
import { bulk, elasticClusters, led, replicaSets, replicasSpread, seen, waitFor, writesResent, WriteLoad, type Elastic } from './elastic-fixture.js';

const cluster = elasticClusters();
const WRITERS = Number(process.env.DRAIN_WRITERS ?? 16);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One update after another on its own keys, each timed (ms since `t0`, latency ms); errors counted apart, each followed
 * by a pause as WriteLoad's. Bounded: at most PROBE_MS, or until stopped. */
const PROBE_MS = 240_000;
class Probe {
  readonly times: [number, number][] = [];
  errors = 0;
  private stopped = false;
  private readonly done: Promise<void>;
  constructor(e: Elastic, readonly t0: number) {
    this.done = (async () => {
      for (let i = 0; i < 1_000_000 && !this.stopped && performance.now() - t0 < PROBE_MS; i++) {
        const at = performance.now();
        try {
          await e.client.updateItem('elastic', `probe-${i % 16}`, { set: { v: i } });
          this.times.push([at - this.t0, performance.now() - at]);
        } catch (err) {
          if (!(err instanceof KeysliceError)) throw err;
          this.errors++;
          await sleep(20);
        }
      }
    })();
  }
  async stop(): Promise<void> {
    this.stopped = true;
    await this.done;
  }
  /** The latencies of the writes started in [from, to) ms since t0: median and max. */
  within(from: number, to: number): { n: number; median: number; max: number } {
    const l = this.times.filter(([at]) => at >= from && at < to).map(([, ms]) => ms).sort((a, b) => a - b);
    return { n: l.length, median: l[Math.floor(l.length / 2)] ?? NaN, max: l.at(-1) ?? NaN };
  }
}

/** 4 nodes at R=3 with replicas and leaderships spread, 200 items, then `action` on the node leading most slices while
 * WRITERS update their keys and the probe times its writes; waits until `ended` says the node holds no replica and every
 * slice is led with no change unsettled. Answers what it cost (the counters' growth from just before the action to its
 * end) and the probe's latencies; checks that every acknowledged write reads back. */
async function leaderLeavesUnderWrites(action: 'drain' | 'remove') {
  const e = await cluster({ nodes: 4, slices: 12, replicationFactor: 3 });
  let st = await e.status();
  await waitFor(
    async () => {
      st = await e.status();
      const slices = st.nodes.map((n) => n.slices);
      return replicasSpread(st) && Math.max(...slices) - Math.min(...slices) <= 1;
    },
    'replicas and leaderships spread over the 4 nodes',
    90_000,
    seen(e),
  );
  await bulk(e, 200);
  const load = new WriteLoad(e.client, 'elastic', WRITERS, 8);
  const t0 = performance.now();
  const probe = new Probe(e, t0);
  try {
    return await underLoad(e, action, load, probe);
  } finally {
    // Stopped on a failure too (already stopped on success, where a load's error is thrown).
    await Promise.allSettled([load.stop(), probe.stop()]);
  }
}

/** leaderLeavesUnderWrites once the load runs. */
async function underLoad(e: Elastic, action: 'drain' | 'remove', load: WriteLoad, probe: Probe) {
  const t0 = probe.t0;
  await sleep(1_500);
  let st = await e.status();
  const victim = st.nodes.reduce((a, b) => (b.slices > a.slices ? b : a));
  expect(victim.slices, 'the node leads slices').toBeGreaterThan(0);
  const before = st.replication.leaders;
  const resentBefore = await writesResent(e);
  const errorsBefore = load.errors.length;
  const startedAt = performance.now() - t0;
  const res = await e.post(action, victim.node);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  await waitFor(
    async () => {
      st = await e.status();
      const sets = replicaSets(e);
      return led(st) && st.replication.leaders.unsettled === 0 && sets.every((set) => set.length === 3 && !set.includes(victim.node));
    },
    `the ${action} to end`,
    90_000,
    seen(e),
  );
  const endedAt = performance.now() - t0;
  await sleep(1_000);
  const l = st.replication.leaders;
  const cost = {
    led: victim.slices,
    resent: (await writesResent(e)) - resentBefore,
    errors: load.errors.length - errorsBefore + probe.errors,
    elections: l.elections - before.elections,
    handovers: l.handovers - before.handovers,
    ledOn: (l.ledOn ?? 0) - (before.ledOn ?? 0),
    givenUp: (l.handoversGivenUp ?? 0) - (before.handoversGivenUp ?? 0),
  };
  await load.stop();
  await probe.stop();
  const lat = { before: probe.within(0, startedAt), during: probe.within(startedAt, endedAt), after: probe.within(endedAt, Infinity) };
  if (process.env.KEYSLICE_TEST_LOG) {
    const f = (x: { n: number; median: number; max: number }) => `${x.n} writes, median ${x.median.toFixed(1)} ms, max ${x.max.toFixed(1)} ms`;
    console.log(
      `${action} of a node leading ${cost.led} of 12 slices (4 nodes, R=3, ${WRITERS} writers): took ${((endedAt - startedAt) / 1000).toFixed(1)} s; ${cost.resent} writes resent after an unknown outcome, ${cost.errors} writes failed ` +
        `(${[...new Set(load.errors.map((x) => x.message.slice(0, 100)))].join(' | ')}); ${cost.elections} elections (${cost.handovers} handovers, ${cost.givenUp} given up), ${cost.ledOn} changes led on; ` +
        `probe latency before: ${f(lat.before)}; during: ${f(lat.during)}; after: ${f(lat.after)}`,
    );
  }
  await load.verify(200);
  return cost;
}

describe('a change that takes out a leader hands its leadership over first (R=3)', () => {
  it.each([
    ['drain', 'drains the node leading most slices of 4 under writes: every leadership handed over, no election deposes it, no write resent or failed, everything acknowledged reads back'],
    ['remove', 'removes a leading node that is up under writes: its leaderships are handed over before it goes, as a drain does'],
  ] as const)('%s: %s', async (change, _what) => {
    const cost = await leaderLeavesUnderWrites(change);
    // Every leadership of the node was handed to a replica that stays before its replica left (each handover is
    // counted with the elections): no other election ran, the changes that took its replicas out were led on.
    expect(cost.handovers, JSON.stringify(cost)).toBeGreaterThanOrEqual(cost.led);
    expect(cost.elections - cost.handovers, `elections besides handovers (${JSON.stringify(cost)})`).toBe(0);
    expect(cost.givenUp, `handovers given up (${JSON.stringify(cost)})`).toBe(0);
    expect(cost.resent, `writes resent after an unknown outcome (${JSON.stringify(cost)})`).toBe(0);
    expect(cost.errors, `writes that failed (${JSON.stringify(cost)})`).toBe(0);
  }, 180_000);
});
