// A snapshot written in steps (slice-worker/snapshot.ts) while seeded random
// writes, a table drop and a slice leaving go on between the steps: the file
// holds exactly the items of a dumb model (a Map) as of the snapshot point,
// the live store goes on to match the live model, and no record grows past its
// byte bound. A failure replays from the seed.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SNAPSHOT_CHUNK_ITEMS, SNAPSHOT_RECORD_BYTES_MAX } from '../shared/limits.js';
import { EFFECT_SET, RESULT_OK, SliceOp, type Effect, type SliceOpMessage, type UpdateSpec } from '../shared/protocol.js';
import { itemBytes, type Item } from '../shared/values.js';
import { decodeEffects, encodeEffects, RECORD_KIND } from '../slice-worker/log-format.js';
import { SliceStore } from '../slice-worker/partition.js';
import { readRecords } from '../slice-worker/record-file.js';
import { loadSnapshot, writeSnapshot } from '../slice-worker/snapshot.js';
import { rng } from './cluster-fixture.js';

const TABLES = [1, 2, 3];
const OWNED = [0, 1, 2, 3, 4, 5, 6, 7];
/** Not owned: items arrive on it by a slice move (MoveApply) and go when the move is given up. */
const INCOMING = 9;
const LSN = 4242;

type Row = { table: number; slice: number; key: string; item: Item; bytes: number };
const rowKey = (table: number, slice: number, key: string) => `${table}|${slice}|${key}`;
/** Rows as sorted JSON, for comparing a store, a model and a file. */
const rowsOf = (rows: Iterable<Row>) => [...rows].map((r) => JSON.stringify([r.table, r.slice, r.key, r.item, r.bytes])).sort();
const rowOfEffect = (e: Effect): Row => {
  // expect only where it fails: this runs once per item of a store or file (about 24,000 a read), and vitest's expect
  // costs far more than the check (with expect on every call here and in ok(), the file took 2.5x as long).
  if (e[0] !== EFFECT_SET) expect(e[0]).toBe(EFFECT_SET);
  const [, table, slice, key, item, bytes] = e as Extract<Effect, [typeof EFFECT_SET, ...unknown[]]>;
  return { table, slice, key, item, bytes };
};

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup(seed: number) {
  const r = rng(seed);
  let clock = 1_000;
  const store = new SliceStore(0, 1, () => clock++);
  /** The model: what the store should hold, items deep-copied so that an in-place change in the store shows. */
  const model = new Map<string, Row>();
  const ok = (op: SliceOpMessage): unknown => {
    const res = store.execute(op);
    if (res[0] !== RESULT_OK) expect(res[0], JSON.stringify(res)).toBe(RESULT_OK); // once per write: as rowOfEffect's
    return res[1];
  };
  ok([SliceOp.Assign, 1, OWNED]);

  const put = (table: number, slice: number, key: string, padBytes: number) => {
    const item: Item = { __name: key, v: Math.floor(r() * 1e6), pad: 'x'.repeat(padBytes) };
    const bytes = itemBytes(item);
    ok([SliceOp.Put, table, slice, key, item, bytes, null, null]); // sets __mtime on `item`
    model.set(rowKey(table, slice, key), { table, slice, key, item: structuredClone(item), bytes });
  };
  /** One random write: mostly puts (1 in 100 large, so that records are cut by bytes), deletes, updates. */
  const randomWrite = (keySpace: number) => {
    const table = TABLES[Math.floor(r() * TABLES.length)];
    const slice = OWNED[Math.floor(r() * OWNED.length)];
    const key = `k${Math.floor(r() * keySpace)}`;
    const dice = r();
    if (dice < 0.55) put(table, slice, key, r() < 0.01 ? 100_000 + Math.floor(r() * 200_000) : Math.floor(r() * 300));
    else if (dice < 0.75) {
      ok([SliceOp.Delete, table, slice, key, null, null]);
      model.delete(rowKey(table, slice, key));
    } else {
      const spec: UpdateSpec = {
        base: { __name: key },
        actions: [
          { k: 'set', path: ['v'], value: { k: 'value', v: Math.floor(r() * 1e6) } },
          { k: 'add', path: ['n'], n: 1 },
        ],
        condition: null,
        oldOnFailure: false,
        returnValues: 'new',
      };
      const next = ok([SliceOp.Update, table, slice, key, spec, null]) as Item;
      model.set(rowKey(table, slice, key), { table, slice, key, item: structuredClone(next), bytes: itemBytes(next) });
    }
  };
  const dropTable = (table: number) => {
    ok([SliceOp.DropTable, table]);
    for (const [k, row] of model) if (row.table === table) model.delete(k);
  };
  const moveIn = (count: number) => {
    ok([SliceOp.MoveBegin, INCOMING]);
    const effects: Effect[] = [];
    for (let i = 0; i < count; i++) {
      const key = `m${i}`;
      const item: Item = { __name: key, moved: i, __mtime: clock };
      const bytes = itemBytes(item);
      effects.push([EFFECT_SET, 1, INCOMING, key, item, bytes]);
      model.set(rowKey(1, INCOMING, key), { table: 1, slice: INCOMING, key, item: structuredClone(item), bytes });
    }
    ok([SliceOp.MoveApply, INCOMING, Uint8Array.from(encodeEffects(effects)), false]);
  };
  const abandonMoveIn = () => {
    ok([SliceOp.MoveAbort, INCOMING, 'target']);
    for (const [k, row] of model) if (row.slice === INCOMING) model.delete(k);
  };
  const storeRows = () => rowsOf([...store.entries()].map(rowOfEffect));
  return { r, store, model, put, randomWrite, dropTable, moveIn, abandonMoveIn, storeRows };
}

