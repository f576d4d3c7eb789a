import { Module } from '@nestjs/common';
import type { DynamicModule } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import type { RedlockClient } from '../core';
import { LockedInterceptor } from '../interceptors/locked.interceptor';
import type { RedlockModuleOptions, ResolvedRedlockModuleOptions } from '../interfaces';
import { LockedExplorer } from '../locked.explorer';
import { engineSettingsOf, normalizeOptions } from '../options';
import { REDLOCK_MODULE_OPTIONS } from '../redlock.constants';
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
  /** Register the module globally, like `RedlockModule.forRoot({ isGlobal })`. Default `false`. */
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
 * @example
 * ```ts
 * const moduleRef = await Test.createTestingModule({
 *   imports: [RedlockTestingModule.forRoot({ isGlobal: true }), OrdersModule],
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
      global: isGlobal === true,
      imports: [DiscoveryModule],
      providers: [
        {
          provide: REDLOCK_MODULE_OPTIONS,
          useFactory: (): ResolvedRedlockModuleOptions =>
            normalizeOptions({
              ...rest,
              clients: placeholderClients(),
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
          provide: RedlockService,
          useFactory: createTestingService,
          inject: [REDLOCK_MODULE_OPTIONS, InMemoryRedlock],
        },
        RedlockTestingController,
        LockedInterceptor,
        LockedExplorer,
        ...(exceptionFilter === false ? [] : [LOCK_ERROR_FILTER_PROVIDER]),
      ],
      exports: [
        RedlockService,
        LockedInterceptor,
        REDLOCK_MODULE_OPTIONS,
        RedlockTestingController,
        InMemoryRedlock,
      ],
    };
  }
}

/**
 * A real `RedlockService` whose engine is the in-memory one.
 *
 * `RedlockService` builds its engine from the `clients` option in its constructor and offers no
 * way to pass one in, so the service is constructed on inert placeholder clients (three, so
 * that the engine does not warn about too few masters; never contacted) and its `engine`
 * property — through which every operation goes — is then replaced.
 */
function createTestingService(
  options: ResolvedRedlockModuleOptions,
  engine: InMemoryRedlock,
): RedlockService {
  const service = new RedlockService(options);
  const placeholder = service.engine;
  Object.defineProperty(service, 'engine', {
    value: engine,
    enumerable: true,
    configurable: true,
    writable: false,
  });
  void placeholder.close();
  return service;
}

function placeholderClients(): RedlockClient[] {
  return [0, 1, 2].map((i) => {
    const unreachable = (): never => {
      throw new Error('RedlockTestingModule never talks to Redis');
    };
    const client = {
      isCluster: false,
      status: 'ready',
      options: { host: 'in-memory', port: i },
      evalsha: unreachable,
      eval: unreachable,
      on: () => client,
      off: () => client,
    };
    return client as unknown as RedlockClient;
  });
}
