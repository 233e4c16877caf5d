// Who asks again after Unavailable, through real processes (docs/architecture.md, "Routing"; errors.ts
// callerMayRetry). On replicated slices the router waits out a failover (--failover-retry-ms), and nothing above
// it asks again: with every slice node of an R=2 cluster killed, so that no slice has a leader, `keyslice export`,
// `keyslice import` and the client's writeRetries each give up once, when the router's wait ends, with an
// Unavailable that says so (before, each asked the router again: export and import for about two minutes, the
// client until its idempotency window closed); nor does the AWS SDK through the DynamoDB endpoint (it answers such an
// Unavailable at status 400, which the SDK does not retry; at 503 the SDK asked 4 times). On a slice of one replica the router waits for nothing (there is no
// failover), so the callers still ask again what is safe to ask again: export's pages, import's whole-item puts, a
// client's write that was not applied; a node restarted meanwhile is ridden out.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { KeysliceClient } from '../coordinator/client/client.js';
import type { ImportSummary } from '../coordinator/cli/cli-import.js';
import { stopProcess } from '../coordinator/cli/local-cluster.js';
import { KeysliceError } from '../shared/errors.js';
import { FAILOVER_RETRY_MS_MIN, IMPORT_RETRIES_MAX, IMPORT_RETRY_DELAY_MS_MAX, IMPORT_RETRY_DELAY_MS_MIN } from '../shared/limits.js';
import { keyslice, stopRunning } from './cli-run.js';
import { led, restartNode, statusUntil, useCluster, type ClusterHandle } from './cluster-fixture.js';

/** The router's failover wait (--failover-retry-ms; 10 s by default): the story with no leader waits it out, and checks
 * that every caller gives up once, when it ends, whatever it is. */
const FAILOVER_WAIT_MS = 3 * FAILOVER_RETRY_MS_MIN;
const replicated = useCluster({ nodes: 2, slices: 8, replicationFactor: 2, coordinatorArgs: ['--failover-retry-ms', String(FAILOVER_WAIT_MS)] });
const single = useCluster({ nodes: 1, slices: 4, replicationFactor: 1 });
const T = 'unavail';
const ITEMS = 40;
/** A caller gives up within the router's wait and this much more (a CLI process's start, its connection). */
const GIVE_UP_SLACK_MS = 8_000;
/** The least time import's and export's waits between tries add up to (jitter halves each at most). */
const CALLER_WAITS_MS_MIN = Array.from({ length: IMPORT_RETRIES_MAX }, (_, a) => Math.min(IMPORT_RETRY_DELAY_MS_MAX, IMPORT_RETRY_DELAY_MS_MIN * 2 ** a) / 2).reduce((x, y) => x + y, 0);

afterAll(() => stopRunning());


async function prepare(c: ClusterHandle): Promise<string> {
  await c.client.createTable(T, { name: 'id', type: 'string' });
  for (let i = 0; i < ITEMS; i += 20) await c.client.batchWrite(T, { puts: Array.from({ length: 20 }, (_, j) => ({ id: `k${i + j}`, v: i + j })) });
  const file = join(c.dataDir, 'items.jsonl');
  writeFileSync(file, Array.from({ length: ITEMS }, (_, i) => JSON.stringify({ id: `m${i}`, v: i })).join('\n') + '\n');
  return file;
}

/** Runs `f`, answering how long it took and what it answered or threw. */
async function timed<R>(f: () => Promise<R>): Promise<{ ms: number; value?: R; err?: unknown }> {
  const t0 = Date.now();
  try {
    const value = await f();
    return { ms: Date.now() - t0, value };
  } catch (err) {
    return { ms: Date.now() - t0, err };
  }
}

const summaryOf = (stdout: string) => (stdout === '' ? null : (JSON.parse(stdout) as ImportSummary));

