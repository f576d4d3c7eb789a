import { Controller, Get } from '@nestjs/common';
import { JanitorRun, ReservationsJanitor } from './reservations.janitor';

/** What the scheduled jobs did. */
@Controller('jobs')
export class JobsController {
  constructor(private readonly janitor: ReservationsJanitor) {}

  /** Recorded janitor runs of every instance (one per tick). */
  @Get('janitor/runs')
  runs(): Promise<JanitorRun[]> {
    return this.janitor.runs();
  }
}
