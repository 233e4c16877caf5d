// A coordinator whose own process stops for longer than a node's heartbeat timeout (SIGSTOP: a starved machine, a
// long GC, a VM paused) counts none of its nodes down for it, elects no new leader, and loses nothing: real
// processes, 3 nodes at R=3. On resume its timers fire late before the sockets are read: a membership turn more than
// COORDINATOR_STALL_MS late excuses the stall from every node's silence (NodeLink.excuse) and runs after the sockets
// were read (setImmediate), and the failover runner's first late tick looks at no timeout and leaves the stall out of
// each slice leader's silence (ReplicaLeaders.tick, SliceFailover.excuse). The
// same rules in process, on a virtual clock: test/replica-map.test.ts ("a coordinator whose own event loop stalled").
import { describe, expect, it } from 'vitest';
import { NODE_HEARTBEAT_TIMEOUT_MS, COORDINATOR_STALL_MS, REBALANCE_INTERVAL_MS } from '../shared/limits.js';
import { allLed, clusterStatus, metricSum, useCluster } from './cluster-fixture.js';
import { waitFor } from './elastic-fixture.js';
import { freezeProcess } from './freeze.js';

const lines: string[] = [];
const c = useCluster({ nodes: 3, slices: 12, replicationFactor: 3, workers: 1, log: (l) => lines.push(l) });
const T = 'stall';
const ITEMS = 60;
/** How long the coordinator stays stopped: past a node's heartbeat timeout (a node silent that long counts down) and
 * so past COORDINATOR_STALL_MS, with a second of room. */
const STOPPED_MS = NODE_HEARTBEAT_TIMEOUT_MS + 1_000;
/** After the resume: a few membership turns (REBALANCE_INTERVAL_MS) and failover ticks, in which a node counted down
 * or a leader timed out would show. */
const AFTER_MS = 6 * REBALANCE_INTERVAL_MS;

/** A coordinator log line that says a node was counted down, removed, or a slice elected anew. */
const trouble = (l: string) => /\[coordinator\].*(counts? (it )?down|removed|elections? started|elected their leaders|leads at term)/.test(l);

describe('a coordinator stopped past the node heartbeat timeout (SIGSTOP, real processes, R=3)', () => {
  it('counts no node down, elects no leader, and every acknowledged item reads back', async () => {
    expect(STOPPED_MS).toBeGreaterThan(COORDINATOR_STALL_MS);
    await c.client.createTable(T, { name: 'id', type: 'string' });
    for (let i = 0; i < ITEMS; i++) await c.client.putItem(T, { id: `k${i}`, v: i });
    const before = await allLed(c);
    const electionsBefore = await metricSum(c, 'keyslice_elections_total');
    expect(electionsBefore, 'the metric and status agree').toBe(before.replication.leaders.elections);
    const from = lines.length;

    const pid = c.cluster.coordinator.child.pid!;
    await freezeProcess(pid);
    try {
      await new Promise((r) => setTimeout(r, STOPPED_MS));
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await new Promise((r) => setTimeout(r, AFTER_MS));

    const after = await clusterStatus(c);
    const nodes = after.nodes.map((n) => `${n.node} ${n.status} up=${n.up} silentMs=${n.silentMs ?? '-'}`).join('; ');
    const said = lines.slice(from).filter(trouble);
    expect(said, 'what the coordinator said of its nodes and leaders after its stall').toEqual([]);
    expect(after.nodes.every((n) => n.status === 'active' && n.up), `every node active and up (${nodes})`).toBe(true);
    expect(after.replication.leaders.elections, `elections since the coordinator started (${after.replication.note})`).toBe(before.replication.leaders.elections);
    expect(await metricSum(c, 'keyslice_elections_total'), 'keyslice_elections_total').toBe(electionsBefore);
    const missing: string[] = [];
    for (let i = 0; i < ITEMS; i++) {
      const item = await c.client.getItem(T, { id: `k${i}` });
      if (item?.v !== i) missing.push(`k${i}: ${JSON.stringify(item)}`);
    }
    expect(missing, 'acknowledged items that did not read back').toEqual([]);
  }, 60_000);

  it('a node stopped as long is said down (the line the test above looks for), and up again once it resumes', async () => {
    // The control of the test above, whose first check is that no such line comes: a real node found down is said so,
    // through the same membership turn, and its return said within NODE_COUNT_LOG_INTERVAL_MS of that line.
    const node = c.cluster.nodes[2];
    const of = (l: string) => l.includes(node.url);
    const from = lines.length;
    await freezeProcess(node.child.pid!);
    try {
      await new Promise((r) => setTimeout(r, STOPPED_MS));
    } finally {
      process.kill(node.child.pid!, 'SIGCONT');
    }
    await waitFor(() => lines.slice(from).some((l) => of(l) && / counts up again/.test(l)), `the coordinator says ${node.url} counts up again`, 20_000);
    const said = lines.slice(from).filter((l) => of(l) && / counts (down|up again)/.test(l));
    expect(said[0], 'the first line said of the stopped node').toMatch(/counts down: nothing came from it for \d+\.\d s/);
    expect(said.filter(trouble).length, 'its counts-down line, as the test above would see it').toBeGreaterThan(0);
  }, 60_000);
});
