// The ids of applied writes a slice's replica remembers (slice-worker/replication/applied-requests.ts):
// bounded by time, count and bytes, oldest forgotten first, the newest always kept; a snapshot's list
// restores exactly the table it came from.
import { describe, expect, it } from 'vitest';
import { Packr } from 'msgpackr';
import { AppliedRequests, type AppliedList } from '../slice-worker/replication/applied-requests.js';
import { decodeEffects, decodeReplicated, encodeReplicated, encodeReplicatedEach, encodeReplicatedItems, itemTextsOf, readPackedReplicated } from '../slice-worker/log-format.js';
import { EFFECT_SET, SliceStore, type Effect } from '../slice-worker/partition.js';
import { PACKED_ITEM_CACHE_BYTES_MAX } from '../shared/limits.js';
import { encodeKeyPart } from '../shared/key-encoding.js';
import { rng } from './cluster-fixture.js';
import { EFFECT_DELETE, packClientItem, SliceOp, sliceSetOf, type MoveReadResult, type SliceOpMessage } from '../shared/protocol.js';
import { APPLIED_REQUEST_BYTES_PER_SLICE_MAX, APPLIED_REQUESTS_KEPT_MS, APPLIED_REQUESTS_PER_SLICE_MAX } from '../shared/limits.js';

const R = 0xfeedc0de;

describe('the writes a slice remembers', () => {
  it('keeps at most APPLIED_REQUESTS_PER_SLICE_MAX, forgetting the oldest', () => {
    const a = new AppliedRequests();
    const extra = 5000;
    for (let n = 1; n <= APPLIED_REQUESTS_PER_SLICE_MAX + extra; n++) a.add(R, n, 1_000, n % 3 === 0 ? true : null);
    expect(a.size).toBe(APPLIED_REQUESTS_PER_SLICE_MAX);
    expect(a.find(R, extra)).toBeUndefined();
    expect(a.find(R, extra + 1)).toBe((extra + 1) % 3 === 0 ? true : null);
    expect(a.list().counters[0]).toBe(extra + 1);
  });

  it('forgets a write once one applied more than APPLIED_REQUESTS_KEPT_MS after it comes', () => {
    const a = new AppliedRequests();
    a.add(R, 1, 0, true);
    a.add(7, 1, APPLIED_REQUESTS_KEPT_MS, false);
    expect(a.find(R, 1)).toBe(true); // exactly the bound: kept
    expect(a.find(7, 2)).toBeUndefined();
    a.add(R, 2, APPLIED_REQUESTS_KEPT_MS + 1, null);
    expect(a.find(R, 1)).toBeUndefined();
    expect(a.list()).toEqual({ instances: [7, R], counters: [1, 2], of: [0, 1], ats: [APPLIED_REQUESTS_KEPT_MS, APPLIED_REQUESTS_KEPT_MS + 1], answers: [false, null] });
  });

  it('keeps at most APPLIED_REQUEST_BYTES_PER_SLICE_MAX of answers, but always the newest', () => {
    const a = new AppliedRequests();
    const big = { v: 'x'.repeat(100 * 1024) };
    for (let n = 1; n <= 10; n++) a.add(R, n, 0, big);
    expect(a.size).toBe(Math.floor(APPLIED_REQUEST_BYTES_PER_SLICE_MAX / (100 * 1024))); // each counts 100 KiB and a few bytes
    a.add(R, 11, 0, { v: 'x'.repeat(APPLIED_REQUEST_BYTES_PER_SLICE_MAX) });
    expect(a.list().counters).toEqual([11]);
  });

  it('restores from its list exactly, and refuses an id applied twice', () => {
    const a = new AppliedRequests();
    // Three routers' writes, interleaved; the same counter from two routers is two writes.
    for (let n = 0; n < 6000; n++) a.add(1 + (n % 3), 1 + Math.floor(n / 3), n * 30, n % 2 === 0 ? null : { n });
    expect(a.find(1, 1)).toBeUndefined(); // forgotten (count bound)
    expect(a.find(3, 2000)).toEqual({ n: 5999 });
    const b = new AppliedRequests(a.list());
    expect(b.list()).toEqual(a.list());
    a.add(2 ** 52 - 1, 1, 6000 * 30, null);
    b.add(2 ** 52 - 1, 1, 6000 * 30, null);
    expect(b.list()).toEqual(a.list());
    expect(b.find(2 ** 52 - 1, 1)).toBeNull();
    expect(() => a.add(2 ** 52 - 1, 1, 6000 * 30, null)).toThrow(/applied once/);
    expect(() => a.add(2, 2000, 6000 * 30, null)).toThrow(/applied once/);
  });

  it('keeps no answers in its list when every answer is empty, and no map of a router whose writes are all forgotten', () => {
    const a = new AppliedRequests();
    a.add(5, 1, 0, null);
    a.add(6, 1, APPLIED_REQUESTS_KEPT_MS + 1, null);
    expect(a.list()).toEqual({ instances: [6], counters: [1], of: null, ats: [APPLIED_REQUESTS_KEPT_MS + 1], answers: null });
    expect(a.find(5, 1)).toBeUndefined();
    a.add(5, 2, APPLIED_REQUESTS_KEPT_MS + 2, null); // router 5's table comes back after it was emptied
    expect(a.find(5, 2)).toBeNull();
  });
});

