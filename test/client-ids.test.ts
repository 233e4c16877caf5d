// A client's write sent twice is applied once, through real processes (docs/replication.md, "A client's write
// sent twice"): a coordinator and three slice nodes at R=3. A write that carries an idempotency id and is sent
// again (by a user, or by the client itself: ClientOptions.writeRetries) with the same id is applied at most once
// and answers what the first answered: on the same leader, on the next leader after the first was killed, and
// while its leader is frozen, when each copy the client sends is sent on by the router to the next leader. The
// same id with a different request is refused (IdempotentParameterMismatch) and applies nothing.
import { beforeAll, describe, expect, it } from 'vitest';
import { KeysliceClient } from '../coordinator/client/client.js';
import { stopProcess } from '../coordinator/cli/local-cluster.js';
import { KeysliceError } from '../shared/errors.js';
import { initHashing } from '../shared/hashing.js';
import { allLed, expectError, leaderOf, leadsNothing, restartNode, statusUntil, useCluster } from './cluster-fixture.js';
import { parseExposition, samples } from './prometheus-text.js';
import { freezeProcess } from './freeze.js';

const c = useCluster({ nodes: 3, slices: 12, replicationFactor: 3 });
/** One node, R=1: its worker log keeps no ids (docs/replication.md). */
const single = useCluster({ nodes: 1, slices: 4, replicationFactor: 1 });
const T = 'clientids';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const add = (id: string, n: number, idempotencyId: string) => ({ table: T, key: { id }, update: 'ADD n :n', values: { ':n': n }, returnValues: 'new' as const, idempotencyId });


/** The writes of the table answered from a remembered request id, over every node (since each started). */
async function duplicateWrites(): Promise<number> {
  const res = await fetch(`${c.cluster.url}/metrics`, { signal: AbortSignal.timeout(15_000) });
  return samples(parseExposition(await res.text()), 'keyslice_node_duplicate_writes_total')
    .filter((s) => s.labels.table === T)
    .reduce((n, s) => n + s.value, 0);
}

const n = async (id: string) => (await c.http.request('GetItem', { table: T, key: { id } })).item?.n;

beforeAll(async () => {
  await initHashing();
  await c.client.createTable(T, { name: 'id', type: 'string' });
  await allLed(c);
  await single.client.createTable(T, { name: 'id', type: 'string' });
});

