// A slice move (coordinator/metadata/slice-mover.ts) whose source is sent its assignment again
// between MoveFreeze and the switch. The coordinator does that to every node when a replicated
// slice changes leader or a node is removed (membership.ts reassignAll), whatever slices a node is
// moving. The Assign still names the source as owner (the map switches later), so the source owns
// the frozen slice again and acknowledges writes; the move used to switch all the same, to a
// target holding the slice as of the freeze: those writes were lost. Real slice nodes, the real
// NodeLink and ClusterMap; the test only chooses when the Assign goes (the window is a few
// milliseconds wide, so no outside event can be timed into it).
import { describe, expect, it } from 'vitest';
import { SliceMover, Throttle } from '../coordinator/metadata/slice-mover.js';
import { SliceOp, type SliceOpMessage } from '../shared/protocol.js';
import { useSliceNodePair } from './slice-node-pair.js';

const pair = useSliceNodePair('keyslice-move-reassign-');

const TABLE = 1;
const SLICE = 0;
const put = (key: string): SliceOpMessage => [SliceOp.Put, TABLE, SLICE, key, { __name: key, v: 1 }, 20, null, null];
const get = (key: string): SliceOpMessage => [SliceOp.Get, TABLE, SLICE, key, null, false];

describe('a slice move whose source is assigned again after the freeze', () => {
  it('rolls back, and every write the source acknowledged stays readable at the owner the map names', async () => {
    const { map, links } = await pair.start();
    expect(map.ownerOf(SLICE)).toBe(0);
    const [source, target] = links;
    for (let i = 0; i < 50; i++) await source.send(SLICE, put(`before-${i}`));

    // Right after MoveFreeze (the target's last MoveApply is the next step), the source is sent its
    // assignment again, as reassignAll does, and takes a write once it owns the slice again.
    let written = false;
    const targetSend = target.send.bind(target);
    target.send = (<Op extends SliceOpMessage>(slice: number, op: Op) => {
      if (op[0] !== SliceOp.MoveApply || op[3] !== true) return targetSend(slice, op);
      return (async () => {
        source.reassign();
        for (let tries = 0; tries < 200 && !written; tries++) {
          written = await source.send(SLICE, put('after-freeze')).then(
            () => true,
            () => false,
          );
          if (!written) await new Promise((r) => setTimeout(r, 10));
        }
        return targetSend(slice, op);
      })();
    }) as typeof target.send;

    const mover = new SliceMover(map, links, new Throttle(0), () => {});
    const moved = await mover.move(SLICE, 1);
    expect(written).toBe(true); // the source acknowledged the write after the freeze
    // The owner the map names has it (it was lost: the move switched to the target).
    const owner = links[map.ownerOf(SLICE)];
    expect(await owner.send(SLICE, get('after-freeze'))).not.toBeNull();
    expect(await owner.send(SLICE, get('before-7'))).not.toBeNull();
    expect(moved).toBe(false);
    expect(owner).toBe(source);
  }, 60_000);
});