describe('a slice\'s state written around its items\' kept bytes', () => {
  it('reads back as encodeReplicated of its items, packed the first time and from the kept bytes after, at every msgpack width', () => {
    // encodeReplicatedItems writes each set-effect by hand around the item's packed bytes: tables and slices at each
    // width, keys (byte strings) of 31, 32, 255, 256 and 65,536 bytes of UTF-8 and with chars of 0x80 and above (two
    // bytes each), item sizes at each width, an item too large to keep (packed each time), and with and without the
    // request ids remembered.
    const slice = 0x10001;
    const store = new SliceStore(0, 1);
    store.execute([SliceOp.Assign, 1, [slice, 7]]);
    const keys = ['k', 'a'.repeat(31), 'b'.repeat(32), '\u00ff'.repeat(127) + 'c', 'd'.repeat(256), '\u0080\u0000\u00e9' + 'e'.repeat(0x10000)];
    const pads = [0, 100, 0x100, 0x10000, PACKED_ITEM_CACHE_BYTES_MAX + 1];
    let n = 0;
    for (const table of [1, 0x80, 0x100, 0x10000]) {
      for (const key of keys) {
        const pad = pads[n++ % pads.length];
        const item = { k: key.slice(0, 10), n, x: 'p'.repeat(pad), f: 1.5, b: new Uint8Array([1, 2, n & 0xff]), l: [1, 'two', null], m: { deep: true } };
        store.execute([SliceOp.Put, table, slice, key, item, 200 + pad, null, null]);
      }
    }
    store.execute([SliceOp.Put, 1, 7, 'other', { v: 1 }, 10, null, null]); // another slice's: not in this one's state
    store.takeEffects();
    const effects = [...store.entries(slice)];
    expect(effects).toHaveLength(4 * keys.length);
    const applied: AppliedList = { instances: [R, 9], counters: [4, 0x10000], of: [0, 1], ats: [1_000, 2 ** 40], answers: [null, { a: 1 }] };
    expect(store.keptBytes).toBe(0);
    for (const requests of [applied, null, { ...applied, counters: [] }]) {
      const expected = decodeReplicated(encodeReplicated(effects, requests));
      expect(decodeReplicated(encodeReplicatedItems(store.sliceEffectsText(slice), requests))).toEqual(expected);
      // The items but the one over PACKED_ITEM_CACHE_BYTES_MAX kept their bytes: the second read writes those.
      expect(store.keptBytes).toBeGreaterThan(0);
    }
    expect(decodeReplicated(encodeReplicatedItems(store.sliceEffectsText(99), null))).toEqual({ effects: [], requests: null });
  });
});

describe('the kept bytes a compaction adds', () => {
  it('stop at the worker\'s budget, however many items the slice holds', () => {
    // mayKeep is asked once per slice: below the budget by a byte, a slice of any size kept every item's bytes.
    const budget = 10_000;
    const store = new SliceStore(0, 1, Date.now, { readsPerSecond: 0, writesPerSecond: 0 }, budget);
    store.execute([SliceOp.Assign, 1, [5]]);
    for (let i = 0; i < 1_000; i++) store.execute([SliceOp.Put, 1, 5, `k${i}`, { k: `k${i}`, pad: 'p'.repeat(100) }, 130, null, null]);
    store.takeEffects();
    const state = decodeReplicated(encodeReplicatedItems(store.sliceEffectsText(5), null));
    expect(state.effects).toEqual([...store.entries(5)]);
    const itemCost = 200; // an item's text (about 130 bytes) and its string's header, at most
    expect(store.keptBytes).toBeGreaterThan(budget - itemCost);
    expect(store.keptBytes).toBeLessThan(budget + itemCost);
  });
});

