import { Inject, Injectable, Logger } from '@nestjs/common';
import { Cron, CronExpression } from '@nestjs/schedule';
import { Locked } from '../../lib';
import { OrdersService } from '../orders/orders.service';
import { SAMPLE_OPTIONS, type ResolvedSampleOptions } from '../sample.options';
import { SampleStore } from '../store/sample-store';

/**
 * Schedule of the janitor: env `SAMPLE_JANITOR_CRON` (read when this file is loaded), default
 * every 10 seconds. `'* * * * * *'` runs it every second.
 */
export const JANITOR_CRON = process.env.SAMPLE_JANITOR_CRON || CronExpression.EVERY_10_SECONDS;

/**
 * How long a run keeps the job locked at least (ms after the grant), however fast it was: longer
 * than the instances' timers drift apart (milliseconds), shorter than the shortest schedule the
 * sample is run with (every second in the e2e tests).
 */
export const JANITOR_LOCK_AT_LEAST_FOR = 500;

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
 * A lock that only spans the run would let an instance whose timer fires after the winner
 * already finished *and released* run the same tick again. `lockAtLeastFor` closes that gap: a
 * run that ends sooner leaves the resource locked until {@link JANITOR_LOCK_AT_LEAST_FOR} ms
 * after its grant (the release shortens the keys' TTL instead of deleting them). Where a
 * duplicate run must be impossible whatever the clocks do, make the job idempotent per tick as
 * well (e.g. record the tick and skip ticks already done).
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
  @Locked('jobs:expire-reservations', {
    onLocked: 'skip',
    lockAtLeastFor: JANITOR_LOCK_AT_LEAST_FOR,
  })
  async expireStaleReservations(): Promise<JanitorRun> {
    const started = Date.now();
    const { reservationTtlMs } = this.options.timings;
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
    return run;
  }

  /** Every recorded run, oldest first (all instances). */
  async runs(): Promise<JanitorRun[]> {
    const raw = await this.store.list(`${this.options.namespace}janitor:runs`);
    return raw.map((r) => JSON.parse(r) as JanitorRun);
  }
}
