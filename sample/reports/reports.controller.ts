import { Controller, Param, Post } from '@nestjs/common';
import { ReportResult, ReportsService } from './reports.service';

/** Long-running reports. */
@Controller('reports')
export class ReportsController {
  constructor(private readonly reports: ReportsService) {}

  /** Generates a report (takes `reportMs`, several lock ttls). */
  @Post(':name')
  generate(@Param('name') name: string): Promise<ReportResult> {
    return this.reports.generate(name);
  }
}
