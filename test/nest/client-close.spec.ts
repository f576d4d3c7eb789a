/**
 * Closing the module leaves nothing that keeps the process alive ("A worker process
 * has failed to exit gracefully" in the integration project). ioredis arms a `disconnectTimeout`
 * timer on every disconnect, also of a client whose socket is already gone (its master is down),
 * and nothing clears it: the module's clients kept the process alive for 500 ms after close().
 */
import 'reflect-metadata';
import { Test } from '@nestjs/testing';
import type { Redis } from 'ioredis';
import { RedlockModule } from '../../lib/redlock.module';
import { RedlockService } from '../../lib/redlock.service';
import { RedisMasters } from '../harness/redis-masters';
import { waitUntil } from '../harness/util';

let masters: RedisMasters;

beforeAll(async () => {
  masters = await RedisMasters.start(3);
});
afterAll(() => masters.stop());

/** Timers and sockets keeping the event loop alive (unref'd ones do not count). */
function keepingAlive(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const type of process.getActiveResourcesInfo()) {
    if (type === 'Timeout' || type === 'TCPSocketWrap') counts[type] = (counts[type] ?? 0) + 1;
  }
  return counts;
}

const silent = { log: () => undefined, error: () => undefined, warn: () => undefined };

/** Lets pending socket events and zero-delay timers run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  await new Promise((r) => setTimeout(r, 20));
}

it('leaves no timer or socket alive after close, with a master down', async () => {
  await settle(); // the harness's readiness probes are closed
  const before = keepingAlive();
  const moduleRef = await Test.createTestingModule({
    imports: [
      RedlockModule.forRoot({
        // A long disconnectTimeout makes a timer left behind by close() easy to see.
        clients: masters.masters.map((m) => ({
          host: '127.0.0.1',
          port: m.port,
          disconnectTimeout: 5000,
        })),
        quarantine: false,
        requestTimeout: 250,
      }),
    ],
  })
    .setLogger(silent)
    .compile();
  await moduleRef.init();
  const clients = moduleRef.get(RedlockService).clients as Redis[];
  await RedisMasters.ready(clients);
  // Master 2 goes down: its client waits to reconnect (between attempts), with no socket.
  await masters.masters[2].kill();
  await waitUntil(() => clients[2].status === 'reconnecting');
  await moduleRef.close();
  expect(clients.slice(0, 2).map((c) => c.status)).toEqual(['end', 'end']);
  // Whatever the close left must be gone well before ioredis's disconnectTimeout: a transient
  // callback may still be due, a 5 s timer may not.
  const closed = Date.now();
  const clean = (): boolean => {
    const now = keepingAlive();
    return (
      (now.Timeout ?? 0) <= (before.Timeout ?? 0) &&
      (now.TCPSocketWrap ?? 0) <= (before.TCPSocketWrap ?? 0)
    );
  };
  while (!clean() && Date.now() - closed < 400) await new Promise((r) => setTimeout(r, 10));
  // On failure: what is still alive, against `before`.
  expect(clean() ? 'clean' : { before, after: keepingAlive() }).toBe('clean');
  await masters.masters[2].start();
});
