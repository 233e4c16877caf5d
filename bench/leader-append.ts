// A replicated slice leader's own cost of a put's Appends, in one thread and without the network: `--slices` leaders
// (followers 1 and 2, as at R=3) each propose in turn (one put per slice per turn, the shape of many slices under
// random keys), and every 32 puts (a batch) what they sent is encoded as a worker's flushPort encodes it. Prints ns
// per put: the record, the log append, the Appends built and encoded. `--dist DIR` runs another build's dist (e.g. a
// main worktree's), so that two builds compare side by side on a busy machine without the noise of three node
// processes (alternate them, several runs each).
//
//   npm run build && node dist/bench/leader-append.js [--dist DIR] [--slices 512] [--puts 200000]
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { intArg, readCommandLine } from '../shared/cli-args.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    dist: { default: '', help: "a build's dist folder (default: this one)" },
    slices: { default: '512', help: 'leaders, proposed to in turn' },
    puts: { default: '200000', help: 'puts measured (after a quarter as many unmeasured)' },
  },
  'usage: node dist/bench/leader-append.js [options]',
).values;
const SLICES = intArg('slices', args.slices, 1, 65536);
const PUTS = intArg('puts', args.puts, 1000, 100_000_000);
const dist = args.dist === '' ? resolve(import.meta.dirname, '..') : resolve(args.dist);
const replicaModule = (await import(pathToFileURL(`${dist}/slice-worker/replication/replica.js`).href)) as typeof import('../slice-worker/replication/replica.js');
const protocolModule = (await import(pathToFileURL(`${dist}/shared/protocol.js`).href)) as typeof import('../shared/protocol.js');
const { Replica, COORDINATOR, emptyDurable } = replicaModule;
type ReplicationMessage = import('../slice-worker/replication/replica.js').ReplicationMessage;

let clock = 0;
const syncs: (() => void)[] = [];
let out: ReplicationMessage[] = [];
const leaders = Array.from({ length: SLICES }, () => {
  const r = new Replica(
    0,
    {
      send: (_to, m) => out.push(m),
      disk: { write() {}, compacted() {}, sync: (done) => syncs.push(done) },
      apply() {},
      restore() {},
      snapshotState: () => new Uint8Array(0),
      now: () => clock,
    },
    emptyDurable(),
  );
  r.receive(COORDINATOR, { type: 'Prepare', term: 1 });
  for (const done of syncs.splice(0)) done();
  r.receive(COORDINATOR, { type: 'Lead', term: 1, followers: [1, 2], sets: [] });
  return r;
});
out = [];
const payload = new Uint8Array(120).fill(7);
let encoded = 0;
function run(n: number): void {
  for (let i = 0; i < n; i++) {
    leaders[i % SLICES].propose(payload);
    if (i % 32 === 31) {
      for (const m of out) encoded += protocolModule.encodeReplicationMessage(m).byteLength;
      out = [];
      syncs.length = 0; // never durable: no commit path, only the sends
      clock += 0.1;
    }
  }
}
run(Math.floor(PUTS / 4));
const started = process.hrtime.bigint();
run(PUTS);
const ns = Number(process.hrtime.bigint() - started) / PUTS;
console.log(`${dist}: ${ns.toFixed(0)} ns per put (${SLICES} slices, ${PUTS} puts, ${(encoded / (PUTS * 1.25)).toFixed(0)} bytes encoded per put)`);