describe('the items a follower applies', () => {
  it('keep their bytes up to the worker\'s budget, however many items one record carries', () => {
    const budget = 10_000;
    const store = new SliceStore(0, 1, Date.now, { readsPerSecond: 0, writesPerSecond: 0 }, budget);
    const effects = Array.from({ length: 1_000 }, (_, i): Effect => [EFFECT_SET, 1, 5, `k${i}`, { k: `k${i}`, pad: 'p'.repeat(100) }, 130]);
    const texts = store.mayKeep() ? itemTextsOf(encodeReplicated(effects, null), effects) : null;
    expect(texts).not.toBeNull();
    effects.forEach((e, i) => store.replay(e, texts![i]));
    const itemCost = 200; // an item's text (about 130 bytes) and its string's header, at most
    expect(store.keptBytes).toBeGreaterThan(budget - itemCost);
    expect(store.keptBytes).toBeLessThan(budget + itemCost);
  });

  it('keep the bytes their record carried them in: each a set\'s item as packClientItem packs it, which the next snapshot state writes as they are', () => {
    const big = { k: 'big', x: 'y'.repeat(PACKED_ITEM_CACHE_BYTES_MAX + 1) };
    const effects: Effect[] = [
      [EFFECT_SET, 1, 5, 'a', { v: 1, s: 'x'.repeat(300), b: new Uint8Array([1, 2]), l: [1, { m: null }] }, 320],
      [EFFECT_DELETE, 1, 5, 'gone'],
      ...Array.from({ length: 20 }, (_, i): Effect => [EFFECT_SET, 0x100, 5, `k\u00e9${i}`, { i, f: i / 3 }, 30]),
      [EFFECT_SET, 1, 5, 'big', big, PACKED_ITEM_CACHE_BYTES_MAX + 20],
    ];
    const applied: AppliedList = { instances: [R], counters: [4], of: null, ats: 1_000, answers: null };
    for (const requests of [applied, null]) {
      const payload = encodeReplicated(effects, requests);
      const texts = itemTextsOf(payload, effects)!;
      // The big item's bytes are never kept, so not copied out.
      expect(texts.map((t) => (t === null ? null : Buffer.from(t, 'latin1')))).toEqual(effects.map((e) => (e[0] === EFFECT_SET && e[5] <= PACKED_ITEM_CACHE_BYTES_MAX ? Buffer.from(packClientItem(e[4])) : null)));
      expect(itemTextsOf(payload, [...effects, effects[1]])).toBeNull(); // not the list its effects were decoded from
      // Applied with them, the slice's state reads back as its items.
      const store = new SliceStore(0, 1);
      effects.forEach((e, i) => store.replay(e, texts[i]));
      expect(store.keptBytes).toBeGreaterThan(0);
      expect(decodeReplicated(encodeReplicatedItems(store.sliceEffectsText(5), null))).toEqual({ effects: [...store.entries(5)], requests: null });
      expect(store.entries(5).next().value).toEqual([EFFECT_SET, 1, 5, 'a', effects[0][4], 320]);
    }
    expect(itemTextsOf(Uint8Array.of(0xc1), [])).toBeNull();
    const withExt = [[EFFECT_SET, 1, 5, 'e', { x: new Date(0) }, 10]] as unknown as Effect[];
    expect(itemTextsOf(encodeReplicated(withExt, null), withExt)).toBeNull(); // an ext value
  });
});

