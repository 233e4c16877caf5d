// A worker snapshot (SliceStore.snapshotView, written by snapshot.ts) of a follower's items held as their packed
// bytes (SliceStore.replayPacked): written from those bytes, without decoding one, to the same file as a store whose
// items were decoded, and read back as the same items.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EFFECT_SET, type Effect } from '../shared/protocol.js';
import { itemBytes, type Item } from '../shared/values.js';
import { PACKED_ITEM_CACHE_BYTES_MAX, SNAPSHOT_CHUNK_ITEMS } from '../shared/limits.js';
import * as logFormat from '../slice-worker/log-format.js';
import { SliceStore } from '../slice-worker/partition.js';
import { readRecords } from '../slice-worker/record-file.js';
import { loadSnapshot, writeSnapshot } from '../slice-worker/snapshot.js';
import { rng } from './cluster-fixture.js';

// Counts the items the store decodes (itemOf's decodeItemText), passing each call through.
vi.mock('../slice-worker/log-format.js', async (importOriginal) => {
  const m = await importOriginal<typeof import('../slice-worker/log-format.js')>();
  return { ...m, decodeItemText: vi.fn(m.decodeItemText) };
});
const decodes = vi.mocked(logFormat.decodeItemText);

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** Records a leader would replicate: two tables on two slices, items of many kinds, keys of every msgpack string
 * width a key takes here, a few items over PACKED_ITEM_CACHE_BYTES_MAX (decoded at apply, never held as bytes).
 * Two records in three are applied as their bytes alone (SliceStore.replayPacked). */
function records(): { slice: number; payload: Uint8Array }[] {
  const r = rng(7);
  const out: { slice: number; payload: Uint8Array }[] = [];
  let n = 0;
  for (let rec = 0; rec < 120; rec++) {
    const slice = rec % 2 === 0 ? 5 : 6;
    const effects: Effect[] = [];
    for (let j = 0; j < 6; j++, n++) {
      const key = `k${n}${'\u00e9x'.repeat(n % 40)}`;
      const item: Item = {
        k: key,
        v: Math.floor(r() * 1e9),
        f: r() * 1e6,
        neg: -Math.floor(r() * 1e12),
        l: [1, 'two', null, true],
        b: new Uint8Array([n & 0xff, 1, 2]),
        // Every third record with maps in its items: decoded whole at its apply (SliceStore.applyRecord).
        ...(rec % 3 === 2 ? { m: { deep: { x: n } }, s: { SS: ['p', `q${n}`] }, d: { $N: `${n}.25` } } : {}),
        pad: 'y'.repeat(n % 17 === 0 ? PACKED_ITEM_CACHE_BYTES_MAX + 10 : Math.floor(r() * 300)),
      };
      effects.push([EFFECT_SET, 1 + (n % 2), slice, key, item, itemBytes(item)]);
    }
    out.push({ slice, payload: logFormat.encodeReplicated(effects, null) });
  }
  return out;
}

/** encodeEffects of `effects`, copied out of the encoder's reused buffer. */
const packed = (effects: Effect[]): Buffer => Buffer.from(logFormat.encodeEffects(effects));

async function snapshotOf(store: SliceStore): Promise<{ file: Buffer; effects: Effect[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'keyslice-packed-snapshot-'));
  dirs.push(dir);
  store.takeEffects();
  await writeSnapshot(dir, 77, store.snapshotView(), { stepMs: 0, between: async () => {} });
  const name = readdirSync(dir).find((f) => f.endsWith('.snap'))!;
  const effects: Effect[] = [];
  loadSnapshot(dir, (e) => effects.push(e));
  return { file: readFileSync(join(dir, name)), effects };
}

describe('a worker snapshot of items held as their packed bytes', () => {
  it('writes their bytes without decoding one: the same file, and the same items read back, as of decoded items', async () => {
    const held = new SliceStore(0, 1);
    const decoded = new SliceStore(0, 1);
    let asBytes = 0;
    for (const { slice, payload } of records()) {
      if (logFormat.readPackedReplicated(payload, slice, () => {}) !== undefined) asBytes++;
      held.applyRecord(slice, payload);
      for (const e of logFormat.decodeReplicated(payload).effects) decoded.replay(e);
    }
    expect([held.itemCount, asBytes]).toEqual([720, 80]);
    expect(held.keptBytes).toBeGreaterThan(0);
    expect(decoded.keptBytes).toBe(0);

    decodes.mockClear();
    const fromBytes = await snapshotOf(held);
    expect(decodes).toHaveBeenCalledTimes(0);
    // Whether the slices hold items (a replica's first state: slice-replicas.ts) decodes none either.
    const one = new SliceStore(0, 1);
    one.applyRecord(8, logFormat.encodeReplicated([[EFFECT_SET, 1, 8, 'a', { k: 'a', v: 1 }, 20]], null));
    expect([held.holdsItems(5), held.holdsItems(6), held.holdsItems(7), one.holdsItems(8)]).toEqual([true, true, false, true]);
    expect(decodes).toHaveBeenCalledTimes(0);

    const fromItems = await snapshotOf(decoded);
    expect(fromBytes.file.equals(fromItems.file)).toBe(true);
    expect(fromBytes.effects).toEqual(fromItems.effects);
    // As the store holds them (a file's binary values read back as Buffers, the store's as Uint8Arrays: as before).
    expect(packed(fromBytes.effects).equals(packed([...decoded.entries()]))).toBe(true);
    // Cut into records as before: SNAPSHOT_CHUNK_ITEMS items apiece (these are small), and the end record.
    const recs = readRecords('snap', fromBytes.file, 1).records;
    expect(recs.length).toBe(Math.ceil(720 / SNAPSHOT_CHUNK_ITEMS) + 1);
    // Each record is, for these items, byte for byte what the snapshot wrote before (encodeEffects of its items).
    for (const rec of recs.slice(0, -1)) expect(Buffer.from(rec.payload).equals(packed(logFormat.decodeEffects(rec.payload)))).toBe(true);
    // Nothing of the held store was decoded by the snapshot: reading its items now decodes those held as bytes, once
    // (80 records of 6 items, less those over the size bound, decoded at their apply).
    decodes.mockClear();
    expect(packed([...held.entries()]).equals(packed(fromItems.effects))).toBe(true);
    expect(decodes.mock.calls.length).toBeGreaterThan(400);
    decodes.mockClear();
    void [...held.entries()];
    expect(decodes).toHaveBeenCalledTimes(0);
  });
});
