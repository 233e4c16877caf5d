// The coordinator's log lines for a node that stops or starts counting up (Membership.noteDown, once a turn): they tell a
// node found down (placement skips it; --remove-down-after-ms and --drain-replace-down-ms count from then) from the
// coordinator's own stall, which counts none down. Said as each node changes, but at most once a node per
// NODE_COUNT_LOG_INTERVAL_MS: a node whose link flaps (ready, lost, ready again within a turn or two) would change at
// every turn, two lines a second for as long as it flaps. The first change after a quiet spell is said at once; those
// held back are counted in the node's next line, which comes at the first turn after the interval at which the node
// changed since its last line, so the last line said of a node is its state, no later than the interval after it began.
import { assert } from '../../shared/errors.js';
import { NODE_COUNT_LOG_INTERVAL_MS } from '../../shared/limits.js';

interface Said {
  /** Whether the node's last line (or its first count, unsaid) had it up. */
  said: boolean;
  /** When that line was written (performance.now()'s clock); -Infinity: none yet. */
  at: number;
  /** Whether it counts up at the latest turn, and how often that changed since the last line. */
  up: boolean;
  changes: number;
}

export class NodeCountLog {
  private readonly nodes = new Map<number, Said>();

  constructor(
    private readonly log: (line: string) => void,
    private readonly intervalMs = NODE_COUNT_LOG_INTERVAL_MS,
  ) {}

  /** Node `index` (at `url`) counts up (`up`) or not at this turn, at `now` (performance.now()); `why` says why not,
   * asked only for a line. A node that never counted up since this process started (it is starting) is not said down. */
  note(index: number, url: string, up: boolean, why: () => string, now: number): void {
    const s = this.nodes.get(index);
    if (s === undefined) {
      if (up) this.nodes.set(index, { said: true, at: -Infinity, up: true, changes: 0 });
      return;
    }
    if (up !== s.up) {
      s.up = up;
      s.changes++;
    }
    if (s.changes === 0 || now - s.at < this.intervalMs) return;
    // Changes not said: all since the last line but the one this line says (none when it is back as last said).
    const held = s.changes - (up !== s.said ? 1 : 0);
    assert(held >= 0, 'a line says at most one change');
    const more = held === 0 ? '' : `; it changed ${held} more times since its last line (one a node every ${this.intervalMs / 1000} s at most)`;
    this.log(up ? `node ${url} counts up again${more}` : `node ${url} counts down: ${why()}${more}`);
    s.said = up;
    s.at = now;
    s.changes = 0;
  }

  /** The node was removed: nothing more is said of it. */
  forget(index: number): void {
    this.nodes.delete(index);
  }
}
