/**
 * A script call as the masters layer sends it (redis/masters/dispatch.ts), and a reply as it comes
 * back per slot group. The lock kinds build the calls and read the replies (redis/kinds/kind.ts).
 */
import type { LuaScript } from './lua';

/** The script call of one request on one master (one slot group on a Cluster master). */
export interface ScriptCall {
  readonly script: LuaScript;
  readonly keys: readonly string[];
  readonly args: readonly string[];
  /**
   * Where in `args` the boot-marker value goes, when the script takes the value a master is
   * known to hold (`AcquireInput.markerBirth`): the store copies the call built once per attempt
   * and puts each master's value there instead of building the call once per master.
   */
  readonly birthArg?: number;
  /**
   * A call that depends on this one's reply on the same master: given the reply and the call as
   * sent (its per-master arguments), the call to send next instead of reading the reply (its
   * reply is read in its place), or `undefined` to read it. The plain lock's acquire asks again
   * this way when it met another kind at a key (redis/kinds/mutex.ts).
   */
  readonly followUp?: (reply: unknown, sent: ScriptCall) => ScriptCall | undefined;
  /**
   * The script reads the master's clock and its reply comes as `{time µs, reply}`
   * (redis/scripts/lua.ts `clockLua`): the masters layer unwraps it and records the reading
   * (redis/masters/dispatch.ts, the clock check).
   */
  readonly clocked?: boolean;
}

/** A script's raw reply for one slot group of resources. */
export interface GroupReply {
  readonly resources: readonly string[];
  readonly value: unknown;
}