describe('a record a follower applies without decoding its items', () => {
  // readPackedReplicated and SliceStore.replayPacked: each item held as its record's bytes, decoded at its first read.
  const items = (n: number): Effect[] => [
    [EFFECT_SET, 1, 5, 'a', { v: 1, s: 'x'.repeat(300), b: new Uint8Array([1, 2]), l: [1, 2.5, 'z'], t: true, z: null }, 320],
    // Keys are byte strings (key encoding): beyond ASCII, two bytes of UTF-8 each (read without msgpackr).
    [EFFECT_SET, 0x100, 5, 'k\u00e9\u0000', { k: 'caf\u00e9\u{1f600}' }, 30],
    [EFFECT_SET, 2, 5, '\u00ff\u0080\u007f', { i: -7, big: 2 ** 40 }, 30],
    // A string sharding key and a number sorting key, as a router makes them (the number's bytes past ASCII).
    [EFFECT_SET, 2, 5, encodeKeyPart('string', 'device') + encodeKeyPart('number', -12.5), { n: 1 }, 30],
    ...Array.from({ length: n }, (_, i): Effect => [EFFECT_SET, 1, 5, `k${i}`, { i, f: i / 3 }, 30]),
  ];
  const requestLists: (AppliedList | null)[] = [
    null,
    { instances: [R], counters: [4], of: null, ats: 1_000, answers: null },
    // Read by their headers (answers null), with numbers past 32 bits (a float 64) and a time not whole.
    { instances: [R, 9], counters: [4, 2 ** 40], of: [1, 0], ats: [1_000.5, 2 ** 41], answers: null },
    // Answers: read by msgpackr.
    { instances: [R, 9], counters: [4, 4], of: [0, 1], ats: [1_000, 1_001], answers: [{ old: 'item' }, true] },
  ];
  const applyPacked = (store: SliceStore, payload: Uint8Array, slice = 5) =>
    readPackedReplicated(payload, slice, (table, key, size, text) => store.replayPacked(table, slice, key, size, text));

  it('reads each item as decodeReplicated does, holds it as its bytes until read, and writes those bytes as they are', () => {
    for (const requests of requestLists) {
      const effects = items(20);
      const payload = encodeReplicated(effects, requests);
      const store = new SliceStore(0, 1);
      store.execute([SliceOp.Assign, 1, [5]]); // for the Get below (a follower reads its replica by ReplicaGet)
      expect(applyPacked(store, payload)).toEqual(requests);
      const decoded = new SliceStore(0, 1);
      for (const e of decodeReplicated(payload).effects) decoded.replay(e);
      expect(store.itemCount).toBe(effects.length);
      expect(store.keptBytes).toBeGreaterThan(0);
      // The next snapshot state, written from the kept bytes alone, reads back as the items.
      expect(decodeReplicated(encodeReplicatedItems(store.sliceEffectsText(5), null))).toEqual({ effects: [...decoded.entries(5)], requests: null });
      // And each item, decoded at its read, is the item its record carried.
      expect([...store.entries(5)]).toEqual([...decoded.entries(5)]);
      const got = store.execute([SliceOp.Get, 1, 5, 'a', null, false] as unknown as SliceOpMessage);
      expect(got).toEqual([0, effects[0][4]]);
    }
  });

  it('answers undefined, handing over nothing, for a record not of plain set-effects on its slice', () => {
    const others: Effect[][] = [
      [...items(2), [EFFECT_DELETE, 1, 5, 'gone']], // a delete after sets: nothing of the sets applied either
      [[EFFECT_SET, 1, 5, 'm', { nested: { map: 1 } }, 20]], // a nested map (a set's or a decimal's tag looks so)
      [[EFFECT_SET, 1, 5, 'e', { x: new Date(0) }, 10]] as unknown as Effect[], // an ext value
    ];
    for (const effects of others) {
      for (const requests of requestLists) {
        const store = new SliceStore(0, 1);
        expect(applyPacked(store, encodeReplicated(effects, requests))).toBeUndefined();
        expect(store.itemCount).toBe(0);
      }
    }
    const store = new SliceStore(0, 1);
    expect(applyPacked(store, encodeReplicated(items(2), null), 6)).toBeUndefined(); // another slice's
    expect(applyPacked(store, Uint8Array.of(0xc1))).toBeUndefined();
    expect(applyPacked(store, Uint8Array.of(0x97, 0x00, 0x90, 0x91, 0x01))).toBeUndefined(); // ids cut short
    expect(store.itemCount).toBe(0);
  });

  it('reads a key as msgpackr does over seeded random byte strings, and leaves any other UTF-8 to the whole decode', () => {
    // keyOf reads a key that setEffectsEnd took (encodedKeyEnd: ASCII, or 0xc2/0xc3 then a continuation byte) by
    // Buffer's UTF-8 decoder. Two kinds of keys: random byte strings (char codes 0 to 255, as the store makes them),
    // read here exactly as msgpackr reads them; and random bytes in the body of a key (overlong forms, surrogates,
    // 3- and 4-byte sequences, lone continuation bytes, a sequence cut at the end), which this read must leave
    // (undefined: the caller decodes and checks the record whole), unless they are a byte string's UTF-8.
    const r = rng(20261127);
    const byte = () => (r() < 0.5 ? Math.floor(r() * 0x80) : 0x80 + Math.floor(r() * 0x80));
    const decodeKey = (payload: Uint8Array) => (decodeReplicated(payload).effects[0] as Effect & { 3: string })[3];
    const packedKey = (payload: Uint8Array) => {
      const keys: string[] = [];
      const answer = readPackedReplicated(payload, 5, (_table, key) => keys.push(key));
      return answer === undefined ? undefined : keys[0];
    };
    let fast = 0;
    let left = 0;
    for (let n = 0; n < 4_000; n++) {
      const length = Math.floor(r() * (r() < 0.1 ? 300 : 24));
      const key = String.fromCharCode(...Array.from({ length }, byte));
      const payload = encodeReplicated([[EFFECT_SET, 1, 5, key, { n }, 20]], null);
      expect(packedKey(payload), JSON.stringify(key)).toBe(decodeKey(payload));
      expect(decodeKey(payload)).toBe(key);
      // The same record with its key's body (header kept) replaced by random bytes.
      const bodyLength = Math.floor(r() * 12);
      const at = encodeReplicated([[EFFECT_SET, 1, 5, 'x'.repeat(bodyLength), { n }, 20]], null);
      const from = Buffer.from(at).indexOf('x'.repeat(bodyLength), 0, 'latin1'); // the key's body: the item follows it
      const bytes = Array.from({ length: bodyLength }, () =>
        r() < 0.4 ? [0x80, 0xbf, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff][Math.floor(r() * 15)] : byte(),
      );
      if (bodyLength > 0) at.set(bytes, from);
      const got = packedKey(at);
      const valid = Buffer.from(Buffer.from(bytes).toString('utf8'), 'utf8').equals(Buffer.from(bytes));
      const byteString = valid && /^[\x00-\xff]*$/.test(Buffer.from(bytes).toString('utf8'));
      if (got === undefined) left++;
      else {
        fast++;
        expect(byteString, `bytes ${Buffer.from(bytes).toString('hex')} read without msgpackr`).toBe(true);
        expect(got).toBe(decodeKey(at));
      }
      if (byteString) expect(got, `bytes ${Buffer.from(bytes).toString('hex')} left to the whole decode`).toBe(decodeKey(at));
    }
    expect(fast).toBeGreaterThan(100);
    expect(left).toBeGreaterThan(100);
  });

  it('decodes the items at once over the worker\'s budget, and keeps none of their bytes', () => {
    const store = new SliceStore(0, 1, Date.now, { readsPerSecond: 0, writesPerSecond: 0 }, 0);
    const payload = encodeReplicated(items(5), null);
    expect(applyPacked(store, payload)).toBeNull();
    expect(store.keptBytes).toBe(0);
    const decoded = new SliceStore(0, 1);
    for (const e of decodeReplicated(payload).effects) decoded.replay(e);
    expect([...store.entries(5)]).toEqual([...decoded.entries(5)]);
  });
});

