// The AWS SDK pointed at a local keyslice cluster: region 'local', dummy
// credentials (or the cluster's token as the secret key), no retries (a test
// wants the first answer), and raw signed or unsigned requests for the cases
// an SDK never sends.
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { expect } from 'vitest';

export function dynamoClient(url: string, secretAccessKey = 'dummy-secret'): DynamoDBClient {
  return new DynamoDBClient({
    endpoint: url,
    region: 'local',
    credentials: { accessKeyId: 'dummy-key', secretAccessKey },
    maxAttempts: 1,
  });
}

export function documentClient(client: DynamoDBClient): DynamoDBDocumentClient {
  return DynamoDBDocumentClient.from(client);
}

/** Resolves to the SDK's error: its name (DynamoDB's exception), message and HTTP status. */
export async function sdkError(p: Promise<unknown>): Promise<{ name: string; message: string; status: number | undefined; error: Record<string, unknown> }> {
  try {
    await p;
  } catch (err) {
    const e = err as Error & { $metadata?: { httpStatusCode?: number } };
    return { name: e.name, message: e.message, status: e.$metadata?.httpStatusCode, error: e as unknown as Record<string, unknown> };
  }
  throw new Error('expected the request to fail, but it succeeded');
}

export async function expectSdkError(p: Promise<unknown>, name: string, message?: string | RegExp): Promise<Record<string, unknown>> {
  const e = await sdkError(p);
  expect(e.name, e.message).toBe(name);
  if (message !== undefined) {
    if (typeof message === 'string') expect(e.message).toBe(message);
    else expect(e.message).toMatch(message);
  }
  return e.error;
}

/** One raw request to the DynamoDB endpoint: status and parsed JSON body (or the text). */
export async function rawRequest(url: string, target: string | null, body: string | Buffer<ArrayBuffer>, headers: Record<string, string> = {}): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const h: Record<string, string> = { 'content-type': 'application/x-amz-json-1.0', ...headers };
  if (target !== null) h['x-amz-target'] = target;
  const res = await fetch(url + '/', { method: 'POST', headers: h, body, signal: AbortSignal.timeout(30_000) });
  const text = await res.text();
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = { text };
  }
  return { status: res.status, body: parsed, headers: res.headers };
}
