// A client of several routers sends a request that one router refused WrongOwner (its own tries spent) to each other
// address once, and never to that router again, also when it sends a write again (writeRetries: client.ts resending,
// requestOnce). Two WebSocket servers on 127.0.0.1 answer the client protocol as routers do at the end of their tries,
// one WrongOwner, the other Unavailable not applied, and count the requests each got. The process path (routers that
// lose their coordinator) is covered by routers.test.ts.
import { afterEach, describe, expect, it } from 'vitest';
import { KeysliceClient } from '../coordinator/client/client.js';
import { KeysliceError } from '../shared/errors.js';
import { RESULT_ERROR, type ClientResponseFrame } from '../shared/protocol.js';
import { fakeRouter, type FakeRouter } from './fake-router.js';

const servers: FakeRouter[] = [];
const clients: KeysliceClient[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) await c.close();
  for (const s of servers.splice(0)) await s.close();
});

/** A router that answers every request with `answer(id)`. */
async function router(answer: (id: number) => ClientResponseFrame): Promise<FakeRouter> {
  const r = await fakeRouter((request) => answer(request[0]));
  servers.push(r);
  return r;
}

describe('a client of two routers', () => {
  it('sends a write that one refused WrongOwner to it no more, whatever the other answers and however often it resends', async () => {
    const refusing = await router((id) => [id, RESULT_ERROR, 'WrongOwner', 'slice 3: refused WrongOwner 40 times in 5000 ms; retry later']);
    const down = await router((id) => [id, RESULT_ERROR, 'Unavailable', 'slice 3 has no serving leader; retry later', { notApplied: true }]);
    const retries = 4;
    const c = await KeysliceClient.connect([refusing.url, down.url], { writeRetries: retries, requestTimeoutMs: 5_000 });
    clients.push(c);
    for (let k = 0; k < 2; k++) {
      // Either router first (the client takes its connections in turn): the refusing one is asked once.
      refusing.requests.length = down.requests.length = 0;
      const err = await c.putItem('t', { id: `k${k}` }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(KeysliceError);
      expect((err as KeysliceError).code).toBe('Unavailable');
      expect(refusing.requests).toHaveLength(1);
      expect(down.requests).toHaveLength(retries + 1);
    }
  });

  it('fails a write that every router refused WrongOwner without sending it again', async () => {
    const refuse = (id: number): ClientResponseFrame => [id, RESULT_ERROR, 'WrongOwner', 'slice 3: refused WrongOwner 40 times in 5000 ms; retry later'];
    const routers = [await router(refuse), await router(refuse)];
    const c = await KeysliceClient.connect(routers.map((r) => r.url), { writeRetries: 4 });
    clients.push(c);
    const err = await c.putItem('t', { id: 'k' }).then(
      () => null,
      (e: unknown) => e,
    );
    expect((err as KeysliceError).code).toBe('WrongOwner');
    expect(routers.map((r) => r.requests.length)).toEqual([1, 1]);
  });
});