describe('a follower promoted while its items are still held as their bytes', () => {
  // Two followers apply the same committed records: one as before this path (each payload decoded whole, replay with
  // its items' bytes), one as a worker does now (readPackedReplicated: items held as their bytes). Then each is
  // promoted (the slice assigned to its worker) and serves the same reads and conditional writes, which read the old
  // items: every answer, binary values as Uint8Arrays in both, and what each holds after must be the same.
  const now = () => 1_700_000_000_000;
  const bin = (...b: number[]) => new Uint8Array(b);
  const records = (): Uint8Array[] => [
    encodeReplicated(
      [
        ...Array.from({ length: 12 }, (_, i): Effect => [
          EFFECT_SET, 1, 5, `k${String(i).padStart(2, '0')}`,
          { k: `k${i}`, n: i, b: bin(i, 255), l: [i, '\u00e9', bin(1)], s: 'x'.repeat(i * 7), t: i % 2 === 0, z: null, __mtime: 1 }, 60,
        ]),
        [EFFECT_SET, 1, 5, 'k\u00e9\u00ff', { k: '\u00e9\u{1f600}', n: 100, b: bin(), __mtime: 1 }, 30],
        [EFFECT_SET, 2, 5, 'other', { n: -1.5, __mtime: 1 }, 20],
      ],
      { instances: [R], counters: [4], of: null, ats: 1_000, answers: null },
    ),
    // Overwritten while held as bytes, by a record of the same layout and by one that is not (a delete: decoded).
    encodeReplicated([[EFFECT_SET, 1, 5, 'k00', { k: 'k00', n: 50, b: bin(7), __mtime: 2 }, 30]], { instances: [R], counters: [5], of: null, ats: 1_001, answers: null }),
    encodeReplicated([[EFFECT_SET, 1, 5, 'k01', { k: 'k01', n: 51, __mtime: 2 }, 30], [EFFECT_DELETE, 1, 5, 'k02']], null),
  ];
  /** A value with each byte array's kind named: toEqual alone does not tell a Buffer from a Uint8Array. */
  const tagged = (v: unknown): unknown => {
    if (v instanceof Uint8Array) return { kind: v.constructor.name, bytes: [...v] };
    if (Array.isArray(v)) return v.map(tagged);
    if (v instanceof Error) return { error: v.message, details: tagged((v as { details?: unknown }).details) };
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, tagged(x)]));
    return v;
  };
  const check = (condition: unknown, returnOld: boolean, oldOnFailure = false) => ({ condition, returnOld, oldOnFailure });
  const update = (key: string, actions: unknown[], condition: unknown, returnValues: string) =>
    [SliceOp.Update, 1, 5, key, { base: { k: key }, actions, condition, oldOnFailure: true, returnValues }, null];
  const range = (packed: boolean, filter: unknown, projection: unknown = null) =>
    [SliceOp.Range, 1, 5, { low: '', lowInclusive: true, high: '\u00ff\u00ff\u00ff', highInclusive: true, reverse: false, limit: 100, projection, filter, withKeys: true, packed }];
  const ops: unknown[][] = [
    [SliceOp.Get, 1, 5, 'k03', null, false],
    [SliceOp.Get, 1, 5, 'k04', null, true],
    [SliceOp.Get, 1, 5, 'k\u00e9\u00ff', [['b'], ['l', 1]], false],
    [SliceOp.Get, 1, 5, 'k05', [['l', 2]], true],
    [SliceOp.Get, 1, 5, 'k02', null, false],
    range(false, { k: 'type', a: { k: 'path', path: ['b'] }, type: 'B' }),
    range(true, null),
    range(false, { k: 'cmp', op: '>', a: { k: 'path', path: ['n'] }, b: { k: 'value', v: 6 } }, [['b'], ['s']]),
    [SliceOp.Scan, 1, 0, null, 100, null, { k: 'contains', a: { k: 'path', path: ['l'] }, b: { k: 'value', v: '\u00e9' } }, sliceSetOf(0, [5]), false],
    [SliceOp.Scan, 2, 0, null, 100, null, null, sliceSetOf(0, [5]), true],
    [SliceOp.Put, 1, 5, 'k06', { k: 'k06', n: 0 }, 20, check({ k: 'cmp', op: '=', a: { k: 'path', path: ['b'] }, b: { k: 'value', v: bin(6, 255) } }, true), null],
    [SliceOp.Put, 1, 5, 'k07', { k: 'k07', n: 0 }, 20, check({ k: 'notExists', path: ['n'] }, false, true), null],
    [SliceOp.Delete, 1, 5, 'k08', check({ k: 'exists', path: ['l'] }, true), null],
    [SliceOp.Delete, 1, 5, 'k09', check({ k: 'cmp', op: '<', a: { k: 'path', path: ['n'] }, b: { k: 'value', v: 0 } }, false, true), null],
    update('k10', [{ k: 'add', path: ['n'], n: 5 }, { k: 'set', path: ['b'], value: { k: 'value', v: bin(9) } }], { k: 'type', a: { k: 'path', path: ['b'] }, type: 'B' }, 'old'),
    update('k11', [{ k: 'set', path: ['l'], value: { k: 'listAppend', a: { k: 'path', path: ['l'] }, b: { k: 'value', v: [bin(2)] } } }], null, 'new'),
    update('k00', [{ k: 'remove', path: ['b'] }], { k: 'beginsWith', a: { k: 'path', path: ['s'] }, b: { k: 'value', v: 'x' } }, 'old'),
    update('k\u00e9\u00ff', [{ k: 'add', path: ['n'], n: 1 }], { k: 'cmp', op: '=', a: { k: 'path', path: ['k'] }, b: { k: 'value', v: '\u00e9\u{1f600}' } }, 'new'),
  ];

  it('answers every read and conditional write as the follower that decoded its records did, and holds the same after', () => {
    const asBefore = new SliceStore(0, 1, now);
    const asNow = new SliceStore(0, 1, now);
    // The third (a delete) is decoded whole.
    expect(records().map((payload) => readPackedReplicated(payload, 5, () => {}) !== undefined)).toEqual([true, true, false]);
    for (const payload of records()) {
      const { effects, requests } = decodeReplicated(payload);
      const texts = itemTextsOf(payload, effects);
      for (let i = 0; i < effects.length; i++) asBefore.replay(effects[i], texts?.[i] ?? null);
      expect(asNow.applyRecord(5, payload)).toEqual(requests);
    }
    expect(asNow.keptBytes).toBe(asBefore.keptBytes);
    for (const store of [asBefore, asNow]) store.execute([SliceOp.Assign, 1, [5]]);
    for (const op of ops) {
      const before = asBefore.execute(op as unknown as SliceOpMessage);
      const got = asNow.execute(op as unknown as SliceOpMessage);
      expect(tagged(got), JSON.stringify(op[0])).toEqual(tagged(before));
    }
    expect(tagged([...asNow.entries(5)])).toEqual(tagged([...asBefore.entries(5)]));
    const state = (store: SliceStore) => decodeReplicated(encodeReplicatedItems(store.sliceEffectsText(5), null)).effects;
    expect(tagged(state(asNow))).toEqual(tagged(state(asBefore)));
    expect(asNow.keptBytes).toBe(asBefore.keptBytes);
    // What the writes gave the worker's log, and a snapshot of the worker.
    expect(tagged(asNow.takeEffects())).toEqual(tagged(asBefore.takeEffects()));
    const view = (store: SliceStore) => {
      const v = store.snapshotView();
      const effects: Effect[] = [];
      for (let chunk = v.nextChunk(); chunk.payload !== null || !chunk.exhausted; chunk = v.nextChunk()) if (chunk.payload !== null) effects.push(...decodeEffects(chunk.payload));
      expect(effects.length).toBe(v.items);
      return effects;
    };
    expect(tagged(view(asNow))).toEqual(tagged(view(asBefore)));
    // A move of the slice: its copy, and a record applied while it moves (recorded as a change the target takes).
    const during = encodeReplicated([[EFFECT_SET, 1, 5, 'k04', { k: 'k04', b: bin(4, 4), __mtime: 3 }, 30]], null);
    for (const store of [asBefore, asNow]) store.execute([SliceOp.MoveStart, 5]);
    asBefore.replay(decodeReplicated(during).effects[0], itemTextsOf(during, decodeReplicated(during).effects)![0]);
    expect(asNow.applyRecord(5, during)).toBeNull();
    const [moved, movedBefore] = [asNow, asBefore].map((store) => store.execute([SliceOp.MoveRead, 5, null, 1_000])[1] as MoveReadResult);
    expect(tagged(decodeEffects(moved[2]))).toEqual(tagged(decodeEffects(movedBefore[2])));
    expect([moved[0], moved[1]]).toEqual([1, asNow.itemCount]);
  });
});

