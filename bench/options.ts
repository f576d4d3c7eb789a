/**
 * What one `npm run bench` run was asked for: its scenarios and options. Read by the runner
 * (bench/run.ts, which parses the command line into them), the topology it runs
 * (bench/topology.ts) and the report it renders (bench/render.ts); imports nothing of theirs.
 */

export const SCENARIOS = [
  'uncontended',
  'parallel',
  'contended',
  'multiproc',
  'waiters',
  'cost',
  'http',
] as const;
export type ScenarioId = (typeof SCENARIOS)[number];

/** Run options. */
export interface Options {
  rounds: number;
  quick: boolean;
  only: Set<ScenarioId>;
  masters: number[];
  /** Window per library per round, ms. */
  seqMs: number;
  parMs: number;
  contMs: number;
  multiMs: number;
  waitersMs: number;
  waiters: number;
  waiterRounds: number;
  costOps: number;
  httpSeconds: number;
  /** How long callers still waiting after a contended window get before they are abandoned. */
  graceMs: number;
}
