/**
 * `close()` while an acquire is on the wire: the grant that arrives after shutdown
 * began is never handed out — the acquire rejects with ShuttingDownError — and its keys are
 * deleted before `close()` resolves. Replies are held back by TCP delay proxies so that the
 * attempt is really in flight (its keys already set on the masters) when `close()` starts.
 */
import { ShuttingDownError } from '../../lib/core/base/errors';
import { Redlock } from '../../lib/core/redlock';
import { proxiedClients } from '../harness/delay-proxy';
import { SUITE_DEFAULTS, useMasters } from '../harness/engines';
import { uniqueResource, valuesOn, waitUntil } from '../harness/util';

const suite = useMasters(3);

it('rejects a grant that arrives during close() and deletes its keys before close() resolves', async () => {
  const { proxies, clients, close } = await proxiedClients(
    suite.masters.masters.map((m) => m.port),
  );
  try {
    const rl = new Redlock(clients, { ...SUITE_DEFAULTS, requestTimeout: 2000, ttl: 10_000 });
    // Warm up (scripts loaded), then hold every reply back for a while.
    await (await rl.acquire(uniqueResource('warm'))).release();
    for (const p of proxies) p.setDelays({ down: 300 });
    const resource = uniqueResource('inflight');
    const key = rl.keyOf(resource);
    const acquiring = rl.acquire(resource).then(
      () => 'granted',
      (err: unknown) => err,
    );
    // The request reached every master (keys set); the replies are still on their way.
    await waitUntil(async () => (await valuesOn(suite.probe, key)).every((v) => v !== null), 5000);
    await rl.close();
    expect(await valuesOn(suite.probe, key)).toEqual([null, null, null]);
    const outcome = await acquiring;
    expect(outcome).toBeInstanceOf(ShuttingDownError);
    expect(rl.heldLocks).toEqual([]);
  } finally {
    await close();
  }
});
