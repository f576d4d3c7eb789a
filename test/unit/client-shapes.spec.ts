/**
 * Which client instances the engine takes and which it refuses with a reason
 * (lib/core/redis/connection/adapt.ts), from real instances of every library, never connected.
 */
import IoRedis, { Cluster as IoCluster } from 'ioredis';
import IoValkey, { Cluster as ValkeyCluster } from 'iovalkey';
import { createClient, createClientPool, createCluster, createSentinel } from 'redis';
import { createClient as createClient5, createCluster as createCluster5 } from 'redis5';
import { clientShape, isRedlockClient, refusedShape } from '../../lib/core/redis/connection/adapt';
import { NodeRedisConnection } from '../../lib/core/redis/connection/node-redis';
import { RedisStore } from '../../lib/core/redis/store';
import { InvalidConfigurationError } from '../../lib/core/base/errors';

const io = new IoRedis({ lazyConnect: true });
const ioCluster = new IoCluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
const valkey = new IoValkey({ lazyConnect: true });
const valkeyCluster = new ValkeyCluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });

afterAll(() => {
  for (const c of [io, ioCluster, valkey, valkeyCluster]) c.disconnect();
});

it.each([
  ['ioredis Redis', io, 'ioredis'],
  ['ioredis Cluster', ioCluster, 'ioredis'],
  ['iovalkey Redis', valkey, 'ioredis'],
  ['iovalkey Cluster', valkeyCluster, 'ioredis'],
  ['node-redis 6 client', createClient(), 'node-redis'],
  ['node-redis 6 Cluster', createCluster({ rootNodes: [] }), 'node-redis-cluster'],
  ['node-redis 5 client', createClient5(), 'node-redis'],
  ['node-redis 5 Cluster', createCluster5({ rootNodes: [] }), 'node-redis-cluster'],
])('takes a %s', (_, client, shape) => {
  expect(clientShape(client)).toBe(shape);
  expect(isRedlockClient(client)).toBe(true);
});

it.each([
  ['client pool', createClientPool(), /pool.*createClient\(\)/],
  ['legacy-mode client', createClient().legacy(), /legacy-mode.*not client\.legacy\(\)/],
  [
    'Sentinel client',
    createSentinel({ name: 'm', sentinelRootNodes: [{ host: '127.0.0.1', port: 1 }] }),
    /Sentinel/,
  ],
])('refuses a node-redis %s, saying why and what to pass', (_, client, reason) => {
  expect(isRedlockClient(client)).toBe(false);
  expect(refusedShape(clientShape(client))).toMatch(reason);
  expect(() => RedisStore.checkClients([client])).toThrow(InvalidConfigurationError);
  expect(() => RedisStore.checkClients([client])).toThrow(reason);
});

it.each([
  ['options', { host: 'x', port: 1 }],
  ['a string', 'redis://x'],
  ['null', null],
  ['an object with sendCommand only', { sendCommand: () => undefined }],
])('does not take %s as a client', (_, value) => {
  expect(clientShape(value)).toBeUndefined();
  expect(isRedlockClient(value)).toBe(false);
});

it("removes each of a node-redis client's close listeners as often as it was added", () => {
  const client = createClient(); // never connected: an event emitter only
  const connection = new NodeRedisConnection(client, false);
  const listener = (): void => undefined;
  connection.on('close', listener);
  connection.on('close', listener);
  expect(client.listenerCount('reconnecting')).toBe(2);
  connection.off('close', listener);
  expect(client.listenerCount('reconnecting')).toBe(1);
  connection.off('close', listener);
  expect(client.listenerCount('reconnecting')).toBe(0);
  expect(client.listenerCount('end')).toBe(0);
});

it('turns the Buffers of a node-redis script reply into strings, and copies nothing else', async () => {
  const replies: unknown[] = [
    [Buffer.from('granted'), [1, Buffer.from('holder')], null],
    [1, ['a', 2], null],
  ];
  const client = {
    isOpen: true,
    isReady: true,
    options: {},
    sendCommand: () => Promise.resolve(replies.shift()),
  };
  const connection = new NodeRedisConnection(client, false);
  expect(await connection.evalsha('sha', ['k'], [])).toEqual(['granted', [1, 'holder'], null]);
  const plain = replies[0];
  expect(await connection.eval('return 1', ['k'], [])).toBe(plain);
});
