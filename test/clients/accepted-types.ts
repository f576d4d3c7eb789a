/**
 * Compiled by `npm run typecheck`, never run: instances of every client library the engine takes
 * (iovalkey, node-redis 6 and 5.0.0, standalone and Cluster, RESP2 and RESP3) are accepted by the
 * engine's and the module's types as they are, without a cast.
 */
import Valkey, { Cluster as VCluster } from 'iovalkey';
import { createClient, createCluster } from 'redis';
import { createClient as c5, createCluster as cc5 } from 'redis5';
import { Redlock } from '../../lib/core/redlock';
import { RedlockModule } from '../../lib';
export const iovalkey = new Redlock([new Valkey(), new VCluster([])]);
export const nodeRedis = new Redlock([createClient(), createCluster({ rootNodes: [] })]);
export const nodeRedis5 = new Redlock([c5(), cc5({ rootNodes: [] })]);
export const resp2 = new Redlock([createClient({ RESP: 2 })]);
export const module = RedlockModule.forRoot({
  clients: [createClient(), new Valkey(), 'redis://x'],
});
