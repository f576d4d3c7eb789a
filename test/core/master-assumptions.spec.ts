/**
 * The masters' assumptions checked by the engine after every (re)connect (issue 53, item 4;
 * lib/core/redis/masters/master-checks.ts), against real servers: one server listed twice (two
 * client instances, two names), a master configured to evict, and masters that answer but cannot
 * vote — a replica (of an unlisted master, and of a listed one), a Sentinel, an ACL user without
 * scripting. Each is refused or reported with its cause in the log, in health() and in the votes.
 */
import type { Redis } from 'ioredis';
import { createClient } from 'redis';
import { LockContendedError, NoQuorumError } from '../../lib/core/base/errors';
import type { NodeVote } from '../../lib/core/base/errors';
import { Redlock } from '../../lib/core/redlock';
import type { RedlockHealth } from '../../lib/core/base/types';
import type { RedlockClient } from '../../lib/core/base/settings';
import {
  RedisMaster,
  RedisMasters,
  closeClient,
  freePort,
  lockClients,
} from '../harness/redis-masters';
import type { RedisOptions } from 'ioredis';
import { RedisSentinel } from '../harness/sentinel';
import { SUITE_DEFAULTS } from '../harness/engines';
import { recordingLogger, uniqueResource, waitUntil } from '../harness/util';

const PASSWORD = 'assumptions-s3cret';

let masters: RedisMasters;
let probe: Redis[];
const clients: Redis[] = [];
const engines: Redlock[] = [];

beforeAll(async () => {
  masters = await RedisMasters.start(3, { extraArgs: ['--requirepass', PASSWORD] });
  probe = masters.createClients({ password: PASSWORD });
  await RedisMasters.ready(probe);
});

afterAll(async () => {
  await Promise.all(engines.map((e) => e.close()));
  await Promise.all(clients.map((c) => closeClient(c)));
  await masters.stop();
});

/** A new client to the server on `port` (closed after the file). */
function client(port: number, options: RedisOptions = {}): Redis {
  const [c] = lockClients([{ port }], { password: PASSWORD, ...options });
  clients.push(c);
  return c;
}

const port = (i: number): number => masters.masters[i].port;

/** An engine over `on` with a recording logger (closed after the file). */
function engine(on: RedlockClient[]): { rl: Redlock; logger: ReturnType<typeof recordingLogger> } {
  const logger = recordingLogger();
  const rl = new Redlock(on, { ...SUITE_DEFAULTS, logger });
  engines.push(rl);
  return { rl, logger };
}

/** Waits for a log line matching `pattern`; returns it. */
async function line(logger: { messages: string[] }, pattern: RegExp): Promise<string> {
  await waitUntil(() => logger.messages.some((m) => pattern.test(m)), 5000);
  return logger.messages.find((m) => pattern.test(m)) ?? '';
}

/**
 * `rl.health()` once `usable` is `n`: read again (for at most 5 s) while it is not — a master's
 * PING can miss the 250 ms request timeout on a loaded machine; the whole health in the error.
 */
async function healthWith(rl: Redlock, n: number): Promise<RedlockHealth> {
  let health = await rl.health();
  const deadline = Date.now() + 5000;
  while (health.usable !== n && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    health = await rl.health();
  }
  if (health.usable !== n)
    throw new Error(`usable ${health.usable}, not ${n}: ${JSON.stringify(health)}`);
  return health;
}

const noSecret = (logger: { messages: string[] }): void => {
  for (const m of logger.messages) expect(m).not.toContain(PASSWORD);
};

