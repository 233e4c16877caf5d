// A story of failures: a slice node dies, its slices answer Unavailable (never
// hang) while the rest serve; it comes back and is served again; the
// coordinator restarts and finds its tables and nodes from its data folder.
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startCoordinator, stopProcess } from '../coordinator/cli/local-cluster.js';
import { KeysliceError } from '../shared/errors.js';
import { initHashing, sliceOf } from '../shared/hashing.js';
import { restartNode, useCluster } from './cluster-fixture.js';

const c = useCluster();
const T = 'avail';
beforeAll(() => initHashing());

describe('a slice node goes down and comes back', () => {
  it('answers Unavailable for its slices only, then serves again after a restart', async () => {
    await c.client.createTable(T, { name: 'id', type: 'string' });
    const ids = Array.from({ length: 25 }, (_, i) => `k${i}`);
    await c.client.batchWrite(T, { puts: ids.map((id) => ({ id })) });
    const { sliceCount, slices, complete, unreported } = await c.client.describeSlices(T);
    expect([complete, unreported]).toEqual([true, []]);
    const nodeOfSlice = new Map(slices.map((s) => [s.slice, s.node]));
    const second = c.cluster.nodes[1];
    const onSecond = ids.filter((id) => nodeOfSlice.get(sliceOf('string', id, sliceCount)) === second.url);
    expect(onSecond.length).toBeGreaterThan(0);
    expect(onSecond.length).toBeLessThan(ids.length);

    await stopProcess(second.child, 'SIGKILL');
    const started = Date.now();
    const results = await Promise.all(ids.map((id) => c.client.getItem(T, id).then(() => null, (err: KeysliceError) => err)));
    expect(Date.now() - started).toBeLessThan(5_000); // answered, not hung
    results.forEach((err, i) => {
      if (onSecond.includes(ids[i])) {
        expect(err?.code).toBe('Unavailable');
        expect(err?.retryable).toBe(true);
      } else expect(err).toBeNull();
    });
    // DescribeSlices answers for the node that is up and names the other with its slices.
    const partial = await c.client.describeSlices(T);
    expect(partial.complete).toBe(false);
    expect(partial.unreported).toEqual([expect.objectContaining({ node: second.url, code: 'Unavailable' })]);
    expect(partial.slices.every((s) => s.node !== second.url)).toBe(true);
    for (const id of ids) expect(partial.unreported[0].slices.includes(sliceOf('string', id, sliceCount))).toBe(onSecond.includes(id));

    // Batches do not fail whole: the items on the dead node are reported, the others go through.
    const failures = await c.client.batchWrite(T, { puts: ids.map((id) => ({ id, v: 'again' })) });
    expect(failures.map((f) => f.name).sort()).toEqual([...onSecond].sort());
    for (const f of failures) expect(f).toMatchObject({ list: 'puts', code: 'Unavailable', retryable: true, index: ids.indexOf(f.name) });
    const got = await c.client.batchGet(T, ids);
    expect(got.failures.map((f) => f.index)).toEqual(ids.flatMap((id, i) => (onSecond.includes(id) ? [i] : [])));
    got.items.forEach((item, i) => expect(item?.v ?? null).toBe(onSecond.includes(ids[i]) ? null : 'again'));
    const deleted = await c.client.batchWrite(T, { deletes: [ids.find((id) => !onSecond.includes(id))!, onSecond[0]] });
    expect(deleted).toEqual([expect.objectContaining({ list: 'deletes', index: 1, name: onSecond[0], code: 'Unavailable' })]);
    await c.client.putItem(T, { id: ids.find((id) => !onSecond.includes(id))! }); // put it back for what follows

    // Restart it on the same address: the coordinator reconnects and routes to it again.
    await restartNode(c, second);
    let served = false;
    for (let attempt = 0; attempt < 50 && !served; attempt++) {
      served = await c.client.describeSlices(T).then(
        (l) => l.complete || new Promise<boolean>((r) => setTimeout(() => r(false), 100)),
        () => new Promise<boolean>((r) => setTimeout(() => r(false), 100)),
      );
    }
    expect(served).toBe(true);
    // It recovered its slices from its log: every item is there again.
    const after = (await c.client.getAllItems({ table: T })).map((i) => i.id).sort();
    expect(after).toEqual([...ids].sort());
  });
});

describe('the coordinator restarts', () => {
  it('keeps its tables and routing', async () => {
    await c.client.createTable('survives', { name: 'id', type: 'string' }, { name: 'n', type: 'number' });
    await c.client.putItem('survives', { id: 'a', n: 1, v: 'kept' });
    await c.client.close();
    await stopProcess(c.cluster.coordinator.child);
    const coordinator = await startCoordinator(join(c.dataDir, 'coordinator'), 0, c.cluster.nodes.map((n) => n.url), undefined, undefined, ['--replication-factor', '1'], c.cluster.clusterSecret);
    c.cluster.coordinator = coordinator; // the fixture stops this one
    c.client = await KeysliceClient.connect(coordinator.url);
    expect(await c.client.listTables()).toEqual(['avail', 'survives']);
    expect(await c.client.getItem('survives', 'a.1')).toMatchObject({ v: 'kept' });
  });
});
