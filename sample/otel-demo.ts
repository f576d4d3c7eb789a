/**
 * DEMO ONLY (`SAMPLE_OTEL=console npm run sample`): a minimal OpenTelemetry SDK that prints every
 * span to the console, to show the spans nestjs-redlock records (`redlock.acquire`,
 * `redlock.extend`, `redlock.release`) with no setup of its own: the module's telemetry is on by
 * default when `@opentelemetry/api` is installed and writes into whatever SDK the app registered.
 *
 * `main.ts` loads this file with a dynamic import only when the variable is set, so neither it
 * nor the SDK packages are loaded otherwise. A real application registers its SDK (e.g.
 * `@opentelemetry/sdk-node` with an OTLP exporter, plus HTTP instrumentation so that the lock
 * spans become children of the request spans) before `NestFactory.create()`, the same way.
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

/** Registers a global tracer provider that prints each span when it ends. */
export function registerConsoleTracing(): void {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(new ConsoleSpanExporter())],
    }),
  );
  console.log('SAMPLE_OTEL=console: OpenTelemetry demo SDK registered, spans print below.');
}