describe('one server listed twice', () => {
  it("three client instances to one server: the issue's case is no longer 'contended', the cause is in the votes", async () => {
    const { rl, logger } = engine([client(port(0)), client(port(0)), client(port(0))]);
    await line(logger, /clients\[1\].*cannot vote/);
    await line(logger, /clients\[2\].*cannot vote/);
    const err = await rl.acquire(uniqueResource('one-server')).catch((e: unknown) => e);
    // Without the check: LockContendedError, "locked by another holder" (itself, twice).
    expect(err).not.toBeInstanceOf(LockContendedError);
    expect(err).toBeInstanceOf(NoQuorumError);
    const votes = (err as NoQuorumError).votes;
    expect(['ok', 'pending', 'timeout']).toContain(votes[0].outcome); // decided by the two refusals
    for (const v of votes.slice(1)) {
      expect(v.outcome).toBe('error');
      expect(v.error).toMatch(/cannot vote: .*clients\[0\].*one server \(run_id [0-9a-f]+\)/);
    }
    const health = await healthWith(rl, 1);
    expect(health.available).toBe(false);
    expect(health.masters[0].unusable).toBeUndefined();
    expect(health.masters[1].unusable).toMatch(/clients\[0\].*clients\[1\].*one server/);
    noSecret(logger);
  });

  it('two instances to one server among three: the second is refused, naming both positions; locks work', async () => {
    const { rl, logger } = engine([client(port(0)), client(port(1)), client(port(0))]);
    const said = await line(logger, /clients\[2\].*cannot vote/);
    expect(said).toMatch(/Configuration error/);
    expect(said).toMatch(
      /clients\[0\] \(127\.0\.0\.1:\d+\) and clients\[2\] \(127\.0\.0\.1:\d+\) are one server/,
    );
    expect(said).toMatch(/list each master once/);
    const lock = await rl.acquire(uniqueResource('two-of-three'));
    await lock.release();
    const health = await healthWith(rl, 2);
    expect(health.masters.map((m) => m.unusable === undefined)).toEqual([true, true, false]);
    expect(health.available).toBe(true);
    // Said once, though every attempt is refused on it.
    for (let i = 0; i < 3; i++) await (await rl.acquire(uniqueResource('again'))).release();
    expect(logger.messages.filter((m) => /clients\[2\].*cannot vote/.test(m))).toHaveLength(1);
    noSecret(logger);
  });

  it('never counted, not even by the first acquire of a new engine (a shared lock would count it twice)', async () => {
    const on = [client(port(0)), client(port(1)), client(port(0))];
    await RedisMasters.ready(on);
    for (let i = 0; i < 10; i++) {
      const { rl } = engine(on); // its checks start now, the acquire right after
      let votes: readonly NodeVote[] = [];
      rl.observe((e) => {
        if (e.type === 'acquired') votes = e.votes;
      });
      const lock = await rl.acquire(uniqueResource('first'), { shared: true });
      await lock.release();
      expect(votes.slice(0, 2).map((v) => v.outcome)).toEqual(['ok', 'ok']);
      // Refused, or not yet answered when the two others decided: never a second vote of one server.
      expect(['error', 'pending']).toContain(votes[2].outcome);
      if (votes[2].outcome === 'error') expect(votes[2].error).toMatch(/cannot vote: .*one server/);
      await rl.close();
    }
  });

  it('the same server under two names (127.0.0.1 and localhost): refused', async () => {
    const { rl, logger } = engine([
      client(port(0)),
      client(port(1)),
      client(port(0), { host: 'localhost' }),
    ]);
    const said = await line(logger, /clients\[2\].*cannot vote/);
    expect(said).toMatch(/clients\[0\].*clients\[2\] \(localhost:\d+\) are one server/);
    expect((await rl.health()).masters[2].unusable).toMatch(/one server/);
    noSecret(logger);
  });
});

describe('one server through two client libraries', () => {
  it('a node-redis client and an ioredis client to one server: the later one refused (node-redis answers INFO and CONFIG too)', async () => {
    const nodeRedis = createClient({ url: `redis://:${PASSWORD}@127.0.0.1:${port(0)}` });
    nodeRedis.on('error', () => undefined);
    await nodeRedis.connect();
    const { rl, logger } = engine([nodeRedis, client(port(1)), client(port(0))]);
    try {
      const said = await line(logger, /clients\[2\].*cannot vote/);
      expect(said).toMatch(/clients\[0\].*clients\[2\].*are one server/);
      const health = await healthWith(rl, 2);
      expect(health.masters[0].unusable).toBeUndefined();
      noSecret(logger);
    } finally {
      await rl.close(); // before its client (closing again after the file is harmless)
      await nodeRedis.close();
    }
  });
});