describe('the bytes a follower keeps of the records it applies', () => {
  it('stay within the worker\'s budget, are given back when their items are overwritten, deleted or forgotten, and are kept again after', () => {
    const budget = 4_000;
    const store = new SliceStore(0, 1, Date.now, { readsPerSecond: 0, writesPerSecond: 0 }, budget);
    const key = (i: number) => `k${String(i).padStart(4, '0')}`; // every item as long
    // Items from..from + n - 1: one record may carry many, and the budget is looked at per item.
    const record = (slice: number, from: number, v = 0, n = 1) =>
      encodeReplicated(Array.from({ length: n }, (_, j): Effect => [EFFECT_SET, 1, slice, key(from + j), { k: key(from + j), v, s: 'y'.repeat(60) }, 80]), null);
    const oneCost = (() => {
      const probe = new SliceStore(0, 1);
      probe.applyRecord(5, record(5, 0));
      return probe.keptBytes;
    })();
    expect(oneCost).toBeGreaterThan(60);
    // Past the budget, items are decoded at once; what is held is the same either way.
    for (let i = 0; i < 208; i += 16) store.applyRecord(5, record(5, i, 0, 16));
    const full = store.keptBytes;
    expect(full).toBeGreaterThan(budget - oneCost);
    expect(full).toBeLessThanOrEqual(budget + oneCost);
    const expected = new SliceStore(0, 1);
    for (let i = 0; i < 208; i += 16) for (const e of decodeReplicated(record(5, i, 0, 16)).effects) expected.replay(e);
    expect([...store.entries(5)]).toEqual([...expected.entries(5)]);
    // Overwritten by a record kept as its bytes or not, each kept item gives its bytes back.
    for (let i = 0; i < 10; i++) store.applyRecord(5, record(5, i, 1));
    expect(store.keptBytes).toBeLessThanOrEqual(full);
    // Deleted (a record decoded whole): their bytes are given back.
    const kept = store.keptBytes;
    store.applyRecord(5, encodeReplicated(Array.from({ length: 20 }, (_, i): Effect => [EFFECT_DELETE, 1, 5, key(i)]), null));
    expect(store.keptBytes).toBeLessThanOrEqual(kept - 10 * oneCost);
    // The slice leaves the worker: all of them, and later records keep theirs again (once the sum is taken again).
    store.forgetSlice(5);
    expect(store.keptBytes).toBe(0);
    for (let i = 0; i < 1_100; i++) store.applyRecord(6, record(6, i % 30));
    expect(store.keptBytes).toBe(30 * oneCost);
  });
});

