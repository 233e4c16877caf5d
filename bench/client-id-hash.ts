// What making a client's request id costs a router per copy of a write (coordinator/router/request-ids.ts,
// clientRequestId: two SHA-256 and one msgpack encoding of the op), side by side with encoding the op once (what
// the router does for every write anyway) and with a router's own id, in one process, 7 rounds, medians.
//
//   npm run build && node dist/bench/client-id-hash.js
import { loadavg } from 'node:os';
import { clientRequestId, RequestIds } from '../coordinator/router/request-ids.js';
import { encodeSliceOps, SliceOp, type WriteOp } from '../shared/protocol.js';
import { median } from './median.js';

const N = 20_000;
const update = (): WriteOp => [SliceOp.Update, 3, 17, 'k\u0000counter-00042', { base: { __name: 'counter-00042', id: 'counter-00042' }, actions: [], condition: null, oldOnFailure: false, returnValues: 'new' }, null];
const put = (): WriteOp => [SliceOp.Put, 3, 17, 'k\u0000item-00042', { id: 'item-00042', v: 'x'.repeat(100), n: 42, __name: 'item-00042', __mtime: 0 }, 160, null, null];
const nsPer = (f: (i: number) => unknown) => {
  const t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) f(i);
  return Number(process.hrtime.bigint() - t) / N;
};
const ids = new RequestIds();
for (const [name, make] of [['update', update], ['put', put]] as const) {
  const encode: number[] = [];
  const client: number[] = [];
  const router: number[] = [];
  for (let r = 0; r < 7; r++) {
    encode.push(nsPer(() => encodeSliceOps([make()])));
    client.push(nsPer((i) => clientRequestId(`6f1c2a3e-1111-4222-8333-4444555${String(i % 100000).padStart(5, '0')}`, '', make())));
    router.push(nsPer(() => ids.next()));
  }
  console.log(`${name}: encoding the op ${median(encode).toFixed(0)} ns, a client's id ${median(client).toFixed(0)} ns (${(median(client) / median(encode)).toFixed(2)}x), a router's id ${median(router).toFixed(0)} ns; load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
}