describe('a master configured to evict', () => {
  it('is warned about once, naming it, its policy and noeviction; health shows the policy; it still votes', async () => {
    await probe[2].config('SET', 'maxmemory', '512mb');
    await probe[2].config('SET', 'maxmemory-policy', 'volatile-lru');
    // An evicting policy without a limit (maxmemory 0) never evicts: nothing to say.
    await probe[1].config('SET', 'maxmemory-policy', 'allkeys-lru');
    try {
      const { rl, logger } = engine([client(port(0)), client(port(1)), client(port(2))]);
      const name = rl.masterNames[2];
      const said = await line(logger, /may evict lock keys/);
      expect(said).toContain(name);
      expect(said).toContain('volatile-lru');
      expect(said).toMatch(/noeviction/);
      const health = await healthWith(rl, 3);
      expect(health.masters[2].evictionPolicy).toBe('volatile-lru');
      expect(health.masters[2].unusable).toBeUndefined();
      expect(health.masters[0].evictionPolicy).toBeUndefined();
      expect(health.masters[1].evictionPolicy).toBeUndefined();
      await (await rl.acquire(uniqueResource('evicting'))).release();
      expect(logger.messages.filter((m) => /may evict/.test(m))).toHaveLength(1);
    } finally {
      await probe[1].config('SET', 'maxmemory-policy', 'noeviction');
      await probe[2].config('SET', 'maxmemory-policy', 'noeviction');
      await probe[2].config('SET', 'maxmemory', '0');
    }
  });
});

