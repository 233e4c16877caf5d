// A drain of a node that leads slices, under writes, through real processes (docs/replication.md, "Drain"): 4 slice
// nodes at R=3, the node leading most slices drained while 16 writers update their keys. Before the drained replica
// of a slice it leads leaves the set, its leadership is handed to a replica that stays (the leadership handover's
// catch-up wait, then an election the new leader wins with the old one's last record), so the change that takes the replica out is led on, not elected: no write the drained node had in flight
// gets an unknown outcome. Checked: the drain handed those leaderships over (status), no election ran but the
// handovers' and those the coordinator starts for an answer that came late (keyslice_elections_total by why), no write
// was sent again after an unknown outcome (keyslice_writes_resent_total) and none failed, and every acknowledged write
// reads back.
import { describe, expect, it } from 'vitest';
import type { ElectionReason } from '../coordinator/metadata/failover.js';
import { bulk, elasticClusters, electionsByReason, ledWithout, untilSpread, seen, waitFor, writesResent, WriteLoad, type Elastic } from './elastic-fixture.js';

const cluster = elasticClusters();
const WRITERS = 16;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The elections the coordinator starts because an answer came late: a leader's Pong (leader_timeout; at a change,
 * change_leader_silent) or an election's Prepared answers (election_timeout). On a 2-core machine at load 17-24 a
 * starved node or coordinator is that late now and then, and electing is then the product's answer, not the drain's
 * doing (2 of 5 runs failed on one election besides the handovers when every one was counted, with 4 handovers for
 * 3 leaderships: a slice handed over twice, as after an election that named the drained node again; the reason was
 * not recorded then, cost.why now says it). Every other reason still fails the test: change_leader_left (a change
 * took out a leader that was not handed over), change_chained or start (a change that did not lead on), and the rest. */
const SLOW_ANSWER: readonly ElectionReason[] = ['leader_timeout', 'change_leader_silent', 'election_timeout'];

/** 4 nodes at R=3 with replicas and leaderships spread, 200 items, then `action` on the node leading most slices while
 * WRITERS update their keys; waits until the node holds no replica and every slice is led with no change unsettled.
 * Answers what it cost (the counters' growth from just before the action to its end); checks that every acknowledged
 * write reads back. */
async function leaderLeavesUnderWrites(action: 'drain' | 'remove') {
  const lines: string[] = [];
  const e = await cluster({ nodes: 4, slices: 12, replicationFactor: 3, log: (l) => lines.push(l) });
  await untilSpread(e, 90_000);
  await bulk(e, 200);
  const load = new WriteLoad(e.client, 'elastic', WRITERS, 8);
  try {
    return await underLoad(e, action, load, lines);
  } finally {
    // Stopped on a failure too (already stopped on success, where a load's error is thrown).
    await load.stop().catch(() => {});
  }
}

/** leaderLeavesUnderWrites once the load runs. */
async function underLoad(e: Elastic, action: 'drain' | 'remove', load: WriteLoad, lines: readonly string[]) {
  await sleep(1_500);
  // Before status's counts, so that the elections by why span at least the elections status counts.
  const whyBefore = await electionsByReason(e);
  let st = await e.status();
  const victim = st.nodes.reduce((a, b) => (b.slices > a.slices ? b : a));
  expect(victim.slices, 'the node leads slices').toBeGreaterThan(0);
  const before = st.replication.leaders;
  const resentBefore = await writesResent(e);
  const errorsBefore = load.errors.length;
  const linesBefore = lines.length;
  const startedAt = performance.now();
  const res = await e.post(action, victim.node);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  await waitFor(
    async () => {
      const now = await ledWithout(e, victim.node);
      st = now.st;
      return now.ok;
    },
    `the ${action} to end`,
    90_000,
    seen(e),
  );
  const endedAt = performance.now();
  await sleep(1_000);
  const l = st.replication.leaders;
  const cost = {
    led: victim.slices,
    resent: (await writesResent(e)) - resentBefore,
    errors: load.errors.length - errorsBefore,
    elections: l.elections - before.elections,
    handovers: l.handovers - before.handovers,
    ledOn: (l.ledOn ?? 0) - (before.ledOn ?? 0),
    givenUp: (l.handoversGivenUp ?? 0) - (before.handoversGivenUp ?? 0),
    // Handovers whose election named another than the replica handed to (the drain then hands over again).
    givenBack: (l.handoversGivenBack ?? 0) - (before.handoversGivenBack ?? 0),
    // The elections by why they started (keyslice_elections_total's growth), for a count besides the handovers.
    why: Object.fromEntries(Object.entries(await electionsByReason(e)).map(([k, v]) => [k, v - (whyBefore[k] ?? 0)]).filter(([, d]) => d !== 0)),
    // Why writes were sent again (the router's log: a line a second at most), for a count that is not 0.
    resentWhy: lines.slice(linesBefore).filter((line) => /sent again after an unknown outcome/.test(line)),
  };
  await load.stop();
  if (process.env.KEYSLICE_TEST_LOG) {
    console.log(
      `${action} of a node leading ${cost.led} of 12 slices (4 nodes, R=3, ${WRITERS} writers): took ${((endedAt - startedAt) / 1000).toFixed(1)} s; ${cost.resent} writes resent after an unknown outcome, ${cost.errors} writes failed ` +
        `(${[...new Set(load.errors.map((x) => x.message.slice(0, 100)))].join(' | ')}); ${cost.elections} elections (${cost.handovers} handovers, ${cost.givenUp} given up, ${cost.givenBack} given back; by why ${JSON.stringify(cost.why)}), ${cost.ledOn} changes led on`,
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
    // counted with the elections): the changes that took its replicas out were led on, and no election ran but the
    // handovers' and those for an answer that came late (SLOW_ANSWER).
    expect(cost.handovers, JSON.stringify(cost)).toBeGreaterThanOrEqual(cost.led);
    const besides = Object.keys(cost.why).filter((why) => why !== 'handover' && !(SLOW_ANSWER as readonly string[]).includes(why));
    expect(besides, `elections besides handovers and late answers (${JSON.stringify(cost)})`).toEqual([]);
    expect(cost.elections - cost.handovers, `elections besides handovers, more than those for late answers (${JSON.stringify(cost)})`).toBeLessThanOrEqual(SLOW_ANSWER.reduce((n, why) => n + (cost.why[why] ?? 0), 0));
    expect(cost.givenUp, `handovers given up (${JSON.stringify(cost)})`).toBe(0);
    expect(cost.resent, `writes resent after an unknown outcome (${JSON.stringify(cost)})`).toBe(0);
    expect(cost.errors, `writes that failed (${JSON.stringify(cost)})`).toBe(0);
  }, 180_000);
});
