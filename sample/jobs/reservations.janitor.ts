import { Inject, Injectable, Logger } from '@nestjs/common';
import { Cron, CronExpression } from '@nestjs/schedule';
import { Locked } from '../../lib';
import { OrdersService } from '../orders/orders.service';
import { SAMPLE_OPTIONS, type ResolvedSampleOptions } from '../sample.options';
import { SampleStore } from '../store/sample-store';
import { pause } from '../orders/order.model';

/**
 * Schedule of the janitor: env `SAMPLE_JANITOR_CRON` (read when this file is loaded), default
 * every 10 seconds. `'* * * * * *'` runs it every second.
 */
export const JANITOR_CRON = process.env.SAMPLE_JANITOR_CRON || CronExpression.EVERY_10_SECONDS;

/** One janitor run, as recorded in the shared store (list `<namespace>janitor:runs`). */
export interface JanitorRun {
  readonly instance: string;
  /** The cron tick (whole second of the start) the run belongs to. */
  readonly tick: number;
  readonly expired: number;
}

/**
 * Expires stale reservations. Every instance of the app schedules it; `@Locked(...,
 * { onLocked: 'skip' })` makes exactly one of them run it per tick — the others find the lock
 * held and skip (the method resolves `undefined` without running).
 *
 * Limit of this pattern: the lock only spans the run. An instance whose timer fires after the
 * winner already finished *and released* would run the same tick again. The instances' timers
 * fire within milliseconds of each other (same cron, synchronized clocks), so a run keeps the
 * lock at least `janitorMinRunMs`; where a duplicate run must be impossible, make the job
 * idempotent per tick as well (e.g. record the tick and skip ticks already done).
 */
@Injectable()
export class ReservationsJanitor {
  private readonly logger = new Logger(ReservationsJanitor.name);

  constructor(
    private readonly orders: OrdersService,
    private readonly store: SampleStore,
    @Inject(SAMPLE_OPTIONS) private readonly options: ResolvedSampleOptions,
  ) {}

  /** One sweep: expires reservations older than `reservationTtlMs`. */
  @Cron(JANITOR_CRON, { name: 'expire-reservations' })
  @Locked('jobs:expire-reservations', { onLocked: 'skip' })
  async expireStaleReservations(): Promise<JanitorRun> {
    const started = Date.now();
    const { reservationTtlMs, janitorMinRunMs } = this.options.timings;
    let expired = 0;
    for (const id of await this.orders.ids()) {
      // Cheap unlocked check first; `expire` locks the order and checks again under the lock.
      const order = await this.orders.get(id).catch(() => undefined);
      if (order?.status !== 'reserved' || started - order.createdAt < reservationTtlMs) continue;
      if (await this.orders.expire(id, reservationTtlMs)) expired++;
    }
    const run: JanitorRun = {
      instance: this.options.instanceId,
      tick: Math.floor(started / 1000),
      expired,
    };
    await this.store.push(`${this.options.namespace}janitor:runs`, JSON.stringify(run));
    if (expired > 0) this.logger.log(`expired ${expired} stale reservation(s)`);
    await pause(Math.max(0, janitorMinRunMs - (Date.now() - started)));
    return run;
  }

  /** Every recorded run, oldest first (all instances). */
  async runs(): Promise<JanitorRun[]> {
    const raw = await this.store.list(`${this.options.namespace}janitor:runs`);
    return raw.map((r) => JSON.parse(r) as JanitorRun);
  }
}
