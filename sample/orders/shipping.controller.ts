import { Controller, HttpException } from '@nestjs/common';
import { MessagePattern, Payload, RpcException } from '@nestjs/microservices';
import { Locked } from '../../lib';
import { Order } from './order.model';
import { OrdersService } from './orders.service';

/**
 * Microservice handlers (TCP transport): the warehouse reports shipments. `{data.id}` reads
 * the message payload; when the order is locked elsewhere the caller receives an RPC error
 * `{ code: 'LOCK_CONTENDED', ... }`.
 */
@Controller()
export class ShippingController {
  constructor(private readonly orders: OrdersService) {}

  /** Marks a paid order shipped. */
  @MessagePattern('orders.ship')
  @Locked('order:{data.id}')
  async ship(@Payload() data: { id: string }): Promise<Order> {
    try {
      return await this.orders.ship(String(data.id));
    } catch (err) {
      // The service speaks HTTP exceptions; over RPC, say the same as a structured error.
      if (err instanceof HttpException) {
        throw new RpcException({ status: err.getStatus(), message: err.message });
      }
      throw err;
    }
  }
}
