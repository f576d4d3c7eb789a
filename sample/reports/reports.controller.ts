import { Controller, Get, NotFoundException, Param, Post } from '@nestjs/common';
import { Locked } from '../../lib';
import { ReportsService } from './reports.service';
import type { ReportResult } from './reports.service';

/** Exports running at once across all instances (a counting semaphore). */
export const EXPORT_SLOTS = 2;

/** Long-running reports. */
@Controller('reports')
export class ReportsController {
  constructor(private readonly reports: ReportsService) {}

  /** Generates a report (takes `reportMs`, several lock ttls) under a plain (exclusive) lock. */
  @Post(':name')
  generate(@Param('name') name: string): Promise<ReportResult> {
    return this.reports.generate(name);
  }

  /**
   * Reads the last result under a shared lock: any number of readers at once, none while the
   * report is being generated (423: the generator holds the plain lock of the same resource).
   */
  @Get(':name')
  @Locked('report:{params.name}', { shared: true })
  read(@Param('name') name: string): ReportResult {
    const result = this.reports.lastResult(name);
    if (!result) throw new NotFoundException(`report ${name} was never generated`);
    return result;
  }

  /** Exports a report: at most {@link EXPORT_SLOTS} exports at once over all instances, others wait. */
  @Post(':name/export')
  @Locked('reports:exports', { limit: EXPORT_SLOTS, onLocked: 'wait', waitTimeout: 30_000 })
  export(@Param('name') name: string): Promise<{ report: string; exported: true }> {
    return this.reports.export(name);
  }
}
