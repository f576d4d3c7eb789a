import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { LockedInterceptor } from './interceptors/locked.interceptor';
import type { RedlockModuleOptions } from './interfaces';
import { LockedExplorer } from './locked.explorer';
import { normalizeOptions } from './options';
import { ConfigurableModuleClass } from './redlock.module-definition';
import { LockedRunner } from './locked/locked-runner';
import { redisBackend } from './redlock.backend';
import { REDLOCK_BACKEND, REDLOCK_MODULE_OPTIONS, REDLOCK_RAW_OPTIONS } from './redlock.constants';
import { RedlockService } from './redlock.service';

/**
 * Distributed locks (Redlock on N independent Redis masters) for Nest.
 *
 * @example
 * ```ts
 * RedlockModule.forRoot({ clients: ['redis://a:6379', 'redis://b:6379', 'redis://c:6379'], isGlobal: true })
 *
 * RedlockModule.forRootAsync({
 *   imports: [ConfigModule],
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => ({ clients: config.get('REDLOCK_URLS').split(',') }),
 *   isGlobal: true,
 * })
 * ```
 * Provides {@link RedlockService}, {@link LockedInterceptor} and the resolved options
 * (`REDLOCK_MODULE_OPTIONS`).
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    {
      provide: REDLOCK_MODULE_OPTIONS,
      useFactory: (options: RedlockModuleOptions) => normalizeOptions(options),
      inject: [REDLOCK_RAW_OPTIONS],
    },
    {
      provide: REDLOCK_BACKEND,
      useFactory: redisBackend,
      inject: [REDLOCK_MODULE_OPTIONS],
    },
    LockedRunner,
    RedlockService,
    LockedInterceptor,
    LockedExplorer,
  ],
  exports: [RedlockService, LockedRunner, LockedInterceptor, REDLOCK_MODULE_OPTIONS],
})
export class RedlockModule extends ConfigurableModuleClass {}
