// What a router does not answer itself goes to the coordinator, as it came (the
// client's token, a DynamoDB client's signature and Host stay as they are; the
// router adds the cluster secret): table changes, DynamoDB's table operations
// (their settings live in the coordinator's folder), /cluster/ requests and the
// studio. After a change, the router refreshes its copy of the catalog and map
// before it answers, so that a client that created a table through a router can
// use it through that router at once. Without a coordinator these answer
// Unavailable; everything else goes on with the copy the router has.
import { request, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { clusterSecretRefusal } from '../../shared/auth.js';
import type { OperationName } from '../../shared/api.js';
import { isErrorCode, KeysliceError } from '../../shared/errors.js';
import { RETRY_AFTER_SECONDS, ROUTER_APPLY_WAIT_MS, ROUTER_FORWARD_TIMEOUT_MS } from '../../shared/limits.js';
import { CLUSTER_API_PREFIX, CLUSTER_SECRET_HEADER, HTTP_API_PREFIX } from '../../shared/protocol.js';
import { fromJson, toJson } from '../../shared/values.js';
import { DYNAMODB_TARGET_PREFIX, TABLE_OPERATIONS } from '../dynamodb/endpoint.js';
import { TABLE_CHANGES } from './operations.js';
import type { RouterView } from './router-view.js';

const HOP_BY_HOP = ['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection'];
const CHANGES = new Set(TABLE_CHANGES.map((op) => HTTP_API_PREFIX + op));

export class Forwarder {
  constructor(
    private readonly view: RouterView,
    private readonly clusterSecret: string,
    /** The client token (the router's is the coordinator's): a request over WebSocket was let in with it. */
    private readonly token: string,
  ) {}

  /** A table change that came over WebSocket: POST /api/<op> to the coordinator, answered once
   * this router's copy has it. */
  async change(op: OperationName, payload: Record<string, unknown>): Promise<unknown> {
    const headers: Record<string, string> = { 'content-type': 'application/json', [CLUSTER_SECRET_HEADER]: this.clusterSecret };
    if (this.token !== '') headers.authorization = `Bearer ${this.token}`;
    let res: Response;
    let body: { error?: { code?: unknown; message?: unknown } } & Record<string, unknown>;
    try {
      res = await fetch(`${this.view.coordinatorUrl}${HTTP_API_PREFIX}${op}`, {
        method: 'POST',
        headers,
        body: JSON.stringify(toJson(payload)),
        signal: AbortSignal.timeout(ROUTER_FORWARD_TIMEOUT_MS),
      });
      body = (await res.json()) as typeof body;
    } catch (err) {
      const cause = (err as Error & { cause?: Error }).cause;
      throw new KeysliceError('Unavailable', lostMessage(this.view.coordinatorUrl, cause?.message ?? (err as Error).message));
    }
    if (res.status !== 200) {
      const code = body.error?.code;
      throw new KeysliceError(isErrorCode(code) ? code : 'Internal', String(body.error?.message ?? `the coordinator answered HTTP ${res.status}`));
    }
    await Promise.race([this.view.refresh(true), new Promise((r) => setTimeout(r, ROUTER_APPLY_WAIT_MS))]);
    return fromJson(body);
  }

  forwards(req: IncomingMessage, path: string): boolean {
    if (path.startsWith(CLUSTER_API_PREFIX) || CHANGES.has(path)) return true;
    const get = req.method === 'GET' || req.method === 'HEAD';
    if (get && (path === '/' || path === '/studio' || path.startsWith('/studio/'))) return true;
    if (req.method === 'POST' && path === '/') {
      const target = req.headers['x-amz-target'];
      return typeof target === 'string' && target.startsWith(DYNAMODB_TARGET_PREFIX) && TABLE_OPERATIONS.has(target.slice(DYNAMODB_TARGET_PREFIX.length));
    }
    return false;
  }

  forward(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? '/').split('?')[0].replace(/\/$/, '');
    // These take the cluster secret, which the router adds: the caller must have shown it.
    if (path === `${CLUSTER_API_PREFIX}join` || path === `${CLUSTER_API_PREFIX}feed`) {
      const refusal = clusterSecretRefusal(this.clusterSecret, req.headers[CLUSTER_SECRET_HEADER]);
      if (refusal !== null) return answerError(res, new KeysliceError('Unauthorized', refusal));
    }
    const target = new URL(this.view.coordinatorUrl);
    const headers: IncomingHttpHeaders = { ...req.headers, [CLUSTER_SECRET_HEADER]: this.clusterSecret };
    for (const h of HOP_BY_HOP) delete headers[h];
    if (req.headers['transfer-encoding'] !== undefined) headers['transfer-encoding'] = req.headers['transfer-encoding'];
    const up = request({ hostname: target.hostname, port: target.port, method: req.method, path: req.url, headers, timeout: ROUTER_FORWARD_TIMEOUT_MS });
    const lost = (why: string) => answerError(res, new KeysliceError('Unavailable', lostMessage(this.view.coordinatorUrl, why)));
    up.on('timeout', () => up.destroy(new Error(`no answer within ${ROUTER_FORWARD_TIMEOUT_MS} ms`)));
    up.on('error', (err) => lost(err.message));
    // A read streams through (the studio's event stream is one); a change is answered once this router's copy has it.
    const change = req.method !== 'GET' && req.method !== 'HEAD' && path !== `${CLUSTER_API_PREFIX}join`;
    up.on('response', (upRes) => {
      const out: IncomingHttpHeaders = { ...upRes.headers };
      for (const h of HOP_BY_HOP) delete out[h];
      if (!change) {
        res.writeHead(upRes.statusCode ?? 502, out as Record<string, string>);
        upRes.pipe(res);
        return;
      }
      const chunks: Buffer[] = [];
      upRes.on('data', (c: Buffer) => chunks.push(c));
      upRes.on('error', (err) => lost(err.message));
      upRes.on('end', async () => {
        const body = Buffer.concat(chunks);
        await Promise.race([this.view.refresh(true), new Promise((r) => setTimeout(r, ROUTER_APPLY_WAIT_MS))]);
        if (res.headersSent) return;
        res.writeHead(upRes.statusCode ?? 502, { ...(out as Record<string, string>), 'content-length': String(body.length) });
        res.end(body);
      });
    });
    req.pipe(up);
    req.on('error', () => up.destroy());
    // A client that goes away (say, a closed studio page) ends its request to the coordinator too.
    res.on('close', () => up.destroy());
  }
}

function lostMessage(coordinatorUrl: string, why: string): string {
  return `the coordinator ${coordinatorUrl} is not reachable from this router (${why}); table and membership changes wait until it is back`;
}

function answerError(res: ServerResponse, err: KeysliceError): void {
  if (res.headersSent) return void res.destroy();
  const text = JSON.stringify({ error: { code: err.code, message: err.message, retryable: err.retryable } });
  const headers: Record<string, string> = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) };
  if (err.status === 503) headers['retry-after'] = String(RETRY_AFTER_SECONDS);
  res.writeHead(err.status, headers);
  res.end(text);
}