describe('an item\'s kept bytes and its writes', () => {
  // A snapshot state is written from the items' kept bytes (sliceEffectsText): a kept form left behind by a write
  // would put the old item into the state, and a restart from it would lose the write. Each write here follows a
  // snapshot state that kept every item's bytes; the next state must read back as the items now are.
  const stateOf = (store: SliceStore, slice: number) => decodeReplicated(encodeReplicatedItems(store.sliceEffectsText(slice), null)).effects;
  const update = (key: string, actions: unknown[], condition: unknown = null): SliceOpMessage =>
    [SliceOp.Update, 1, 5, key, { base: { k: key }, actions, condition, oldOnFailure: false, returnValues: 'none' }, null] as unknown as SliceOpMessage;

  it('on a leader: Put, a conditional Put, Update (nested, sets, binary, decimals, removed to empty), Delete', () => {
    const store = new SliceStore(0, 1);
    store.execute([SliceOp.Assign, 1, [5]]);
    const put = (key: string, item: Record<string, unknown>, check: unknown = null) => store.execute([SliceOp.Put, 1, 5, key, item, 100, check, null] as unknown as SliceOpMessage);
    put('a', { k: 'a', n: 1, m: { deep: { x: 1 } }, s: { SS: ['p', 'q'] }, b: new Uint8Array([1]), d: { $N: '1.5' } });
    put('b', { k: 'b', n: 1 });
    put('c', { k: 'c', v: 'x' });
    put('d', { k: 'd', v: 'y' });
    const steps: (() => unknown)[] = [
      () => store.execute(update('a', [{ k: 'add', path: ['n'], n: 2 }])),
      () => store.execute(update('a', [{ k: 'set', path: ['m', 'deep', 'x'], value: { k: 'value', v: 7 } }])),
      () => store.execute(update('a', [{ k: 'set', path: ['b'], value: { k: 'value', v: new Uint8Array([9, 9]) } }])),
      () => store.execute(update('a', [{ k: 'remove', path: ['m'] }, { k: 'remove', path: ['s'] }, { k: 'remove', path: ['d'] }])),
      () => put('b', { k: 'b', n: 2 }),
      () => put('c', { k: 'c', v: 'z' }, { condition: { k: 'exists', path: ['v'] }, returnOld: false, oldOnFailure: false }),
      () => store.execute([SliceOp.Delete, 1, 5, 'd', null, null] as unknown as SliceOpMessage),
    ];
    for (const step of steps) {
      stateOf(store, 5); // every item keeps its bytes
      expect(store.keptBytes).toBeGreaterThan(0);
      step();
      store.takeEffects();
      expect(stateOf(store, 5)).toEqual([...store.entries(5)]);
    }
    expect(store.entries(5).next().value[4]).toMatchObject({ k: 'a', n: 3, b: new Uint8Array([9, 9]) });
  });

  it('on a follower: an item applied with its bytes, then written again with and without them, then deleted', () => {
    const store = new SliceStore(0, 1);
    const apply = (effects: Effect[], keep: boolean) => {
      const texts = keep ? itemTextsOf(encodeReplicated(effects, null), effects) : null;
      effects.forEach((e, i) => store.replay(e, texts?.[i] ?? null));
    };
    apply([[EFFECT_SET, 1, 5, 'a', { k: 'a', n: 1 }, 20], [EFFECT_SET, 1, 5, 'b', { k: 'b', n: 1 }, 20]], true);
    const kept = store.keptBytes;
    expect(kept).toBeGreaterThan(0);
    apply([[EFFECT_SET, 1, 5, 'a', { k: 'a', n: 2 }, 20]], false); // over the budget: no bytes kept for it
    expect(store.keptBytes).toBeLessThan(kept);
    expect(stateOf(store, 5)).toEqual([...store.entries(5)]);
    apply([[EFFECT_SET, 1, 5, 'b', { k: 'b', n: 3 }, 20]], true);
    expect(stateOf(store, 5)).toEqual([...store.entries(5)]);
    apply([[EFFECT_DELETE, 1, 5, 'a']], true);
    expect(stateOf(store, 5)).toEqual([[EFFECT_SET, 1, 5, 'b', { k: 'b', n: 3 }, 20]]);
  });
});

