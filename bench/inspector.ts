/**
 * V8's profilers over `node:inspector`, for the bench's tools (bench/profile.ts,
 * bench/engine-cost.ts): a CPU profile of one window, and the bytes each function allocates in
 * one.
 */
import { Session } from 'node:inspector';
import type { CpuProfile } from './profile-summary';

/** Sends inspector commands on a session of its own for `use`, and disconnects it after. */
async function withSession<T>(
  use: (post: <R>(method: string, params?: object) => Promise<R>) => Promise<T>,
): Promise<T> {
  const s = new Session();
  s.connect();
  try {
    return await use(
      <R>(method: string, params: object = {}) =>
        new Promise<R>((resolve, reject) =>
          s.post(method, params, (err, res) => (err ? reject(err) : resolve(res as R))),
        ),
    );
  } finally {
    s.disconnect();
  }
}

/** Runs `f` under the CPU profiler (50 µs sampling); its result and the profile. */
export function profiled<T>(f: () => Promise<T>): Promise<{ result: T; profile: CpuProfile }> {
  return withSession(async (post) => {
    await post('Profiler.enable');
    await post('Profiler.setSamplingInterval', { interval: 50 });
    await post('Profiler.start');
    const result = await f();
    const { profile } = await post<{ profile: CpuProfile }>('Profiler.stop');
    return { result, profile };
  });
}

/** A node of V8's sampling heap profile. */
interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: HeapNode[];
}

/**
 * Runs `f` under V8's sampling heap profiler; the bytes allocated by each function (self), most
 * first — where the garbage the collector spends its time on comes from.
 */
export function allocations(f: () => Promise<unknown>): Promise<[string, number][]> {
  return withSession(async (post) => {
    await post('HeapProfiler.enable');
    await post('HeapProfiler.startSampling', {
      samplingInterval: 256,
      // Every allocation, not only what is still alive at the end.
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    await f();
    const { profile } = await post<{ profile: { head: HeapNode } }>('HeapProfiler.stopSampling');
    const bytes = new Map<string, number>();
    const walk = (n: HeapNode): void => {
      const { functionName, url, lineNumber } = n.callFrame;
      const where = url.replace(/^.*\/(lib|node_modules|bench)\//, '$1/');
      const key = `${functionName || '(anonymous)'} ${where}:${lineNumber + 1}`;
      bytes.set(key, (bytes.get(key) ?? 0) + n.selfSize);
      for (const c of n.children) walk(c);
    };
    walk(profile.head);
    return [...bytes].sort((a, b) => b[1] - a[1]);
  });
}
