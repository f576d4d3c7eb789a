import { Injectable, Logger, Optional } from '@nestjs/common';
import type { OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { ApplicationConfig, DiscoveryService, MetadataScanner } from '@nestjs/core';
import { InvalidConfigurationError } from './core';
import {
  bindLockedClass,
  bindLockedInstance,
  isLockedWrapper,
  unbindLockedClass,
} from './locked/locked-method';
import type { LockedMetadata } from './interfaces';
import { checkLockedOptions } from './options';
import { LOCKED_METADATA, REDLOCK_LOGGER_CONTEXT } from './redlock.constants';
import { missingRouteParamMessage, nonStaticProviderMessage } from './redlock.messages';
import { missingRouteParams, outerRoutePaths } from './locked/route-params';
import { LockedRunner } from './locked/locked-runner';
import { RedlockService } from './redlock.service';

/**
 * Finds the `@Locked()` methods of every controller and provider at `onModuleInit`
 * (`DiscoveryService` + `MetadataScanner`, like @nestjs/schedule) and binds their instances to
 * this module's {@link RedlockService}, so that calls that do not go through the interceptor
 * (`@Cron` jobs, queue consumers, service-to-service calls) lock too.
 *
 * The methods themselves were wrapped by `@Locked()` when the class was defined: wrapping at
 * init time would come too late for modules whose own `onModuleInit` captures method references
 * first — @nestjs/schedule is global, so its hooks run before ours.
 *
 * Also checks each method's `ttl` against the module's `maxTtl`, failing bootstrap with an
 * `InvalidConfigurationError` naming the method.
 */
@Injectable()
export class LockedExplorer implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger(REDLOCK_LOGGER_CONTEXT);
  private readonly boundClasses = new Set<object>();

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly redlock: RedlockService,
    private readonly runner: LockedRunner,
    /** The application's settings (its global prefix), when Nest provides them. */
    @Optional() private readonly appConfig?: ApplicationConfig,
  ) {}

  /**
   * Binds every instance that has `@Locked()` methods. An invalid method option fails the
   * bootstrap — after closing the module's clients, which Nest's shutdown hooks would not do
   * for an application that never finished its init.
   */
  async onModuleInit(): Promise<void> {
    try {
      this.explore();
    } catch (err) {
      await this.redlock.onApplicationShutdown();
      throw err;
    }
  }

  private explore(): void {
    const controllers = new Set(this.discovery.getControllers());
    for (const wrapper of [...controllers, ...this.discovery.getProviders()]) {
      const instance: unknown = wrapper.instance;
      if (!instance || typeof instance !== 'object') continue;
      const proto: unknown = Object.getPrototypeOf(instance);
      if (!proto || proto === Object.prototype) continue;
      const methods = this.scanner
        .getAllMethodNames(proto)
        .filter((name) => isLockedWrapper((instance as Record<string, unknown>)[name]));
      if (methods.length === 0) continue;
      const className = (instance.constructor as { name?: string }).name ?? 'anonymous';
      for (const name of methods) {
        const fn = (instance as Record<string, unknown>)[name] as object;
        const metadata = Reflect.getMetadata(LOCKED_METADATA, fn) as LockedMetadata | undefined;
        if (metadata) {
          checkLockedOptions(
            metadata.options,
            `${className}.${name}`,
            this.redlock.options,
            (field, problem) => new InvalidConfigurationError(field, problem),
          );
          if (controllers.has(wrapper))
            this.checkRouteParams(wrapper, metadata, fn, className, name);
        }
      }
      if (wrapper.isDependencyTreeStatic()) {
        bindLockedInstance(instance, this.runner);
      } else {
        // Request-scoped / transient: instances are created later, bind their class.
        bindLockedClass(instance.constructor, this.runner);
        this.boundClasses.add(instance.constructor);
        if (!controllers.has(wrapper)) {
          for (const name of methods) {
            this.logger.debug(nonStaticProviderMessage(`${className}.${name}`));
          }
        }
      }
    }
  }

  /**
   * Warns (once, at startup) about a `{params.x}` placeholder of an HTTP handler whose route has
   * no parameter `x`: every request would answer 400. A warning, not a refusal: an interceptor
   * subclass may fill `params` from elsewhere (`LockedInterceptor.createCallContext`).
   */
  private checkRouteParams(
    wrapper: { host?: { metatype?: unknown } },
    metadata: LockedMetadata,
    handler: object,
    className: string,
    method: string,
  ): void {
    const outer = outerRoutePaths(this.appConfig?.getGlobalPrefix(), wrapper.host?.metatype);
    const cls = (wrapper as { metatype?: unknown }).metatype;
    if (typeof cls !== 'function') return;
    for (const missing of missingRouteParams(metadata.resources, cls, handler, outer)) {
      this.logger.warn(missingRouteParamMessage(`${className}.${method}`, missing));
    }
  }

  /** Drops the class bindings made by this module instance. */
  onModuleDestroy(): void {
    for (const cls of this.boundClasses) unbindLockedClass(cls, this.runner);
    this.boundClasses.clear();
  }
}
