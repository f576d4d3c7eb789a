import { ConflictException, Inject, Injectable, ServiceUnavailableException } from '@nestjs/common';
import { LockContendedError, LockLostError, RedlockService } from '../../lib';
import { pause } from '../orders/order.model';
import { SAMPLE_OPTIONS, type ResolvedSampleOptions } from '../sample.options';

/** What a report run tells about its lock. */
export interface ReportResult {
  readonly report: string;
  readonly steps: number;
  readonly durationMs: number;
  /** Ttl of the lock: the run lasted several ttls. */
  readonly lockTtlMs: number;
  /** Automatic extensions made while the report ran. */
  readonly extensions: number;
  /** Whether the lock's signal aborted (lock lost) — `false` for a healthy run. */
  readonly signalAborted: boolean;
  readonly fencingToken: number | undefined;
}

/**
 * A long job under `RedlockService.using()`: the lock's ttl is short (a crashed holder blocks
 * others only briefly) and `using()` extends it while the job runs. The job checks the signal
 * between steps and stops if the lock is lost — past that point another instance may run it.
 */
@Injectable()
export class ReportsService {
  /** The last result of each report (in process memory: a stand-in for a report store). */
  private readonly results = new Map<string, ReportResult>();
  /** Exports running in this process now (the semaphore bounds them across instances). */
  exportsRunning = 0;

  constructor(
    private readonly redlock: RedlockService,
    @Inject(SAMPLE_OPTIONS) private readonly options: ResolvedSampleOptions,
  ) {}

  /**
   * Generates `report`; 409 when it is already being generated (any instance), 503 when the
   * lock was lost midway (the run stopped at the next step).
   */
  async generate(report: string): Promise<ReportResult> {
    const { reportTtlMs, reportMs } = this.options.timings;
    const steps = 10;
    const started = Date.now();
    try {
      return await this.redlock.using(
        `report:${report}`,
        async (signal, lock) => {
          for (let i = 0; i < steps; i++) await pause(reportMs / steps, signal);
          const result = {
            report,
            steps,
            durationMs: Date.now() - started,
            lockTtlMs: reportTtlMs,
            extensions: lock.extensions,
            signalAborted: signal.aborted,
            fencingToken: lock.fencingToken,
          };
          this.results.set(report, result);
          return result;
        },
        { ttl: reportTtlMs, retryCount: 0 },
      );
    } catch (err) {
      if (err instanceof LockContendedError) {
        throw new ConflictException(`report ${report} is already being generated`);
      }
      if (err instanceof LockLostError) {
        // The signal aborted between two steps: another instance may run the report now.
        throw new ServiceUnavailableException(`report ${report} stopped: its lock was lost`);
      }
      throw err;
    }
  }

  /** The last result of `report`, if it was generated (read under a shared lock). */
  lastResult(report: string): ReportResult | undefined {
    return this.results.get(report);
  }

  /** One export: an expensive job the semaphore lets run at most twice at once (all instances). */
  async export(report: string, signal?: AbortSignal): Promise<{ report: string; exported: true }> {
    this.exportsRunning++;
    try {
      await pause(this.options.timings.reportMs / 3, signal);
      return { report, exported: true };
    } finally {
      this.exportsRunning--;
    }
  }
}
