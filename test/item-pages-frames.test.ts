// KeysliceClient.forEachItemPage where a real router cannot be made to act on cue (test/fake-router.ts answers the
// client protocol as a router does): the page whose callback throws shares its answer frame with other requests'
// answers; a callback that throws a router's WrongOwner is not taken for the router's refusal; a page answered after
// its request timed out, and a connection lost mid-range, end the call without calling back again. Through a real
// cluster: item-pages.test.ts.
import { afterEach, describe, expect, it } from 'vitest';
import { KeysliceClient } from '../coordinator/client/client.js';
import { KeysliceError } from '../shared/errors.js';
import { encodeClientFrame, RESULT_ERROR, RESULT_OK, type ClientRequestFrame, type ClientResponseFrame } from '../shared/protocol.js';
import { fakeRouter, type FakeRouter } from './fake-router.js';

const routers: FakeRouter[] = [];
const clients: KeysliceClient[] = [];
const timers: NodeJS.Timeout[] = [];

afterEach(async () => {
  for (const t of timers.splice(0)) clearTimeout(t);
  for (const c of clients.splice(0)) await c.close();
  for (const r of routers.splice(0)) await r.close();
});

async function router(answer: Parameters<typeof fakeRouter>[0]): Promise<FakeRouter> {
  const r = await fakeRouter(answer);
  routers.push(r);
  return r;
}

async function connect(urls: string[], requestTimeoutMs = 5_000): Promise<KeysliceClient> {
  const c = await KeysliceClient.connect(urls, { requestTimeoutMs });
  clients.push(c);
  return c;
}

/** A GetItems page of one item: `marker` to go on from, or none (the end). */
const page = (id: number, marker?: string): ClientResponseFrame => [id, RESULT_OK, { items: [{ k: 'x' }], examined: 1, ...(marker === undefined ? {} : { marker }) }];
const markerOf = (request: ClientRequestFrame) => request[2].marker;
const getItemsAsked = (...rs: FakeRouter[]) => rs.flatMap((r) => r.requests).filter((q) => q[1] === 'GetItems').length;

describe('forEachItemPage against a router on cue', () => {
  it('a page whose callback throws, answered in one frame with others before them: the call rejects, the others are answered', async () => {
    const r = await router((q) => (q[1] === 'GetItems' ? page(q[0], 'more') : [q[0], RESULT_OK, { item: { k: 'y' } }]));
    const c = await connect([r.url]);
    const boom = new Error('the callback throws');
    let calls = 0;
    // Made in one turn: one frame out, answered in one frame in the same order, the throwing page first.
    const failing = c.forEachItemPage({ table: 't' }, () => {
      calls++;
      throw boom;
    });
    const others = Promise.all([c.getItem('t', { k: 'y' }), c.getItem('t', { k: 'z' })]);
    await expect(failing).rejects.toBe(boom);
    expect(await others).toEqual([{ k: 'y' }, { k: 'y' }]);
    expect(r.frameSizes[0]).toBe(3);
    // No further page was asked.
    expect(await c.getItem('t', { k: 'w' })).toEqual({ k: 'y' });
    expect(calls).toBe(1);
    expect(getItemsAsked(r)).toBe(1);
  });

  it("a callback that throws a router's WrongOwner fails its own call once: not sent to the other router, not called again", async () => {
    const answer = (q: ClientRequestFrame): ClientResponseFrame =>
      q[1] === 'GetItems' ? page(q[0], 'more') : [q[0], RESULT_ERROR, 'WrongOwner', 'slice 3: refused WrongOwner 40 times in 5000 ms; retry later'];
    const both = [await router(answer), await router(answer)];
    const c = await connect(both.map((r) => r.url));
    // A router's refusal, after the client asked each router once.
    const refusal = await c.getItem('t', { k: 'y' }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(refusal).toBeInstanceOf(KeysliceError);
    expect((refusal as KeysliceError).code).toBe('WrongOwner');
    let calls = 0;
    const failing = c.forEachItemPage({ table: 't' }, () => {
      calls++;
      throw refusal;
    });
    await expect(failing).rejects.toBe(refusal);
    expect(calls).toBe(1);
    expect(getItemsAsked(...both)).toBe(1);
  });

  it('a page answered after its request timed out: the call rejects Unavailable, the late page reaches no callback', async () => {
    const timeoutMs = 300;
    let lateSent = false;
    const r = await router((q, ws) => {
      if (markerOf(q) !== 'late') return page(q[0], q[2].table === 'slow' ? 'late' : undefined);
      timers.push(
        setTimeout(() => {
          ws.send(encodeClientFrame([page(q[0])]));
          lateSent = true;
        }, timeoutMs * 2),
      );
      return null;
    });
    const c = await connect([r.url], timeoutMs);
    const indexes: number[] = [];
    const err = await c.forEachItemPage({ table: 'slow' }, (_page, index) => void indexes.push(index)).then(
      () => null,
      (e: unknown) => e,
    );
    expect((err as KeysliceError).code).toBe('Unavailable');
    expect((err as KeysliceError).message).toMatch(/no answer within 300 ms/);
    await expect.poll(() => lateSent, { timeout: timeoutMs * 10 }).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(indexes).toEqual([0]);
    // The client goes on serving on the same connection.
    expect(await c.forEachItemPage({ table: 'fast' }, () => {})).toEqual({ items: 1, pages: 1, examined: 1 });
  });

  it('a connection lost mid-range: the call rejects Unavailable, no further callback, no page asked again', async () => {
    const r = await router((q, ws) => {
      if (markerOf(q) !== 'second') return page(q[0], 'second');
      ws.terminate();
      return null;
    });
    const c = await connect([r.url]);
    const indexes: number[] = [];
    const err = await c.forEachItemPage({ table: 't' }, (_page, index) => void indexes.push(index)).then(
      () => null,
      (e: unknown) => e,
    );
    expect((err as KeysliceError).code).toBe('Unavailable');
    expect((err as KeysliceError).message).toMatch(/closed/);
    expect(indexes).toEqual([0]);
    expect(getItemsAsked(r)).toBe(2);
  });
});
