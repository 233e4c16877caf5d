// Many clients against one item: the condition and the update are applied in
// one step by the worker that owns the slice, so no increment is lost and a
// conditional put lets exactly one writer win.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeysliceClient } from '../coordinator/client/client.js';
import { KeysliceError } from '../shared/errors.js';
import { useCluster } from './cluster-fixture.js';

const c = useCluster();
const T = 'counters';
const CLIENTS = 8;
let clients: KeysliceClient[] = [];

beforeAll(async () => {
  await c.client.createTable(T, { name: 'id', type: 'string' });
  clients = await Promise.all(Array.from({ length: CLIENTS }, () => KeysliceClient.connect(c.cluster.url)));
});
afterAll(async () => {
  await Promise.all(clients.map((cl) => cl.close()));
});

describe('concurrent writers on one item', () => {
  it('SET n = n + :one from 8 connections, 50 in flight each: no increment lost, each saw a distinct value', async () => {
    await c.client.putItem(T, { id: 'counter', n: 0 });
    const PER_CLIENT = 100;
    const seen = await Promise.all(
      clients.map(async (cl) => {
        const values: number[] = [];
        for (let round = 0; round < PER_CLIENT / 50; round++) {
          const batch = await Promise.all(
            Array.from({ length: 50 }, () => cl.updateItem(T, 'counter', { update: 'SET n = n + :one', values: { ':one': 1 }, returnValues: 'new' })),
          );
          values.push(...batch.map((item) => item!.n as number));
        }
        return values;
      }),
    );
    const total = CLIENTS * PER_CLIENT;
    expect((await c.client.getItem(T, 'counter'))!.n).toBe(total);
    // Each update returned the value it wrote: all of 1..total, once each.
    expect(seen.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
  });

  it('conditional puts on one key: exactly one writer wins, the others get ConditionalCheckFailed', async () => {
    for (let round = 0; round < 20; round++) {
      const id = `race-${round}`;
      const outcomes = await Promise.all(
        clients.map((cl, writer) =>
          cl.putItem(T, { id, writer }, { condition: 'attribute_not_exists(id)' }).then(
            () => writer,
            (err: KeysliceError) => {
              expect(err.code).toBe('ConditionalCheckFailed');
              return -1;
            },
          ),
        ),
      );
      const winners = outcomes.filter((w) => w >= 0);
      expect(winners).toHaveLength(1);
      expect((await c.client.getItem(T, id))!.writer).toBe(winners[0]);
    }
  });

  it('optimistic versioning: of 8 updates conditioned on the same version, one applies per round', async () => {
    await c.client.putItem(T, { id: 'doc', version: 0, log: [] });
    for (let version = 0; version < 10; version++) {
      const outcomes = await Promise.allSettled(
        clients.map((cl, writer) =>
          cl.updateItem(T, 'doc', {
            update: 'SET version = version + :one, log = list_append(log, :w)',
            condition: 'version = :v',
            values: { ':one': 1, ':v': version, ':w': [writer] },
          }),
        ),
      );
      expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
      for (const o of outcomes) if (o.status === 'rejected') expect((o.reason as KeysliceError).code).toBe('ConditionalCheckFailed');
    }
    const doc = (await c.client.getItem(T, 'doc'))!;
    expect(doc.version).toBe(10);
    expect(doc.log).toHaveLength(10);
  });
});
