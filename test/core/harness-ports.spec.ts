/**
 * The redis harness (test/harness/redis-masters.ts) checks that the server answering on a new
 * master's port is that master: a port taken by another server between `freePort()` and the
 * start (another test file, a master restarted on its port) once made a Cluster test talk to a
 * plain server ("is not configured as a cluster node"). Such a start fails with PortTakenError,
 * and RedisMasters / LocalCluster start again on fresh ports.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { PortTakenError, RedisMaster, RedisMasters } from '../harness/redis-masters';

let masters: RedisMasters;

beforeAll(async () => {
  masters = await RedisMasters.start(1);
});

afterAll(async () => {
  await masters.stop();
});

it('refuses to start a master on a port another server already answers on', async () => {
  const intruder = new RedisMaster(masters.masters[0].port);
  try {
    await expect(intruder.start()).rejects.toBeInstanceOf(PortTakenError);
  } finally {
    await intruder.kill();
    intruder.cleanup();
  }
  // The server that owned the port is untouched.
  const [client] = masters.createClients();
  await RedisMasters.ready([client]);
  expect(await client.ping()).toBe('PONG');
});
