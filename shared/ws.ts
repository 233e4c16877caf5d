// The ws package (WebSocket client and server), loaded with require, not import: what every process of a cluster
// starts with, on every thread that speaks WebSocket (a slice node's main thread and each of its worker threads, the
// coordinator, each router). ws's ESM entry (wrapper.mjs) imports each of its CommonJS files on its own, and Node 20
// runs every CommonJS file that an import reaches through its export lexer before loading it; by require they load
// as plain CommonJS. That doubled what loading ws cost: about 110 ms of CPU by import against 50 ms by require, per
// thread (a bare Node process: 100 ms), which a cluster's start pays on about 8 threads. The objects are the same
// (wrapper.mjs re-exports these very classes), and so are the types.
import { createRequire } from 'node:module';
import type * as Ws from 'ws';

const ws = createRequire(import.meta.url)('ws') as typeof import('ws');

export const WebSocket = ws.WebSocket;
export type WebSocket = Ws.WebSocket;
export const WebSocketServer = ws.WebSocketServer;
export type WebSocketServer = Ws.WebSocketServer;
