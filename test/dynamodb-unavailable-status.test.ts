// The HTTP status of ServiceUnavailable on the DynamoDB endpoint (docs/dynamodb.md, errors): 503, which the SDKs retry,
// except after the router waited out a failover (Unavailable with routerRetried), where each SDK attempt would wait as
// long again: 400. A WrongOwner the router gave up on stays 503 (nothing applied; likely one router's lagging map). A
// batch whose every item failed is 400 only if every failure is of the 400 kind. The process path of the 400 case (an
// SDK PutItem with no leader) is unavailable-retries.test.ts; these are the mappings themselves.
import { describe, expect, it } from 'vitest';
import { allFailed } from '../coordinator/dynamodb/batches.js';
import { toDynamoDbError } from '../coordinator/dynamodb/errors.js';
import type { ItemFailure } from '../shared/api.js';
import { KeysliceError } from '../shared/errors.js';

const failure = (code: 'Unavailable' | 'WrongOwner', routerRetried: boolean, index: number): ItemFailure => ({
  list: 'puts',
  index,
  name: 't',
  code,
  message: `${code} ${index}`,
  retryable: true,
  ...(routerRetried ? { routerRetried: true as const } : {}),
});

describe('ServiceUnavailable on the DynamoDB endpoint', () => {
  it('is 503 for a WrongOwner the router gave up on and for an Unavailable it did not wait out; 400 after a failover wait', () => {
    const wrongOwner = toDynamoDbError(new KeysliceError('WrongOwner', 'slice 3: refused WrongOwner 40 times in 5000 ms; retry later'));
    expect([wrongOwner.exception, wrongOwner.status]).toEqual(['ServiceUnavailable', 503]);
    const down = toDynamoDbError(new KeysliceError('Unavailable', 'slice 3 has no slice node', { notApplied: true }));
    expect([down.exception, down.status]).toEqual(['ServiceUnavailable', 503]);
    const waited = toDynamoDbError(new KeysliceError('Unavailable', 'slice 3: no serving leader answered 9 tries in 10000 ms', { notApplied: true, routerRetried: true }));
    expect([waited.exception, waited.status]).toEqual(['ServiceUnavailable', 400]);
    expect(waited.message).toMatch(/status 400/);
  });

  it('is 400 for a batch only if every item failed after a failover wait', () => {
    expect(allFailed([failure('Unavailable', true, 0), failure('Unavailable', true, 1)]).status).toBe(400);
    // The first failure alone would say 400: one item that an SDK retry may get through makes it 503.
    expect(allFailed([failure('Unavailable', true, 0), failure('WrongOwner', false, 1)]).status).toBe(503);
    expect(allFailed([failure('Unavailable', true, 0), failure('Unavailable', false, 1)]).status).toBe(503);
    expect(allFailed([failure('WrongOwner', false, 0), failure('Unavailable', true, 1)]).status).toBe(503);
  });
});