describe('a replicated record read back', () => {
  it('keeps its writes and their ids, and reads a record of node protocol 12 or 13 (string ids) as its effects alone', () => {
    const effects: Effect[] = [[EFFECT_SET, 1, 2, 'k', { v: 1 }, 10]];
    const applied: AppliedList = { instances: [R, 9], counters: [4, 4], of: [0, 1], ats: 1_000, answers: null };
    expect(decodeReplicated(encodeReplicated(effects, applied))).toEqual({ effects, requests: applied });
    expect(decodeReplicated(encodeReplicated(effects, null))).toEqual({ effects, requests: null });
    const old = new Packr({ useRecords: false }).pack({ effects, requests: { ids: ['0123456789abcdef.1'], ats: 1_000, answers: null } });
    expect(decodeReplicated(old)).toEqual({ effects, requests: null });
  });

  it('reads back each of a task\'s records encoded together, in one buffer of their own that a later task leaves as it was', () => {
    const applied: AppliedList = { instances: [R], counters: [7], of: null, ats: 1_000, answers: [true] };
    const task = (v: number): [Effect[], AppliedList | null][] => [
      [[[EFFECT_SET, 1, 2, 'k', { v, pad: 'x'.repeat(100) }, 120]], null],
      [[[EFFECT_SET, 1, 3, 'k', { v: v + 1 }, 10]], applied],
      [[], null],
    ];
    const payloads = encodeReplicatedEach(task(1));
    const expected = task(1).map(([effects, requests]) => ({ effects, requests }));
    expect(payloads.map(decodeReplicated)).toEqual(expected);
    // One buffer, exactly their bytes: no encoder's reused buffer kept alive by a record a replica keeps.
    expect(payloads.every((p) => p.buffer === payloads[0].buffer)).toBe(true);
    expect(payloads[0].buffer.byteLength).toBe(payloads.reduce((n, p) => n + p.byteLength, 0));
    // The next task (encoded through the same scratch buffer) changes nothing of these.
    encodeReplicatedEach(task(50));
    expect(payloads.map(decodeReplicated)).toEqual(expected);
    expect(encodeReplicatedEach([]).length).toBe(0);
  });
});
