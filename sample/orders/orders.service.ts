import { randomUUID } from 'node:crypto';
import { ConflictException, Inject, Injectable, NotFoundException } from '@nestjs/common';
import { Observable, concatMap, from, interval, map, take } from 'rxjs';
import { LockContext, Locked, RedlockService } from '../../lib';
import { SAMPLE_OPTIONS, type ResolvedSampleOptions } from '../sample.options';
import { SampleStore } from '../store/sample-store';
import { Order, pause } from './order.model';
import { PaymentGateway } from './payment.gateway';
import { StockService } from './stock.service';

/** Steps streamed by the fulfilment (SSE) endpoint. */
export const FULFILMENT_STEPS = ['picking', 'packing', 'labelling', 'handed-over'] as const;

/** One fulfilment progress event. */
export interface FulfilmentEvent {
  readonly order: string;
  readonly step: (typeof FULFILMENT_STEPS)[number];
}

/**
 * Orders. Every update is a read-modify-write of the order document; the callers hold the
 * order's lock (`order:<id>`) — the HTTP, RPC and WebSocket handlers through `@Locked()`, the
 * janitor and `cancel` through `@Locked()` on the methods below.
 */
@Injectable()
export class OrdersService {
  constructor(
    private readonly store: SampleStore,
    private readonly stock: StockService,
    private readonly payments: PaymentGateway,
    private readonly redlock: RedlockService,
    @Inject(SAMPLE_OPTIONS) private readonly options: ResolvedSampleOptions,
  ) {}

  /** Reserves `qty` units of `sku` (the stock lock is taken by `StockService.take`). */
  async create(sku: string, qty: number): Promise<Order> {
    await this.stock.take(sku, qty);
    const order: Order = {
      id: randomUUID().slice(0, 8),
      sku,
      qty,
      status: 'reserved',
      createdAt: Date.now(),
      notes: [],
    };
    await this.save(order);
    return order;
  }

  /** The order `id`; 404 when unknown. */
  async get(id: string): Promise<Order> {
    const order = await this.store.get<Order>(this.key(id));
    if (!order) throw new NotFoundException(`order ${id} not found`);
    return order;
  }

  /** Pays a reserved order. The caller holds `order:<id>` (see `OrdersController.pay`). */
  async pay(id: string): Promise<Order> {
    const order = await this.get(id);
    if (order.status !== 'reserved') {
      throw new ConflictException(`order ${id} is ${order.status}, not reserved`);
    }
    const fencingToken = this.redlock.current()?.fencingToken;
    await this.payments.charge(id, fencingToken);
    order.status = 'paid';
    order.paidWithFencingToken = fencingToken;
    await this.save(order);
    return order;
  }

  /**
   * Cancels a reserved order and gives its stock back. Locked on the same resource as the
   * `POST /orders/:id/cancel` handler that calls it: the nested call re-enters the lock the
   * handler already holds (same call chain) instead of waiting for itself.
   */
  @Locked('order:{args.0}')
  async cancel(id: string): Promise<{ order: Order; lock: LockContext | undefined }> {
    const order = await this.get(id);
    if (order.status !== 'reserved') {
      throw new ConflictException(`order ${id} is ${order.status}, cannot cancel`);
    }
    await this.stock.giveBack(order.sku, order.qty); // another resource: stock:<sku>
    order.status = 'cancelled';
    await this.save(order);
    return { order, lock: this.redlock.current() };
  }

  /**
   * Expires a reservation older than `maxAgeMs`. `onLocked: 'skip'`: an order someone is paying
   * right now is left for the next sweep. Resolves `undefined` when skipped.
   */
  @Locked('order:{args.0}', { onLocked: 'skip' })
  async expire(id: string, maxAgeMs: number): Promise<boolean> {
    const order = await this.get(id);
    if (order.status !== 'reserved' || Date.now() - order.createdAt < maxAgeMs) return false;
    await this.stock.giveBack(order.sku, order.qty);
    order.status = 'expired';
    await this.save(order);
    return true;
  }

  /** Ids of every order. */
  async ids(): Promise<string[]> {
    const prefix = this.key('');
    return (await this.store.keys(prefix)).map((k) => k.slice(prefix.length));
  }

  /** Marks a paid order shipped (the warehouse's RPC call). The caller holds `order:<id>`. */
  async ship(id: string): Promise<Order> {
    const order = await this.get(id);
    if (order.status !== 'paid') {
      throw new ConflictException(`order ${id} is ${order.status}, not paid`);
    }
    await pause(this.options.timings.handlerMs);
    order.status = 'shipped';
    await this.save(order);
    return order;
  }

  /** Adds a support note (the WebSocket gateway). The caller holds `order:<id>`. */
  async annotate(id: string, note: string): Promise<Order> {
    const order = await this.get(id);
    await pause(this.options.timings.handlerMs);
    order.notes.push(note);
    await this.save(order);
    return order;
  }

  /** Streams fulfilment progress, one step every `fulfilmentStepMs`. */
  fulfilment(id: string): Observable<FulfilmentEvent> {
    return from(this.get(id)).pipe(
      concatMap(() => interval(this.options.timings.fulfilmentStepMs)),
      take(FULFILMENT_STEPS.length),
      map((i) => ({ order: id, step: FULFILMENT_STEPS[i] })),
    );
  }

  private save(order: Order): Promise<void> {
    return this.store.set(this.key(order.id), order);
  }

  private key(id: string): string {
    return `${this.options.namespace}order:${id}`;
  }
}
