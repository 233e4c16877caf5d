// The coordinator's "node ... counts down" / "counts up again" lines (coordinator/metadata/node-count-log.ts, written by
// Membership.noteDown once a turn) for a node whose link flaps: at most one line a node per NODE_COUNT_LOG_INTERVAL_MS,
// the first change after a quiet spell at once, the held-back ones counted, and the last line the node's state. Said
// at every change (as first written, in membership.ts), a node that flapped at each turn wrote two lines a second.
import { describe, expect, it } from 'vitest';
import { NodeCountLog } from '../coordinator/metadata/node-count-log.js';
import { NODE_COUNT_LOG_INTERVAL_MS, REBALANCE_INTERVAL_MS } from '../shared/limits.js';

const URL = 'ws://127.0.0.1:1';
const why = () => 'its link is connecting';

/** Feeds `states` to a NodeCountLog one membership turn apart from t=0; the lines with the turn's time. */
function run(states: boolean[]): { at: number; line: string }[] {
  const said: { at: number; line: string }[] = [];
  let at = 0;
  const log = new NodeCountLog((line) => said.push({ at, line }));
  for (const up of states) {
    log.note(0, URL, up, why, at);
    at += REBALANCE_INTERVAL_MS;
  }
  return said;
}

describe('the counts-down / counts-up-again log line of a node', () => {
  it('says a node that counted up and then not at once, and its return at once after a quiet spell', () => {
    const quiet = NODE_COUNT_LOG_INTERVAL_MS / REBALANCE_INTERVAL_MS;
    const said = run([true, true, false, ...Array<boolean>(quiet).fill(false), true]);
    expect(said.map((s) => s.line)).toEqual([`node ${URL} counts down: its link is connecting`, `node ${URL} counts up again`]);
    expect(said[0].at, 'the first change of a node, said at its turn').toBe(2 * REBALANCE_INTERVAL_MS);
  });

  it('says nothing of a node that never counted up (it is starting)', () => {
    expect(run([false, false, false, true])).toEqual([]);
  });

  it('writes at most one line a node per NODE_COUNT_LOG_INTERVAL_MS while its link flaps at every turn, the last its state', () => {
    const turns = (60_000 / REBALANCE_INTERVAL_MS) | 0; // a minute of flapping, then steady up
    const flapping = Array.from({ length: turns }, (_, i) => i % 2 === 0);
    const states = [...flapping, ...Array<boolean>(2 * (NODE_COUNT_LOG_INTERVAL_MS / REBALANCE_INTERVAL_MS)).fill(true)];
    const said = run(states);
    for (let i = 1; i < said.length; i++) expect(said[i].at - said[i - 1].at, `line ${i} after line ${i - 1}`).toBeGreaterThanOrEqual(NODE_COUNT_LOG_INTERVAL_MS);
    expect(said.length, 'lines for a minute of flapping').toBeLessThanOrEqual(60_000 / NODE_COUNT_LOG_INTERVAL_MS + 2);
    expect(said.at(-1)!.line, 'the last line, once it is steady').toMatch(/counts up again; it changed \d+ more times since its last line/);
    // Each line says its own change (where its state is not the last line's) and counts those held back.
    let counted = 0;
    let last = true;
    for (const { line } of said) {
      const up = / counts up again/.test(line);
      counted += Number(/changed (\d+) more/.exec(line)?.[1] ?? 0) + (up !== last ? 1 : 0);
      last = up;
    }
    expect(counted, 'every change said or counted').toBe(states.slice(1).filter((up, i) => up !== states[i]).length);
  });
});
