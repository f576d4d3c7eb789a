import { Logger, Module } from '@nestjs/common';
import type { DynamicModule } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { LockedInterceptor } from '../interceptors/locked.interceptor';
import type { RedlockModuleOptions, ResolvedRedlockModuleOptions } from '../interfaces';
import { LockedExplorer } from '../locked.explorer';
import { LockedRunner } from '../locked/locked-runner';
import { engineSettingsOf, normalizeInMemoryOptions } from '../options';
import { observeEngine } from '../redlock.backend';
import type { RedlockBackend } from '../redlock.backend';
import {
  REDLOCK_BACKEND,
  REDLOCK_LOGGER_CONTEXT,
  REDLOCK_MODULE_OPTIONS,
} from '../redlock.constants';
import { LOCK_ERROR_FILTER_PROVIDER } from '../redlock.module-definition';
import { RedlockService } from '../redlock.service';
import { InMemoryRedlock } from './in-memory-redlock';
import { RedlockTestingController } from './redlock-testing.controller';

/**
 * Options of {@link RedlockTestingModule.forRoot}: the module options that mean something
 * without Redis (`clients` and the per-master settings are not used).
 */
export type RedlockTestingModuleOptions = Omit<
  RedlockModuleOptions,
  'clients' | 'clientOptions' | 'quorum' | 'quarantine' | 'handoff' | 'requestTimeout'
> & {
  /**
   * Register the module globally, so that every feature module of the test resolves
   * `RedlockService` (as with `RedlockModule.forRoot({ isGlobal: true })`, the usual set-up it
   * stands in for). Default `true`; `false` scopes it to the modules that import it.
   */
  isGlobal?: boolean;
  /** Register the lock error filter, like `RedlockModule.forRoot({ exceptionFilter })`. Default `true`. */
  exceptionFilter?: boolean;
};

/**
 * A drop-in replacement of `RedlockModule` for tests, with no Redis: it provides the same
 * `RedlockService` token (so application providers inject it unchanged), the same
 * `LockedInterceptor` and `@Locked()` explorer, and the same errors — backed by an
 * {@link InMemoryRedlock} with real exclusion and ttl expiry. Inject
 * {@link RedlockTestingController} to hold resources, lose locks or simulate an outage.
 *
 * Locks are per module instance: two apps in one test do not see each other's locks (use real
 * masters for multi-instance tests).
 *
 * A `@Locked()` handler called directly in a unit test (no HTTP) locks too: its `{params.id}`,
 * `{query.x}`, `{body.x}`, `{data.x}` placeholders are read from the arguments that `@Param()`,
 * `@Query()`, `@Body()`, `@Req()`, `@Payload()` / `@MessageBody()` map (see
 * docs/testing-locked-methods.md).
 *
 * @example
 * ```ts
 * const moduleRef = await Test.createTestingModule({
 *   imports: [RedlockTestingModule.forRoot(), OrdersModule],
 * }).compile();
 * // or swap the app's lock module; Nest matches overrides by reference, so keep the object:
 * //   export const LOCKS = RedlockModule.forRoot({ clients: [...] });   // imported by AppModule
 * //   Test.createTestingModule({ imports: [AppModule] })
 * //     .overrideModule(LOCKS).useModule(RedlockTestingModule.forRoot())
 * ```
 */
@Module({})
export class RedlockTestingModule {
  /** The testing module with `options` (validated like `RedlockModule.forRoot`). */
  static forRoot(options: RedlockTestingModuleOptions = {}): DynamicModule {
    const { isGlobal, exceptionFilter, ...rest } = options;
    return {
      module: RedlockTestingModule,
      global: isGlobal !== false,
      imports: [DiscoveryModule],
      providers: [
        {
          provide: REDLOCK_MODULE_OPTIONS,
          useFactory: (): ResolvedRedlockModuleOptions =>
            normalizeInMemoryOptions({
              ...rest,
              // Per-master settings, meaningless in memory; requestTimeout must stay below ttl.
              quarantine: false,
              handoff: false,
              requestTimeout: 1,
            }),
        },
        {
          provide: InMemoryRedlock,
          useFactory: (o: ResolvedRedlockModuleOptions): InMemoryRedlock => {
            const {
              quorum: _quorum,
              quarantine: _quarantine,
              handoff: _handoff,
              requestTimeout: _requestTimeout,
              ...settings
            } = engineSettingsOf(o);
            return new InMemoryRedlock(settings);
          },
          inject: [REDLOCK_MODULE_OPTIONS],
        },
        {
          provide: REDLOCK_BACKEND,
          useFactory: inMemoryBackend,
          inject: [InMemoryRedlock, REDLOCK_MODULE_OPTIONS],
        },
        LockedRunner,
        RedlockService,
        RedlockTestingController,
        LockedInterceptor,
        LockedExplorer,
        ...(exceptionFilter === false ? [] : [LOCK_ERROR_FILTER_PROVIDER]),
      ],
      exports: [
        RedlockService,
        LockedRunner,
        LockedInterceptor,
        REDLOCK_MODULE_OPTIONS,
        RedlockTestingController,
        InMemoryRedlock,
      ],
    };
  }
}

/** The Nest layer's backend on the in-memory engine: no connections, the module's observers. */
function inMemoryBackend(
  engine: InMemoryRedlock,
  options: ResolvedRedlockModuleOptions,
): RedlockBackend {
  const unobserve = observeEngine(engine, options, new Logger(REDLOCK_LOGGER_CONTEXT));
  return {
    engine,
    clients: [],
    names: engine.masterNames,
    redact: (text) => text,
    close: async () => {
      try {
        await engine.close();
      } finally {
        unobserve();
      }
    },
  };
}
