// DynamoDB's errors: an exception name (sent as `__type`, with the namespace
// DynamoDB uses for it), an HTTP status, a message, and sometimes more fields
// (the old item of a failed condition). keyslice's own typed errors are mapped
// here, in one place, onto the exception a DynamoDB client expects.
import { NUMBER_LIMIT_MESSAGES } from '../../shared/decimal.js';
import { KeysliceError, toKeysliceError, type ErrorCode } from '../../shared/errors.js';

const DYNAMODB = 'com.amazonaws.dynamodb.v20120810#';
const CORAL_SERVICE = 'com.amazon.coral.service#';
const CORAL_VALIDATE = 'com.amazon.coral.validate#';

/** Every exception this endpoint answers, with its namespace and HTTP status. */
const EXCEPTIONS = {
  ValidationException: { ns: CORAL_VALIDATE, status: 400 },
  SerializationException: { ns: CORAL_SERVICE, status: 400 },
  UnknownOperationException: { ns: CORAL_SERVICE, status: 400 },
  MissingAuthenticationTokenException: { ns: CORAL_SERVICE, status: 400 },
  IncompleteSignatureException: { ns: CORAL_SERVICE, status: 400 },
  InvalidSignatureException: { ns: CORAL_SERVICE, status: 400 },
  UnrecognizedClientException: { ns: CORAL_SERVICE, status: 400 },
  RequestEntityTooLarge: { ns: CORAL_SERVICE, status: 413 },
  ResourceNotFoundException: { ns: DYNAMODB, status: 400 },
  ResourceInUseException: { ns: DYNAMODB, status: 400 },
  ConditionalCheckFailedException: { ns: DYNAMODB, status: 400 },
  ProvisionedThroughputExceededException: { ns: DYNAMODB, status: 400 },
  LimitExceededException: { ns: DYNAMODB, status: 400 },
  InternalServerError: { ns: DYNAMODB, status: 500 },
  ServiceUnavailable: { ns: DYNAMODB, status: 503 },
} as const;

export type ExceptionName = keyof typeof EXCEPTIONS;

export class DynamoDbError extends Error {
  constructor(
    readonly exception: ExceptionName,
    message: string,
    /** More fields of the error body, e.g. `Item` of a ConditionalCheckFailedException. */
    readonly extra: Record<string, unknown> = {},
    /** The HTTP status, where it is not the exception's own (routerRetried below). */
    private readonly statusOverride?: 400,
  ) {
    super(message);
    this.name = 'DynamoDbError';
  }

  get status(): number {
    return this.statusOverride ?? EXCEPTIONS[this.exception].status;
  }

  /** The JSON body DynamoDB answers for this error. */
  body(): Record<string, unknown> {
    return { __type: EXCEPTIONS[this.exception].ns + this.exception, message: this.message, ...this.extra };
  }

  static validation(message: string): DynamoDbError {
    return new DynamoDbError('ValidationException', message);
  }

  static serialization(message: string): DynamoDbError {
    return new DynamoDbError('SerializationException', message);
  }

  /** A request the service could not serve now: 503 ServiceUnavailable, as DynamoDB documents it, which the SDKs send
   * again by themselves (they retry statuses 500, 502, 503 and 504 and the throttling exceptions: the AWS SDK for
   * JavaScript v3 makes up to 4 attempts for DynamoDB by default, boto3 up to 3 or 5 by its retry mode). Unless
   * `routerRetried` (sdkRetryMultipliesWait): the router already waited out a failover for as long as its bounds
   * allow, and each attempt of the SDK's would wait as long again (4 attempts: 40 s for the router's 10 s). Then it is
   * the same exception at status 400, which no SDK retries by itself, with a message that says why; a program that
   * switches on the name still sees ServiceUnavailable (what 5xx-keyed alarms and retry policies miss: docs/dynamodb.md). */
  static unavailable(message: string, routerRetried: boolean): DynamoDbError {
    if (!routerRetried) return new DynamoDbError('ServiceUnavailable', message);
    return new DynamoDbError('ServiceUnavailable', `${message} (keyslice: the router already retried this request for as long as its bounds allow, so it is answered with status 400, which SDKs do not retry by themselves; asking again at once would wait as long again; retry later)`, {}, 400);
  }

  /** What DynamoDB answers to an item operation on a table that does not exist. */
  static noTable(): DynamoDbError {
    return new DynamoDbError('ResourceNotFoundException', 'Requested resource not found');
  }
}

/** DynamoDB's text for a failed condition (the same for every write). */
export const CONDITION_FAILED_MESSAGE = 'The conditional request failed';

export const THROUGHPUT_MESSAGE =
  'The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.';

/** keyslice error codes onto DynamoDB exceptions. Codes that the endpoint checks
 * itself before calling the native operations (keys, sizes, batches) still have a
 * mapping, so that a check that only the native side makes gets a sensible answer. */
