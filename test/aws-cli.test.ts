// The AWS CLI against a local cluster, as docs/dynamodb.md's session ("The AWS CLI") shows it:
// create-table, put-item and get-item of 38-digit numbers, update-item ADD,
// query in numeric order, scan, and DynamoDB's error for a number out of range.
// Skipped, saying so, where `aws` is not installed (CI does not install it).
import { execFile, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { useCluster } from './cluster-fixture.js';

const AWS_COMMAND_TIMEOUT_MS = 60_000;
const available = spawnSync('aws', ['--version'], { timeout: 30_000 }).status === 0;
if (!available) console.warn('test/aws-cli.test.ts: skipped, the AWS CLI (`aws`) is not installed');

const c = available ? useCluster() : null;

/** One `aws dynamodb` command against the cluster: its exit status, stdout and stderr. */
function aws(...args: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  const none = join(tmpdir(), 'keyslice-no-aws-config'); // no profile of the machine's user leaks in
  const env = { ...process.env, AWS_ACCESS_KEY_ID: 'dummy', AWS_SECRET_ACCESS_KEY: 'dummy', AWS_DEFAULT_REGION: 'us-east-1', AWS_PAGER: '', AWS_CONFIG_FILE: none, AWS_SHARED_CREDENTIALS_FILE: none };
  return new Promise((resolve) => {
    execFile('aws', ['dynamodb', ...args, '--endpoint-url', c!.cluster.url], { env, timeout: AWS_COMMAND_TIMEOUT_MS }, (err, stdout, stderr) => {
      resolve({ status: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
    });
  });
}

describe.skipIf(!available)('the AWS CLI', () => {
  it('create-table, put-item, get-item, update-item, query, scan and an error, as in docs/dynamodb.md', async () => {
    const created = await aws(
      'create-table', '--table-name', 'Music',
      '--attribute-definitions', 'AttributeName=Artist,AttributeType=S', 'AttributeName=Seq,AttributeType=N',
      '--key-schema', 'AttributeName=Artist,KeyType=HASH', 'AttributeName=Seq,KeyType=RANGE',
      '--billing-mode', 'PAY_PER_REQUEST', '--query', 'TableDescription.TableStatus',
    );
    expect(created.stdout.trim(), created.stderr).toBe('"ACTIVE"');
    const seqs = ['9007199254740993', '1', '12345678901234567890123456789012345678', '0.1', '-2.5'];
    for (const seq of seqs) {
      const put = await aws('put-item', '--table-name', 'Music', '--item', JSON.stringify({ Artist: { S: 'No One You Know' }, Seq: { N: seq }, Plays: { N: '99999999999999999999999999999999999998' } }));
      expect(put.status, put.stderr).toBe(0);
    }
    const got = await aws('get-item', '--table-name', 'Music', '--key', '{"Artist":{"S":"No One You Know"},"Seq":{"N":"9007199254740993"}}');
    expect(JSON.parse(got.stdout).Item).toEqual({ Artist: { S: 'No One You Know' }, Seq: { N: '9007199254740993' }, Plays: { N: '99999999999999999999999999999999999998' } });
    const added = await aws(
      'update-item', '--table-name', 'Music', '--key', '{"Artist":{"S":"No One You Know"},"Seq":{"N":"1"}}',
      '--update-expression', 'ADD Plays :one', '--expression-attribute-values', '{":one":{"N":"1"}}', '--return-values', 'UPDATED_NEW',
    );
    expect(JSON.parse(added.stdout).Attributes).toEqual({ Plays: { N: '99999999999999999999999999999999999999' } });
    const queried = await aws(
      'query', '--table-name', 'Music', '--key-condition-expression', 'Artist = :a',
      '--expression-attribute-values', '{":a":{"S":"No One You Know"}}', '--projection-expression', 'Seq',
    );
    expect(JSON.parse(queried.stdout).Items.map((i: { Seq: { N: string } }) => i.Seq.N)).toEqual(['-2.5', '0.1', '1', '9007199254740993', '12345678901234567890123456789012345678']);
    // The CLI pages with --max-items itself, through ExclusiveStartKey.
    const paged = await aws('scan', '--table-name', 'Music', '--max-items', '2', '--page-size', '2');
    const page = JSON.parse(paged.stdout);
    expect(page.Items).toHaveLength(2);
    expect(typeof page.NextToken).toBe('string');
    const counted = await aws('scan', '--table-name', 'Music', '--select', 'COUNT');
    expect(JSON.parse(counted.stdout)).toMatchObject({ Count: 5, ScannedCount: 5 });
    const refused = await aws('put-item', '--table-name', 'Music', '--item', '{"Artist":{"S":"x"},"Seq":{"N":"1E+126"}}');
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toContain('An error occurred (ValidationException) when calling the PutItem operation: Number overflow. Attempting to store a number with magnitude larger than supported range');
  });
});
