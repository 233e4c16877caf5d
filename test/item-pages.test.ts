// KeysliceClient.forEachItemPage through a real cluster: it hands the same pages that a loop of getItems over the
// markers reads, in order, each item once; it stops at maxPages with the marker to go on from; a callback that throws
// fails its own call only, and the client goes on serving.
import { beforeAll, describe, expect, it } from 'vitest';
import type { Request, Response } from '../shared/api.js';
import type { Item } from '../shared/values.js';
import { expectError, plain, useCluster } from './cluster-fixture.js';

const c = useCluster();
const T = 'item_pages';
const DEVICES = ['a', 'b', 'c'];
const PER_DEVICE = 120;

/** The pages of a GetItems as getItems reads them, following the markers by hand: the reference. */
async function pagesByGetItems(request: Request<'GetItems'>, maxPages = 1000): Promise<Response<'GetItems'>[]> {
  const pages: Response<'GetItems'>[] = [];
  let marker = request.marker;
  do {
    const page = await c.client.getItems(marker === undefined ? request : { ...request, marker });
    pages.push(page);
    marker = page.marker;
  } while (marker !== undefined && pages.length < maxPages);
  return pages;
}

/** forEachItemPage's pages, each kept with the index it came with. */
async function pagesByCallback(request: Request<'GetItems'>, maxPages?: number) {
  const pages: Response<'GetItems'>[] = [];
  const indexes: number[] = [];
  const read = await c.client.forEachItemPage(
    request,
    (page, index) => {
      pages.push(page);
      indexes.push(index);
    },
    maxPages === undefined ? {} : { maxPages },
  );
  return { pages, indexes, read };
}

const seqs = (items: Item[]) => items.map((i) => i.seq as number);
const names = (pages: Response<'GetItems'>[]) => pages.flatMap((p) => p.items.map((i) => String(i.__name)));

beforeAll(async () => {
  await c.client.createTable(T, { name: 'device', type: 'string' }, { name: 'seq', type: 'number' });
  for (const device of DEVICES) {
    const items = Array.from({ length: PER_DEVICE }, (_, seq) => ({ device, seq, v: `${device}-${seq}` }));
    for (let i = 0; i < items.length; i += 25) expect(await c.client.batchWrite(T, { puts: items.slice(i, i + 25) })).toEqual([]);
  }
});

