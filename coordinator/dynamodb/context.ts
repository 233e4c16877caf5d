// What every DynamoDB operation handler gets: the native operations it is
// built on, the DynamoDB-only table settings, and facts about the request.
import type { Operations } from '../router/operations.js';
import type { ProcessMetrics } from '../router/process-metrics.js';
import type { Params } from './params.js';
import type { TableSettingsStore } from './table-settings.js';

export interface Context {
  ops: Operations;
  settings: TableSettingsStore;
  /** Slices of the cluster (fixed when it was created): continuation keys of a Scan name a slice. */
  sliceCount: number;
  /** The region of the request's signature ('local' when unsigned): it appears in ARNs. */
  region: string;
  /** The Host the client used, for DescribeEndpoints. */
  host: string;
  /** Counts each Query and Scan page by what its items were written from (/metrics keyslice_dynamodb_pages_total). */
  metrics?: Pick<ProcessMetrics, 'dynamodbPage'>;
}

export type Handler = (ctx: Context, p: Params) => Promise<Record<string, unknown>>;

/** The account in ARNs: keyslice has no accounts, so this stands for all. */
export const ACCOUNT_ID = '000000000000';
