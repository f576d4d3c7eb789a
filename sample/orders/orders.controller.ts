import {
  Body,
  Controller,
  Get,
  MessageEvent,
  Param,
  ParseIntPipe,
  Post,
  Put,
  Sse,
} from '@nestjs/common';
import { Observable, map } from 'rxjs';
import { Locked, RedlockService } from '../../lib';
import { Order, Stock } from './order.model';
import { OrdersService } from './orders.service';
import { PaymentGateway } from './payment.gateway';
import { StockService } from './stock.service';

/** Body of `POST /orders`. */
interface CreateOrderBody {
  sku: string;
  qty?: number;
}

/** HTTP API of the shop. */
@Controller()
export class OrdersController {
  constructor(
    private readonly orders: OrdersService,
    private readonly stock: StockService,
    private readonly payments: PaymentGateway,
    private readonly redlock: RedlockService,
  ) {}

  /** Sets a product's stock. */
  @Put('stock/:sku')
  setStock(@Param('sku') sku: string, @Body('available', ParseIntPipe) available: number) {
    return this.stock.set(sku, available);
  }

  /** A product's stock. */
  @Get('stock/:sku')
  getStock(@Param('sku') sku: string): Promise<Stock> {
    return this.stock.get(sku);
  }

  /**
   * Reserves stock. Not locked here: `StockService.take` is `@Locked('stock:{args.0}',
   * { onLocked: 'wait' })`, so concurrent orders for one product queue, and none oversells.
   */
  @Post('orders')
  create(@Body() body: CreateOrderBody): Promise<Order> {
    return this.orders.create(String(body.sku), Number(body.qty ?? 1));
  }

  /** An order. */
  @Get('orders/:id')
  get(@Param('id') id: string): Promise<Order> {
    return this.orders.get(id);
  }

  /**
   * Pays an order: one lock per order. A second request for the same order while the first is
   * charging gets `423 Locked` with `Retry-After` (default `onLocked: 'throw'`) instead of a
   * double charge; requests for other orders run in parallel.
   */
  @Post('orders/:id/pay')
  @Locked('order:{params.id}')
  pay(@Param('id') id: string): Promise<Order> {
    return this.orders.pay(id);
  }

  /**
   * Cancels an order. The handler locks `order:<id>` and calls `OrdersService.cancel`, which is
   * locked on the same resource: the nested call re-enters the held lock.
   */
  @Post('orders/:id/cancel')
  @Locked('order:{params.id}')
  async cancel(@Param('id') id: string) {
    const outer = this.redlock.current();
    const { order, lock: inner } = await this.orders.cancel(id);
    return {
      order,
      /** `true`: the nested call ran under the handler's lock (same token), not a second one. */
      reentered: inner !== undefined && inner.token === outer?.token,
      fencingToken: outer?.fencingToken,
    };
  }

  /**
   * Streams fulfilment progress (server-sent events) while holding the order's lock: the lock
   * is released when the stream completes, fails, or the client disconnects.
   */
  @Sse('orders/:id/fulfilment')
  @Locked('order:{params.id}')
  fulfilment(@Param('id') id: string): Observable<MessageEvent> {
    return this.orders.fulfilment(id).pipe(map((data) => ({ data })));
  }

  /** Charges recorded by the payment provider for an order (any instance). */
  @Get('orders/:id/charges')
  charges(@Param('id') id: string) {
    return this.payments.chargesOf(id);
  }
}