describe('masters that answer but cannot vote', () => {
  it('an ACL user without scripting: unusable with NOPERM in the log, health and votes', async () => {
    const user = `noscript-${Date.now()}`;
    await probe[2].call(
      'ACL',
      'SETUSER',
      user,
      'on',
      '>user-pw-1',
      '~*',
      '&*',
      '+@all',
      '-@scripting',
    );
    try {
      const { rl, logger } = engine([
        client(port(0)),
        client(port(1)),
        client(port(2), { username: user, password: 'user-pw-1' }),
      ]);
      const said = await line(logger, /clients\[2\].*cannot vote/);
      expect(said).toMatch(/refuses the engine's scripts \(NOPERM/);
      expect(said).toMatch(/\+@scripting/);
      expect(said).not.toMatch(/Configuration error/);
      expect(said).not.toContain('user-pw-1');
      const health = await healthWith(rl, 2);
      expect(health.masters[2].unusable).toMatch(/NOPERM/);
      const lock = await rl.acquire(uniqueResource('noperm'));
      await lock.release();
      const alone = engine([client(port(2), { username: user, password: 'user-pw-1' })]).rl;
      const err = await alone.acquire(uniqueResource('alone')).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NoQuorumError);
      expect((err as NoQuorumError).votes[0].error).toMatch(/NOPERM/);
    } finally {
      await probe[2].call('ACL', 'DELUSER', user);
    }
  });

  it('while running: scripts refused, then allowed — after the reconnect the check lets it vote again, and says so', async () => {
    const user = `later-${Date.now()}`;
    await probe[2].call(
      'ACL',
      'SETUSER',
      user,
      'on',
      '>user-pw-3',
      '~*',
      '&*',
      '+@all',
      '-@scripting',
    );
    try {
      const { rl, logger } = engine([
        client(port(0)),
        client(port(1)),
        client(port(2), { username: user, password: 'user-pw-3' }),
      ]);
      await line(logger, /clients\[2\].*cannot vote.*NOPERM/);
      await probe[2].call('ACL', 'SETUSER', user, '+@scripting');
      await probe[2].call('CLIENT', 'KILL', 'USER', user); // the engine's client reconnects
      const said = await line(logger, /clients\[2\]\) can vote again/);
      expect(said).toMatch(/it was refused: it refuses the engine's scripts \(NOPERM/);
      const health = await healthWith(rl, 3);
      expect(health.masters[2].unusable).toBeUndefined();
      const lock = await rl.acquire(uniqueResource('allowed'));
      await lock.release();
    } finally {
      await probe[2].call('ACL', 'DELUSER', user);
    }
  });

  it('an ACL user without CONFIG: the eviction policy is unknown, said at debug level, nothing refused', async () => {
    const user = `noconfig-${Date.now()}`;
    await probe[1].call('ACL', 'SETUSER', user, 'on', '>user-pw-2', '~*', '&*', '+@all', '-config');
    try {
      const { rl, logger } = engine([
        client(port(0)),
        client(port(1), { username: user, password: 'user-pw-2' }),
        client(port(2)),
      ]);
      await line(
        logger,
        /clients\[1\]\): not checked: eviction policy unknown: CONFIG GET refused \(NOPERM/,
      );
      const health = await healthWith(rl, 3);
      expect(health.masters[1].unusable).toBeUndefined();
      expect(health.masters[1].unchecked?.join()).toMatch(/eviction policy unknown/);
      await (await rl.acquire(uniqueResource('noconfig'))).release();
    } finally {
      await probe[1].call('ACL', 'DELUSER', user);
    }
  });

  describe('a replica', () => {
    let replica: RedisMaster;
    beforeAll(async () => {
      replica = new RedisMaster(await freePort(), {
        extraArgs: [
          '--requirepass',
          PASSWORD,
          '--masterauth',
          PASSWORD,
          '--replicaof',
          '127.0.0.1',
          String(port(0)),
        ],
      });
      await replica.start();
    });
    afterAll(async () => {
      await replica.kill();
      replica.cleanup();
    });

    it('of an unlisted master: unusable (read-only replica), no configuration error', async () => {
      const { rl, logger } = engine([client(port(1)), client(port(2)), client(replica.port)]);
      const said = await line(logger, /clients\[2\].*cannot vote/);
      expect(said).toMatch(new RegExp(`read-only replica of 127\\.0\\.0\\.1:${port(0)}`));
      expect(said).not.toMatch(/Configuration error/);
      const health = await healthWith(rl, 2);
      expect(health.masters[2].reachable).toBe(true);
      expect(health.masters[2].unusable).toMatch(/read-only replica/);
      await (await rl.acquire(uniqueResource('replica'))).release();
    });

    it('of another listed master: refused as not independent, naming both positions', async () => {
      const { rl, logger } = engine([client(port(0)), client(port(1)), client(replica.port)]);
      // (Said as a plain replica first when its own check ends before clients[0]'s.)
      const said = await line(logger, /clients\[2\].*cannot vote.*Configuration error/);
      expect(said).toMatch(
        /Configuration error: clients\[2\] \(127\.0\.0\.1:\d+\) is a replica of clients\[0\] \(127\.0\.0\.1:\d+\): one data set, not independent/,
      );
      expect((await rl.health()).masters[2].unusable).toMatch(/replica/);
      noSecret(logger);
    });
  });

  describe('a Sentinel', () => {
    let sentinel: RedisSentinel;
    beforeAll(async () => {
      sentinel = await RedisSentinel.start(port(0));
    });
    afterAll(async () => {
      await sentinel.stop();
    });

    it('is unusable: a Sentinel keeps no keys', async () => {
      const { rl, logger } = engine([
        client(port(0)),
        client(port(1)),
        client(sentinel.port, { password: undefined }),
      ]);
      const said = await line(logger, /clients\[2\].*cannot vote/);
      expect(said).toMatch(/a Sentinel, not a Redis master/);
      const health = await healthWith(rl, 2);
      expect(health.masters[2].reachable).toBe(true);
      expect(health.masters.map((m) => m.unusable)).toEqual([
        undefined,
        undefined,
        expect.stringMatching(/Sentinel/),
      ]);
      expect(health.masters[2].unchecked).toBeUndefined();
      await (await rl.acquire(uniqueResource('sentinel'))).release();
    });
  });
});
