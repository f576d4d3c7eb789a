import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
import type { HealthCheckResult } from '@nestjs/terminus';
import { RedlockHealthIndicator } from '../../lib/health';

/**
 * Readiness for a load balancer (`@nestjs/terminus` + `RedlockHealthIndicator`; in an
 * application, import it from 'nestjs-redlock/health'):
 * - 200, `locks: { status: 'up', usable, quorum, masters: [...] }` while a quorum of masters is
 *   reachable (and out of restart quarantine);
 * - 503, `locks: { status: 'down', ... }` when it is not;
 * - 503 with `draining: true` once the app is shutting down (no new locks are taken, so traffic
 *   should go elsewhere); terminus then also reports `status: 'shutting_down'`.
 * Master addresses are redacted (no passwords).
 */
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly redlockHealth: RedlockHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check(): Promise<HealthCheckResult> {
    return this.health.check([() => this.redlockHealth.isHealthy('locks')]);
  }
}
