// A fresh slice store for the range benches (range-hop.ts's first-read rows, fresh-read-cpu.ts): `ranges` slices of
// `items` items each, shaped as hops.ts's (a device's readings, 160-byte payloads), none of them read yet.
import { SliceOp } from '../shared/protocol.js';
import { itemBytes, NAME_ATTRIBUTE, type Item } from '../shared/values.js';
import { SliceStore } from '../slice-worker/partition.js';

export function freshStore(ranges: number, items: number): SliceStore {
  const s = new SliceStore(0, 1, () => 1_764_000_000_000);
  s.execute([SliceOp.Assign, 1, Array.from({ length: ranges }, (_, i) => i)]);
  for (let g = 0; g < ranges; g++) {
    for (let i = 0; i < items; i++) {
      const item: Item = { [NAME_ATTRIBUTE]: `d${g}_${i}`, device: `d${g}`, seq: i, payload: 'x'.repeat(160) };
      s.execute([SliceOp.Put, 1, g, `k${String(i).padStart(6, '0')}`, item, itemBytes(item), null, null]);
    }
  }
  return s;
}
