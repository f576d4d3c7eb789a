import { HttpException } from '@nestjs/common';
import { MessageBody, SubscribeMessage, WebSocketGateway, WsException } from '@nestjs/websockets';
import { Locked } from '../../lib';
import { Order } from './order.model';
import { OrdersService } from './orders.service';

/** Message of `orders.annotate`. */
interface AnnotateMessage {
  id: string;
  note: string;
}

/**
 * WebSocket (socket.io) gateway for support agents, on the HTTP server's port. When the order
 * is locked elsewhere the client receives an `exception` event `{ code: 'LOCK_CONTENDED', ... }`.
 */
@WebSocketGateway()
export class OrdersGateway {
  constructor(private readonly orders: OrdersService) {}

  /** Adds a note to an order; acknowledges with the updated order. */
  @SubscribeMessage('orders.annotate')
  @Locked('order:{data.id}')
  async annotate(@MessageBody() message: AnnotateMessage): Promise<Order> {
    try {
      return await this.orders.annotate(String(message.id), String(message.note));
    } catch (err) {
      if (err instanceof HttpException) {
        throw new WsException({ status: err.getStatus(), message: err.message });
      }
      throw err;
    }
  }
}
