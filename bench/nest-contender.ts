/**
 * Our library the way a Nest application uses it: `RedlockModule.forRoot()` in an application
 * context, locks taken with `RedlockService.using()` (lock context + automatic extension on,
 * as in the module's defaults), on the same shared ioredis clients as every other library.
 */
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { Redis } from 'ioredis';
import { RedlockModule, RedlockService } from '../lib';
import { BENCH_SETTINGS, RetryProfile, maxTtlFor } from './config';
import type { Contender, Held } from './contenders';

/**
 * `RedlockService.using()` in a Nest application context, with the module's full safety
 * defaults (fencing and restart quarantine on; see maxTtlFor() in config.ts).
 */
export async function oursNest(
  clients: Redis[],
  retry: RetryProfile,
  quick: boolean,
): Promise<Contender> {
  const maxTtl = maxTtlFor(quick);
  const app = await NestFactory.createApplicationContext(
    RedlockModule.forRoot({
      clients,
      ttl: BENCH_SETTINGS.ttl,
      retryCount: BENCH_SETTINGS.retryCount,
      retryDelay: retry.retryDelay,
      retryJitter: retry.retryJitter,
      driftFactor: BENCH_SETTINGS.driftFactor,
      ...(maxTtl === undefined ? {} : { maxTtl }),
      keyPrefix: 'bench:nest:',
    }),
    { logger: ['error'] },
  );
  const service = app.get(RedlockService);
  return {
    id: 'ours-nest',
    label: 'nestjs-redlock, RedlockService.using() in Nest',
    kind: 'ours',
    lock(resource) {
      // Turn using(routine) into lock/release: the routine holds until release() is called.
      return new Promise<Held>((resolveHeld, rejectHeld) => {
        let finish = (): void => undefined;
        const done: Promise<void> = service.using(
          resource,
          () =>
            new Promise<void>((resolveRoutine) => {
              finish = resolveRoutine;
              resolveHeld({
                release: () => {
                  finish();
                  return done;
                },
              });
            }),
        );
        done.catch(rejectHeld);
      });
    },
    close: () => app.close(),
  };
}