describe('a write with an idempotency id (R=3, real processes)', () => {
  it('sent twice, over either transport, is applied once and answers like the first', async () => {
    const first = await c.client.request('UpdateItem', add('twice', 1, 'twice-1'));
    expect(first.item?.n).toBe(1);
    expect(await c.client.request('UpdateItem', add('twice', 1, 'twice-1'))).toEqual(first);
    expect((await c.http.request('UpdateItem', add('twice', 1, 'twice-1'))).item?.n).toBe(1);
    expect(await n('twice')).toBe(1);
    // Another id is another write.
    expect((await c.client.request('UpdateItem', add('twice', 1, 'twice-2'))).item?.n).toBe(2);
    // A put and a delete too: a delete sent again answers that it deleted.
    await c.client.putItem(T, { id: 'gone' });
    expect(await c.client.request('DeleteItem', { table: T, key: { id: 'gone' }, idempotencyId: 'gone-1' })).toEqual({ deleted: true });
    await c.client.putItem(T, { id: 'gone', back: true });
    expect(await c.client.request('DeleteItem', { table: T, key: { id: 'gone' }, idempotencyId: 'gone-1' })).toEqual({ deleted: true });
    expect((await c.client.getItem(T, { id: 'gone' }))?.back).toBe(true);
    // A BatchWrite's writes each get an id made from the batch's and their place: sent again, none is applied.
    expect(await c.client.batchWrite(T, { puts: [{ id: 'batched', v: 1 }], deletes: [{ id: 'twice' }], idempotencyId: 'batch-1' })).toEqual([]);
    await c.client.putItem(T, { id: 'batched', v: 2 });
    await c.client.updateItem(T, { id: 'twice' }, { add: { n: 7 } });
    expect(await c.client.batchWrite(T, { puts: [{ id: 'batched', v: 1 }], deletes: [{ id: 'twice' }], idempotencyId: 'batch-1' })).toEqual([]);
    expect((await c.client.getItem(T, { id: 'batched' }))?.v).toBe(2);
    expect(await n('twice')).toBe(7);
  }, 30_000);

  it('sent again with a different request is refused with its code, and nothing is applied', async () => {
    await c.client.request('UpdateItem', add('reused', 1, 'reused-1'));
    const err = await expectError(c.client.request('UpdateItem', add('reused', 5, 'reused-1')), 'IdempotentParameterMismatch');
    expect(err.message).toContain('"reused-1"');
    const overHttp = await expectError(c.http.request('PutItem', { table: T, item: { id: 'reused', n: 100 }, idempotencyId: 'reused-1' }), 'IdempotentParameterMismatch');
    expect((overHttp as KeysliceError & { httpStatus: number }).httpStatus).toBe(400);
    expect(await n('reused')).toBe(1);
    // The request it was first used for still answers as it did.
    expect((await c.client.request('UpdateItem', add('reused', 1, 'reused-1'))).item?.n).toBe(1);
    await expectError(c.client.request('UpdateItem', { ...add('reused', 1, 'x'.repeat(65)) }), 'ValidationError');
  }, 30_000);

  it('sent again by the client itself while its leader is frozen: applied once', async () => {
    await c.client.putItem(T, { id: 'frozen', n: 0 });
    const leader = await leaderOf(c, T, 'frozen');
    // Copies leave every 300 ms or so (each times out): all wait at the router for the frozen leader, and each is
    // sent on to the next one once the router's map names it.
    const retrying = await KeysliceClient.connect(c.cluster.url, { requestTimeoutMs: 300, writeRetries: 200 });
    const before = await duplicateWrites();
    let answer;
    try {
      await freezeProcess(leader.child.pid!);
      answer = retrying.updateItem(T, { id: 'frozen' }, { add: { n: 1 }, returnValues: 'new' });
      answer.catch(() => {});
      await statusUntil(c, 'the frozen leader replaced', leadsNothing(leader));
      expect((await answer)?.n).toBe(1);
    } finally {
      leader.child.kill('SIGCONT');
      await retrying.close();
    }
    await sleep(2_000); // any copy still on its way lands
    expect(await n('frozen')).toBe(1);
    const answeredFromMemory = (await duplicateWrites()) - before;
    console.log(`client resend: ${answeredFromMemory} copies of one write answered from a remembered id`);
    expect(answeredFromMemory).toBeGreaterThan(0);
  }, 60_000);

  it('sent again after its leader was killed: the next leader answers it, applied once', async () => {
    await allLed(c);
    await c.client.putItem(T, { id: 'killed', n: 0 });
    const leader = await leaderOf(c, T, 'killed');
    const first = await c.client.request('UpdateItem', add('killed', 1, 'killed-1'));
    await stopProcess(leader.child, 'SIGKILL');
    await statusUntil(c, 'the killed leader replaced', leadsNothing(leader));
    expect(await c.client.request('UpdateItem', add('killed', 1, 'killed-1'))).toEqual(first);
    await expectError(c.client.request('UpdateItem', add('killed', 2, 'killed-1')), 'IdempotentParameterMismatch');
    expect(await n('killed')).toBe(1);
    await restartNode(c, leader, { durability: 'fsync' });
    await allLed(c, 'every slice led again');
  }, 60_000);
});

describe('a write with an idempotency id on a slice of one replica (R=1)', () => {
  it('is accepted, and applied each time it is sent: the node keeps no ids', async () => {
    for (let i = 0; i < 2; i++) await single.client.request('UpdateItem', add('one', 1, 'one-1'));
    expect((await single.client.getItem(T, { id: 'one' }))?.n).toBe(2);
  }, 30_000);
});
