/**
 * This package's version (kept equal to package.json's by a unit test; read by the telemetry as
 * its instrumentation scope version without loading package.json at run time).
 */
export const VERSION = '0.1.0';