describe('forEachItemPage', () => {
  it('hands a range page by page in order, each item once across the markers, as getItems pages it', async () => {
    for (const reverse of [false, true]) {
      const request = { table: T, shardingKey: 'b', sortingKey: { between: [10, 109] as [number, number] }, limit: 17, reverse };
      const { pages, indexes, read } = await pagesByCallback(request);
      const expected = Array.from({ length: 100 }, (_, i) => 10 + i);
      if (reverse) expected.reverse();
      expect(seqs(pages.flatMap((p) => p.items))).toEqual(expected);
      expect(indexes).toEqual(pages.map((_, i) => i));
      expect(pages.slice(0, -1).every((p) => p.items.length === 17 && typeof p.marker === 'string')).toBe(true);
      expect(pages.at(-1)!.marker).toBeUndefined();
      expect(read).toEqual({ items: 100, pages: pages.length, examined: pages.reduce((n, p) => n + p.examined, 0) });
      // The same pages, markers and all, as getItems answers them.
      expect(plain(pages)).toEqual(plain(await pagesByGetItems(request)));
    }
  });

  it('hands a full-table scan with every item once, as getItems pages it', async () => {
    const request = { table: T, limit: 50 };
    const { pages, read } = await pagesByCallback(request);
    const got = names(pages);
    expect(got).toHaveLength(DEVICES.length * PER_DEVICE);
    expect(new Set(got).size).toBe(got.length);
    expect(read.items).toBe(got.length);
    expect(read.marker).toBeUndefined();
    expect(plain(pages)).toEqual(plain(await pagesByGetItems(request)));
  });

  it('stops after maxPages with the marker to go on from, and goes on from a marker it is given', async () => {
    const request = { table: T, shardingKey: 'c', limit: 25 };
    const reference = await pagesByGetItems(request);
    expect(reference).toHaveLength(5); // 120 items: 4 full pages and one of 20

    // One page: what one getItems reads, the marker included.
    const one = await pagesByCallback(request, 1);
    expect(plain(one.pages)).toEqual(plain(reference.slice(0, 1)));
    expect(one.read).toEqual({ items: 25, pages: 1, examined: reference[0].examined, marker: reference[0].marker });

    const two = await pagesByCallback(request, 2);
    expect(plain(two.pages)).toEqual(plain(reference.slice(0, 2)));
    expect(two.read.marker).toBe(reference[1].marker);
    // From that marker to the end: the rest, once, with indexes from 0 again.
    const rest = await pagesByCallback({ ...request, marker: two.read.marker });
    expect(plain(rest.pages)).toEqual(plain(reference.slice(2)));
    expect(rest.indexes).toEqual([0, 1, 2]);
    expect(rest.read).toMatchObject({ items: 70, pages: 3 });
    expect(rest.read.marker).toBeUndefined();
    expect(seqs([...two.pages, ...rest.pages].flatMap((p) => p.items))).toEqual(Array.from({ length: PER_DEVICE }, (_, i) => i));

    // Exactly maxPages pages to the end: no marker.
    expect((await pagesByCallback(request, 5)).read).toMatchObject({ items: 120, pages: 5 });
    expect((await pagesByCallback(request, 5)).read.marker).toBeUndefined();
    await expectError(c.client.forEachItemPage(request, () => {}, { maxPages: 0 }), 'ValidationError');
    // getAllItems takes the same bound: a fractional or unbounded one is refused too (an older client read
    // ceil(maxPages) pages, or had no bound at all).
    for (const maxPages of [0, 1.5, Infinity]) await expectError(c.client.getAllItems(request, maxPages), 'ValidationError');
  });

  it("fails as getItems does on the router's errors, without calling back", async () => {
    let calls = 0;
    await expectError(c.client.forEachItemPage({ table: 'no_such_table', shardingKey: 'a' }, () => void calls++), 'TableNotFound');
    await expectError(c.client.forEachItemPage({ table: T, shardingKey: 'a', limit: 0 }, () => void calls++), 'ValidationError');
    expect(calls).toBe(0);
  });

  it('rejects with what the callback threw, asks no further page, and the client keeps serving', async () => {
    for (const kind of ['throws', 'rejects'] as const) {
      const boom = new Error(`the callback ${kind}`);
      const seen: number[] = [];
      // Sent in one turn with other requests on the same client, which must be answered whatever the failing call
      // does. (Page 1, the one that throws, is asked a turn later, so a real router may or may not answer it in a
      // frame with others: item-pages-frames.test.ts makes that case on cue.)
      const failing = c.client.forEachItemPage({ table: T, shardingKey: 'a', limit: 10 }, (_page, index) => {
        seen.push(index);
        if (index === 1) {
          if (kind === 'throws') throw boom;
          return Promise.reject(boom);
        }
      });
      const others = Promise.all([
        c.client.getItems({ table: T, shardingKey: 'b', limit: 5 }),
        c.client.getItem(T, { device: 'c', seq: 7 }),
        c.client.forEachItemPage({ table: T, shardingKey: 'c', limit: 40 }, () => {}),
      ]);
      await expect(failing).rejects.toBe(boom);
      expect(seen).toEqual([0, 1]);
      const [page, item, read] = await others;
      expect(seqs(page.items)).toEqual([0, 1, 2, 3, 4]);
      expect(item?.v).toBe('c-7');
      expect(read).toMatchObject({ items: PER_DEVICE, pages: 3 });
      // Nothing more was asked for the failed call, and the same client still reads all of its range.
      await new Promise((r) => setTimeout(r, 50));
      expect(seen).toEqual([0, 1]);
      expect((await c.client.getAllItems({ table: T, shardingKey: 'a', limit: 10 })).length).toBe(PER_DEVICE);
    }
  });
});
