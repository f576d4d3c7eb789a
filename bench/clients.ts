/**
 * ioredis clients for the benchmark's child processes, with the same lock-friendly settings as
 * the harness's `RedisMasters.createClients()` (no offline queue, no per-request retries).
 */
import Redis from 'ioredis';

/** One client per `redis://127.0.0.1:port` URL; resolves once all are ready. */
export async function benchClients(urls: readonly string[], timeoutMs = 10_000): Promise<Redis[]> {
  const clients = urls.map((url) => {
    const c = new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 50,
      disconnectTimeout: 100,
    });
    c.on('error', () => undefined);
    return c;
  });
  const deadline = Date.now() + timeoutMs;
  while (!clients.every((c) => c.status === 'ready')) {
    if (Date.now() > deadline) throw new Error('clients not ready');
    await new Promise((r) => setTimeout(r, 10));
  }
  return clients;
}

/** Master URLs passed to a child process in `BENCH_REDIS_URLS`. */
export function urlsFromEnv(): string[] {
  const urls = (process.env.BENCH_REDIS_URLS ?? '').split(',').filter(Boolean);
  if (urls.length === 0) throw new Error('BENCH_REDIS_URLS is not set');
  return urls;
}