describe('no slice has a leader (R=2, every node killed)', () => {
  let file: string;
  beforeAll(async () => {
    await statusUntil(replicated, 'every slice led', led);
    file = await prepare(replicated);
  }, 60_000);

  it('export, import and the write resend give up once, when the router stops waiting, and say so', async () => {
    for (const n of replicated.cluster.nodes) await stopProcess(n.child, 'SIGKILL');
    const url = replicated.cluster.url;
    const resending = await KeysliceClient.connect(url, { writeRetries: 5, requestTimeoutMs: 60_000 });
    // The AWS SDK with its own retries as they come (no maxAttempts: 4 attempts for DynamoDB in this SDK's version).
    const sdk = new DynamoDBClient({ endpoint: url, region: 'local', credentials: { accessKeyId: 'dummy-key', secretAccessKey: 'dummy-secret' } });
    try {
      // At once: each waits for the router alone.
      const [exported, imported, put, sdkPut] = await Promise.all([
        timed(() => keyslice(['export', T, '--url', url, '--parallel', '2'], 90_000)),
        // Four batches at once: each waits for the router once.
        timed(() => keyslice(['import', T, file, '--url', url, '--json', '--parallel', '4', '--batch', '10'], 90_000)),
        timed(() => resending.putItem(T, { id: 'k1', v: -1 })),
        timed(() => sdk.send(new PutItemCommand({ TableName: T, Item: { id: { S: 'k2' }, v: { N: '-1' } } }))),
      ]);
      console.log(`no leader: export gave up in ${exported.ms} ms, import in ${imported.ms} ms, a put with writeRetries 5 in ${put.ms} ms, an SDK PutItem in ${sdkPut.ms} ms`);

      expect(exported.value?.code).toBe(1);
      expect(exported.value?.stderr).toMatch(/Unavailable: a scan page of slices \d+-\d+: no serving leader answered \d+ tries in \d+ ms \(the router waits for a failover at most/);
      expect(exported.ms).toBeLessThan(FAILOVER_WAIT_MS + GIVE_UP_SLACK_MS);

      const summary = summaryOf(imported.value?.stdout ?? '');
      expect(imported.value?.code).toBe(1);
      expect(summary).not.toBeNull();
      // Nothing was sent again: every write failed once, with the router's answer.
      expect([summary!.imported, summary!.failed, summary!.retries]).toEqual([0, ITEMS, 0]);
      expect(summary!.firstFailures[0].code).toBe('Unavailable');
      expect(summary!.firstFailures[0].message).toMatch(/^slice \d+: no serving leader answered \d+ tries in \d+ ms/);
      expect(imported.ms).toBeLessThan(FAILOVER_WAIT_MS + GIVE_UP_SLACK_MS);

      expect(put.err).toBeInstanceOf(KeysliceError);
      const err = put.err as KeysliceError;
      expect(err.code).toBe('Unavailable');
      expect(err.details).toEqual({ notApplied: true, routerRetried: true });
      expect(err.message).toContain(`within ${FAILOVER_WAIT_MS} ms`);
      expect(put.ms).toBeGreaterThanOrEqual(FAILOVER_WAIT_MS);
      expect(put.ms).toBeLessThan(FAILOVER_WAIT_MS + GIVE_UP_SLACK_MS);

      // The DynamoDB endpoint answers ServiceUnavailable at status 400, which the SDK does not send again (at 503 it
      // made 4 attempts, each waiting the router's FAILOVER_WAIT_MS).
      const sdkErr = sdkPut.err as Error & { $metadata?: { httpStatusCode?: number; attempts?: number } };
      expect(sdkErr?.name, sdkErr?.message).toBe('ServiceUnavailable');
      expect(sdkErr.message).toMatch(/^slice \d+: no serving leader answered \d+ tries in \d+ ms.*the router already retried this request/);
      expect(sdkErr.$metadata?.httpStatusCode).toBe(400);
      expect(sdkErr.$metadata?.attempts).toBe(1);
      expect(sdkPut.ms).toBeLessThan(FAILOVER_WAIT_MS + GIVE_UP_SLACK_MS);
    } finally {
      await resending.close();
      sdk.destroy();
    }
  }, 120_000);
});

describe('a slice of one replica whose node is down (R=1)', () => {
  let file: string;
  beforeAll(async () => {
    file = await prepare(single);
  }, 60_000);

  it('export, import and the write resend ask again what is safe to ask again, and ride out a restart', async () => {
    const node = single.cluster.nodes[0];
    await stopProcess(node.child, 'SIGKILL');
    const url = single.cluster.url;
    // Down for good: the router answers at once, not applied, and each caller asks again within its own bounds.
    const resending = await KeysliceClient.connect(url, { writeRetries: 3 });
    try {
      const put = await timed(() => resending.putItem(T, { id: 'k1', v: -1 }));
      expect((put.err as KeysliceError).code).toBe('Unavailable');
      expect((put.err as KeysliceError).details).toEqual({ notApplied: true });
      expect(put.ms).toBeGreaterThanOrEqual(50 + 100 + 200); // three copies after waits of 50, 100 and 200 ms
    } finally {
      await resending.close();
    }
    const down = await timed(() => keyslice(['export', T, '--url', url], 60_000));
    expect(down.value?.code).toBe(1);
    expect(down.value?.stderr).toMatch(/Unavailable: slice node \S+ is not available/);
    expect(down.ms).toBeGreaterThanOrEqual(CALLER_WAITS_MS_MIN);

    // Restarted while they ask again: both finish.
    const exporting = keyslice(['export', T, '--url', url], 60_000);
    const importing = keyslice(['import', T, file, '--url', url, '--json', '--parallel', '2', '--batch', '10'], 60_000);
    await new Promise((r) => setTimeout(r, 300));
    await restartNode(single, node);
    const [exported, imported] = await Promise.all([exporting, importing]);
    expect(exported.code, exported.stderr).toBe(0);
    // Every item written before; some of the import's too, as it runs at the same time.
    const ids = new Set(exported.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { id: string }).id));
    for (let i = 0; i < ITEMS; i++) expect(ids.has(`k${i}`)).toBe(true);
    const summary = summaryOf(imported.stdout);
    expect(imported.code, imported.stderr).toBe(0);
    expect([summary!.imported, summary!.failed]).toEqual([ITEMS, 0]);
    expect(summary!.retries).toBeGreaterThan(0);
    expect((await single.client.getItem(T, { id: `m${ITEMS - 1}` }))?.v).toBe(ITEMS - 1);
  }, 120_000);
});