describe('a snapshot written in steps while writes go on', () => {
  for (const seed of [1, 2, 3]) {
    it(`holds exactly the items as of the snapshot point (seed ${seed})`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'keyslice-snapshot-'));
      dirs.push(dir);
      const { r, store, model, put, randomWrite, dropTable, moveIn, abandonMoveIn, storeRows } = setup(seed);
      for (let i = 0; i < 20_000; i++) put(TABLES[i % 3], OWNED[i % OWNED.length], `k${i}`, Math.floor(r() * 300));
      for (let i = 0; i < 3_000; i++) randomWrite(30_000);
      moveIn(500);
      store.takeEffects(); // what the worker's log append does at the end of every task

      // The snapshot point.
      const expected = rowsOf(model.values());
      expect(storeRows()).toEqual(expected);
      const view = store.snapshotView();
      expect(view.items).toBe(model.size);

      let steps = 0;
      const between = async () => {
        steps++;
        const writes = Math.floor(r() * 100);
        for (let i = 0; i < writes; i++) randomWrite(30_000);
        if (steps === 2) dropTable(2);
        if (steps === 3) abandonMoveIn();
        if (steps === 4) for (let i = 0; i < 1_000; i++) put(2, OWNED[i % OWNED.length], `k${i}`, 10); // table id 2 again, other items
        store.takeEffects();
      };
      // stepMs 0: one record per step, so that writes land between every two records.
      const count = await writeSnapshot(dir, LSN, view, { stepMs: 0, between });

      expect(count).toBe(expected.length);
      expect(steps).toBeGreaterThanOrEqual(Math.floor(expected.length / SNAPSHOT_CHUNK_ITEMS));
      const loaded: Row[] = [];
      const summary = loadSnapshot(dir, (e) => loaded.push(rowOfEffect(e)));
      expect(summary).toEqual({ lsn: LSN, items: expected.length });
      expect(rowsOf(loaded)).toEqual(expected);
      // The writes between the steps reached the live store, and only it.
      expect(storeRows()).toEqual(rowsOf(model.values()));
      expect(storeRows()).not.toEqual(expected);

      // Records are cut at SNAPSHOT_RECORD_BYTES_MAX item bytes: none holds more, but for its last item.
      const file = join(dir, `snapshot-${String(LSN).padStart(16, '0')}.snap`);
      const records = readRecords(file, readFileSync(file), 1).records.filter((rec) => rec.kind === RECORD_KIND.SnapshotItems);
      for (const rec of records) {
        const effects = decodeEffects(rec.payload).map(rowOfEffect);
        expect(effects.length).toBeLessThanOrEqual(SNAPSHOT_CHUNK_ITEMS);
        const allButLast = effects.slice(0, -1).reduce((a, e) => a + e.bytes, 0);
        expect(allButLast).toBeLessThan(SNAPSHOT_RECORD_BYTES_MAX);
      }
      expect(records.some((rec) => decodeEffects(rec.payload).length < SNAPSHOT_CHUNK_ITEMS - 1), 'some record was cut by bytes').toBe(true);
    }, 60_000);
  }

  it('replaces the older snapshot only once the new one is complete', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyslice-snapshot-'));
    dirs.push(dir);
    const { put, store, storeRows } = setup(7);
    for (let i = 0; i < 3_000; i++) put(1, OWNED[i % OWNED.length], `k${i}`, 50);
    store.takeEffects();
    await writeSnapshot(dir, 10, store.snapshotView(), { stepMs: 0, between: async () => {} });
    const older = storeRows();
    for (let i = 0; i < 3_000; i++) put(3, OWNED[i % OWNED.length], `k${i}`, 50);
    store.takeEffects();
    const files: string[][] = [];
    await writeSnapshot(dir, 20, store.snapshotView(), { stepMs: 0, between: async () => void files.push(readdirSync(dir).sort()) });
    // While the new one is written, the older one stays, next to the unfinished .tmp.
    expect(files.length).toBeGreaterThan(1);
    for (const f of files) expect(f).toEqual(['snapshot-0000000000000010.snap', 'snapshot-0000000000000020.snap.tmp']);
    expect(readdirSync(dir)).toEqual(['snapshot-0000000000000020.snap']);
    const loaded: Row[] = [];
    loadSnapshot(dir, (e) => loaded.push(rowOfEffect(e)));
    expect(rowsOf(loaded)).toEqual(storeRows());
    expect(rowsOf(loaded)).not.toEqual(older);
  });
});
