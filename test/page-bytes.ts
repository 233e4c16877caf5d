// A range's items as a test reads them from a store in this process (SliceStore.execute): a worker's PackedPage
// joined, other forms as they are. The wire carries the bytes; no code of the project reads a page so.
import { PackedPage, type RangeItems } from '../shared/protocol.js';
import type { Item } from '../shared/values.js';

export function pageBytes(items: RangeItems): Item[] | Uint8Array {
  return items instanceof PackedPage ? items.bytes() : items;
}