const FROM_NATIVE: Record<ErrorCode, ExceptionName> = {
  ValidationError: 'ValidationException',
  MalformedRequest: 'SerializationException',
  UnknownOperation: 'UnknownOperationException',
  InvalidKey: 'ValidationException',
  KeyTooLarge: 'ValidationException',
  ItemTooLarge: 'ValidationException',
  BatchTooLarge: 'ValidationException',
  RequestTooLarge: 'RequestEntityTooLarge',
  InvalidMarker: 'ValidationException',
  TableNotFound: 'ResourceNotFoundException',
  TableExists: 'ResourceInUseException',
  LimitExceeded: 'LimitExceededException',
  Unavailable: 'ServiceUnavailable',
  WrongOwner: 'ServiceUnavailable',
  Internal: 'InternalServerError',
  ConditionalCheckFailed: 'ConditionalCheckFailedException',
  ThroughputExceeded: 'ProvisionedThroughputExceededException',
  Unauthorized: 'UnrecognizedClientException',
  InvalidState: 'ValidationException',
  MethodNotAllowed: 'SerializationException',
  RequestTimeout: 'ServiceUnavailable',
  ReplicaNotReady: 'ServiceUnavailable',
  // Never met here: the endpoint's writes carry no idempotency id (DynamoDB's item writes have none: docs/dynamodb.md).
  IdempotentParameterMismatch: 'ValidationException',
  // Never met here: an operator's keyslice remove, not an item request.
  ReplicaMajorityDown: 'ValidationException',
};

/** The native expression fields, as DynamoDB names them in its messages. */
const EXPRESSION_FIELDS: Record<string, string> = {
  condition: 'ConditionExpression',
  update: 'UpdateExpression',
  filter: 'FilterExpression',
  projection: 'ProjectionExpression',
  keyCondition: 'KeyConditionExpression',
};
const EXPRESSION_MESSAGE = /^(condition|update|filter|projection|keyCondition|ConditionExpression|UpdateExpression|FilterExpression|ProjectionExpression|KeyConditionExpression)(?: \(position \d+\))?: (.*)$/s;

/** Whether an SDK's own retries of an error would each wait out the router's bound again: an Unavailable with
 * routerRetried (the router waited out a failover, FAILOVER_RETRY_MS_MAX), answered at status 400 (unavailable). Not a
 * WrongOwner, though the router spent its tries on it as well: nothing was applied, its tries are bounded by
 * WRONG_OWNER_RETRY_MS_MAX, and the cause is most often one router's map that lags (cut off from its coordinator), so
 * an SDK's retry behind a load balancer is likely served by another, healthy router: 503, which the SDK retries. */
export function sdkRetryMultipliesWait(err: { code: ErrorCode; routerRetried?: boolean }): boolean {
  return err.code === 'Unavailable' && err.routerRetried === true;
}

/** Any error thrown while serving a DynamoDB request, as the DynamoDB error to answer. */
export function toDynamoDbError(err: unknown): DynamoDbError {
  if (err instanceof DynamoDbError) return err;
  if (!(err instanceof KeysliceError)) {
    const internal = toKeysliceError(err);
    return new DynamoDbError('InternalServerError', `Internal server error: ${internal.message}`);
  }
  switch (err.code) {
    case 'ConditionalCheckFailed':
      // Without the old item: writes that asked for it convert it themselves (items.ts).
      return new DynamoDbError('ConditionalCheckFailedException', CONDITION_FAILED_MESSAGE);
    case 'ThroughputExceeded':
      return new DynamoDbError('ProvisionedThroughputExceededException', `${THROUGHPUT_MESSAGE} (keyslice: ${err.message})`);
    case 'TableNotFound':
      return DynamoDbError.noTable();
    case 'ItemTooLarge':
      return DynamoDbError.validation('Item size has exceeded the maximum allowed size');
    case 'Internal':
      return new DynamoDbError('InternalServerError', `Internal server error: ${err.message}`);
    case 'Unavailable':
    case 'WrongOwner':
      return DynamoDbError.unavailable(err.message, sdkRetryMultipliesWait(err));
    case 'ValidationError': {
      // A sum beyond DynamoDB's limits (shared/decimal-sum.ts) answers as DynamoDB does, in its words alone.
      if (NUMBER_LIMIT_MESSAGES.includes(err.message)) return DynamoDbError.validation(err.message);
      const m = EXPRESSION_MESSAGE.exec(err.message);
      if (m !== null) return DynamoDbError.validation(`Invalid ${EXPRESSION_FIELDS[m[1]] ?? m[1]}: ${m[2]}`);
      return DynamoDbError.validation(`One or more parameter values were invalid: ${err.message}`);
    }
    default:
      return new DynamoDbError(FROM_NATIVE[err.code], err.code === 'InvalidKey' || err.code === 'KeyTooLarge' ? `One or more parameter values were invalid: ${err.message}` : err.message);
  }
}
