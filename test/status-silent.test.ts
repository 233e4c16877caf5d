// A frozen slice node known by address, as status shows it (issue 14), through real processes: 3 slice nodes at R=3
// added by address (no heartbeats: a frozen node keeps its link open). One is frozen (SIGSTOP): within a bound from
// the protocol constants, /cluster/status says it is not up and silent (silentMs, at least NODE_HEARTBEAT_TIMEOUT_MS),
// and `keyslice status` prints SILENT in its UP column; thawed (SIGCONT), it is up again, silentMs null, within a few
// turns. Before, status said such a node was up for as long as it stayed frozen (its link open), while placement
// already skipped it (Membership.countsUp).
import { afterAll, describe, expect, it } from 'vitest';
import { LOAD_REPORT_TIMEOUT_MS, NODE_HEARTBEAT_TIMEOUT_MS, REBALANCE_INTERVAL_MS } from '../shared/limits.js';
import type { ClusterStatus } from '../shared/api.js';
import { keyslice, stopRunning } from './cli-run.js';
import { elasticClusters, seen, untilLed, waitFor } from './elastic-fixture.js';
import { freezeProcess, thawProcesses } from './freeze.js';

const cluster = elasticClusters();
afterAll(stopRunning);

/** From the freeze until status says so: the node's last pong came at most a turn (the coordinator pings each link
 * each turn) before it froze, and it is silent NODE_HEARTBEAT_TIMEOUT_MS after that; a status request waits up to
 * LOAD_REPORT_TIMEOUT_MS for the frozen node's load report (its link is open, so it is asked), and the request that
 * shows it silent may follow one that began just before it was, so two such waits (8.4 and 8.5 s measured at load
 * 21-26, where one wait's bound, 7.5 s, left the margin below to absorb the second). */
const SILENT_SHOWN_MS = NODE_HEARTBEAT_TIMEOUT_MS + REBALANCE_INTERVAL_MS + 2 * LOAD_REPORT_TIMEOUT_MS;
/** From the thaw until status says it is up: its next pong (a turn) and a status request. */
const UP_SHOWN_MS = 2 * REBALANCE_INTERVAL_MS + LOAD_REPORT_TIMEOUT_MS;
/** What a loaded machine adds on this test's clock. */
const LOADED_MARGIN_MS = 5_000;

describe('status of idle nodes known by address, at R=1', () => {
  it('says each is up after they were asked nothing for longer than NODE_HEARTBEAT_TIMEOUT_MS (their pongs, each turn)', async () => {
    // At R=1 the coordinator asks a node nothing on its own (no Ping, no heartbeat from a node known by address): the
    // ping Membership.pingLinks sends each link each turn is all that is heard from an idle node, and countsUp
    // (placement, moves, status) would count every node down 5 s after its last frame without it. A status request
    // asks each node for its load (a frame), but says who is up before that: one request after the idle time shows the
    // pongs' clock alone.
    const e = await cluster({ nodes: 2, slices: 4, heartbeat: false });
    await waitFor(async () => (await e.status()).nodes.every((n) => n.up), 'both nodes up', 30_000, seen(e));
    await new Promise((r) => setTimeout(r, NODE_HEARTBEAT_TIMEOUT_MS + 4 * REBALANCE_INTERVAL_MS));
    const st = await e.status();
    expect(st.nodes.map((n) => ({ node: n.node, up: n.up, silentMs: n.silentMs })), 'the idle nodes, after the idle time').toEqual(st.nodes.map((n) => ({ node: n.node, up: true, silentMs: null })));
  }, 60_000);
});

describe('status of a frozen node known by address', () => {
  it('says it is silent (not up, and for how long) within a bound of its freeze, and up again once it thaws', async () => {
    const e = await cluster({ nodes: 3, slices: 12, replicationFactor: 3, heartbeat: false });
    await untilLed(e);
    const victim = e.nodes[2];
    const row = (st: ClusterStatus) => st.nodes.find((n) => n.node === victim.url)!;
    const frozen = [victim.child.pid!];
    try {
      // Taken before the SIGSTOP: freezeProcess returns once every thread stopped, which on a loaded machine is a while
      // after the node stopped answering, and the lower bound below has only a turn's margin (the last pong before it).
      const frozenAt = performance.now();
      await freezeProcess(victim.child.pid!);
      await waitFor(
        async () => {
          const n = row(await e.status());
          const silent = typeof n.silentMs === 'number';
          // Never silent before the bound it is silent by.
          if (silent) expect(n.silentMs, 'silentMs of a node shown silent').toBeGreaterThanOrEqual(NODE_HEARTBEAT_TIMEOUT_MS);
          return !n.up && silent;
        },
        'status to say the frozen node is silent',
        SILENT_SHOWN_MS + LOADED_MARGIN_MS,
        seen(e),
      );
      const shownMs = performance.now() - frozenAt;
      expect(shownMs, 'ms from the freeze until status said silent').toBeGreaterThanOrEqual(NODE_HEARTBEAT_TIMEOUT_MS - REBALANCE_INTERVAL_MS);
      const printed = await keyslice(['status', '--url', e.coordinator.url], 30_000);
      expect(printed.code, printed.stderr).toBe(0);
      const line = printed.stdout.split('\n').find((l) => l.startsWith(victim.url))!;
      expect(line, `keyslice status's row of the frozen node:\n${printed.stdout}`).toMatch(/ SILENT \d+\.\d s /);
      // The other nodes stay up.
      expect((await e.status()).nodes.filter((n) => n.node !== victim.url).every((n) => n.up && n.silentMs === null), 'the nodes not frozen are up').toBe(true);

      thawProcesses(frozen);
      const thawedAt = performance.now();
      await waitFor(
        async () => {
          const n = row(await e.status());
          return n.up && n.silentMs === null;
        },
        'status to say the thawed node is up',
        UP_SHOWN_MS + LOADED_MARGIN_MS,
        seen(e),
      );
      if (process.env.KEYSLICE_TEST_LOG) console.log(`status said silent ${shownMs.toFixed(0)} ms after the freeze (bound ${SILENT_SHOWN_MS}), up ${(performance.now() - thawedAt).toFixed(0)} ms after the thaw (bound ${UP_SHOWN_MS})`);
      const after = await keyslice(['status', '--url', e.coordinator.url], 30_000);
      expect(after.stdout.split('\n').find((l) => l.startsWith(victim.url)), after.stdout).toMatch(/^\S+\s+active\s+yes\s/);
    } finally {
      thawProcesses(frozen);
    }
  }, 90_000);
});
