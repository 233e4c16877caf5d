// The package's entry: `import { KeysliceClient, KeysliceError } from 'keyslice'`.
// The client, its errors and codes, and the types of the operations it speaks;
// all of it from coordinator/client/client.ts and shared/ (the client imports nothing
// else of ours), so a program that uses it loads no server code.
export { KeysliceClient, type ClientOptions, type ItemPageCallback, type ItemPagesRead } from './client.js';
export { ERROR_CODES, KeysliceError, isErrorCode, type ErrorCode, type ErrorDetails } from '../../shared/errors.js';
export { OPERATION_NAMES } from '../../shared/api.js';
export type * from '../../shared/api.js';
export type { Item, Value } from '../../shared/values.js';
// Numbers no double holds travel as {"$N": "<decimal text>"} (docs/dynamodb.md, "Numbers").
export { compareNumbers, decimal, isDecimal, numberText, type DecimalValue, type NumberValue } from '../../shared/decimal.js';
export type { KeyType, KeyValue } from '../../shared/key-encoding.js';
