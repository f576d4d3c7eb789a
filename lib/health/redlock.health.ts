import { Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import type { HealthIndicatorResult } from '@nestjs/terminus';
import { RedlockService } from '../redlock.service';

/**
 * `@nestjs/terminus` health indicator for the lock service: each master's reachability, latency
 * and restart quarantine, why it cannot vote (`unusable`: a replica, a Sentinel, scripts refused,
 * listed twice) and whether it may evict lock keys (`evictionPolicy`), and whether a quorum is available — `down` when it is not, and while
 * the application shuts down (`draining: true`: no new locks are taken, so a load balancer should
 * stop routing here).
 * Addresses are redacted (no passwords). Import from `nestjs-redlock/health` (needs the optional
 * peer dependency `@nestjs/terminus`).
 *
 * @example
 * ```ts
 * @Get('health')
 * @HealthCheck()
 * check() {
 *   return this.health.check([() => this.redlock.isHealthy('locks')]);
 * }
 * ```
 */
@Injectable()
export class RedlockHealthIndicator {
  constructor(
    private readonly redlock: RedlockService,
    private readonly indicators: HealthIndicatorService,
  ) {}

  /** Checks the masters; `up` while a quorum of usable masters exists and no shutdown is under way. */
  async isHealthy<const Key extends string = 'redlock'>(
    key: Key = 'redlock' as Key,
  ): Promise<HealthIndicatorResult<Key>> {
    const session = this.indicators.check(key);
    const health = await this.redlock.engine.health();
    const details = {
      quorum: health.quorum,
      usable: health.usable,
      ...(health.draining ? { draining: true } : {}),
      masters: health.masters.map((m) => ({
        name: m.name,
        reachable: m.reachable,
        latency: m.latency,
        quarantined: m.quarantined,
        ...(m.quarantineRemaining !== undefined
          ? { quarantineRemaining: m.quarantineRemaining }
          : {}),
        ...(m.unusable !== undefined ? { unusable: m.unusable } : {}),
        ...(m.evictionPolicy !== undefined ? { evictionPolicy: m.evictionPolicy } : {}),
        ...(m.error ? { error: m.error } : {}),
      })),
    };
    return health.available ? session.up(details) : session.down(details);
  }
}
