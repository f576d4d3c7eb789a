/** The shared client suite (client-suite.ts) on node-redis-resp2 clients (test/harness/client-kinds.ts). */
import { kindNamed } from '../harness/client-kinds';
import { clientSuite } from './client-suite';

clientSuite(kindNamed('node-redis-resp2'));
