import { ConflictException, Inject, Injectable, NotFoundException } from '@nestjs/common';
import { Locked } from '../../lib';
import { SAMPLE_OPTIONS, type ResolvedSampleOptions } from '../sample.options';
import { SampleStore } from '../store/sample-store';
import { Stock, pause } from './order.model';

/**
 * Stock levels. `take` and `giveBack` are read-modify-write sequences (read, wait for the slow
 * store, write): two concurrent calls on one product would both read the same level and one
 * update would be lost. `@Locked('stock:{args.0}')` on these *provider* methods (no HTTP
 * involved: the lock is applied by the module's explorer) serializes them per product;
 * `onLocked: 'wait'` queues callers instead of failing them.
 */
@Injectable()
export class StockService {
  constructor(
    private readonly store: SampleStore,
    @Inject(SAMPLE_OPTIONS) private readonly options: ResolvedSampleOptions,
  ) {}

  /** Sets the stock of `sku` (administration; not locked). */
  async set(sku: string, available: number): Promise<Stock> {
    const stock: Stock = { sku, available };
    await this.store.set(this.key(sku), stock);
    return stock;
  }

  /** The stock of `sku`; 404 when unknown. */
  async get(sku: string): Promise<Stock> {
    const stock = await this.store.get<Stock>(this.key(sku));
    if (!stock) throw new NotFoundException(`unknown product ${sku}`);
    return stock;
  }

  /** Takes `qty` units of `sku`; 409 when not enough are left. */
  @Locked('stock:{args.0}', { onLocked: 'wait', waitTimeout: 10_000 })
  async take(sku: string, qty: number): Promise<Stock> {
    const stock = await this.get(sku);
    if (stock.available < qty) {
      throw new ConflictException(`only ${stock.available} of ${sku} left, ${qty} requested`);
    }
    await pause(this.options.timings.stockWriteMs);
    stock.available -= qty;
    await this.store.set(this.key(sku), stock);
    return stock;
  }

  /** Returns `qty` units of `sku` (cancelled or expired reservation). */
  @Locked('stock:{args.0}', { onLocked: 'wait', waitTimeout: 10_000 })
  async giveBack(sku: string, qty: number): Promise<Stock> {
    const stock = await this.get(sku);
    await pause(this.options.timings.stockWriteMs);
    stock.available += qty;
    await this.store.set(this.key(sku), stock);
    return stock;
  }

  private key(sku: string): string {
    return `${this.options.namespace}stock:${sku}`;
  }
}
