/**
 * The pure judging of the masters' assumptions (lib/core/redis/masters/assumptions.ts): INFO
 * parsing, the eviction rule, which script errors mean "never runs scripts", and the list's
 * independence — the cases the real-server suites (test/core/master-assumptions.spec.ts) do not
 * reach: a replica found by its replication id alone, two replicas of one unlisted master, an
 * earlier position that is the replica, a Sentinel found by its command set when INFO is refused.
 */
import {
  evictionPolicyOf,
  independenceProblems,
  infoFacts,
  judgeMasters,
  parseInfo,
  refusesScripts,
} from '../../../lib/core/redis/masters/assumptions';
import type { MasterFacts } from '../../../lib/core/redis/masters/assumptions';

const NAMES = ['10.0.0.1:6379', '10.0.0.2:6379', '10.0.0.3:6379'];
const master = (runId: string, replid = `r-${runId}`): MasterFacts => ({
  runId,
  mode: 'standalone',
  role: 'master',
  replid,
});

it('parses INFO sections (CRLF, comments, values with colons)', () => {
  const info = parseInfo('# Server\r\nredis_mode:standalone\r\nrun_id:abc\r\nexecutable:/a:b\r\n');
  expect(info.get('redis_mode')).toBe('standalone');
  expect(info.get('executable')).toBe('/a:b');
  expect(infoFacts('run_id:abc\nredis_mode:sentinel\n', '')).toEqual({
    runId: 'abc',
    mode: 'sentinel',
    role: undefined,
    masterHost: undefined,
    masterPort: undefined,
    replid: undefined,
  });
});

it.each([
  [0, 'allkeys-lru', undefined],
  [1, 'noeviction', undefined],
  [1, 'allkeys-lru', 'allkeys-lru'],
  [1, 'allkeys-random', 'allkeys-random'],
  [1, 'volatile-ttl', 'volatile-ttl'],
  [1, 'volatile-lfu', 'volatile-lfu'],
])('maxmemory %d with %s evicts: %s', (maxmemory, policy, evicts) => {
  expect(evictionPolicyOf(maxmemory, policy)).toBe(evicts);
});

it('script errors: NOPERM and unknown command refuse scripts; passing errors do not', () => {
  expect(refusesScripts("NOPERM this user has no permissions to run the 'evalsha' command")).toBe(
    true,
  );
  expect(refusesScripts("ERR unknown command 'evalsha', with args beginning with: ")).toBe(true);
  expect(refusesScripts('LOADING Redis is loading the dataset in memory')).toBe(false);
  expect(refusesScripts('Connection is closed.')).toBe(false);
  expect(refusesScripts('BUSY Redis is busy running a script')).toBe(false);
});

describe('independence', () => {
  it('the same run_id: the later position, naming both', () => {
    const problems = independenceProblems([master('a'), master('b'), master('a')], NAMES);
    expect([...problems]).toEqual([
      [2, 'clients[0] (10.0.0.1:6379) and clients[2] (10.0.0.3:6379) are one server (run_id a)'],
    ]);
  });

  it('a replica found by its replication id alone (configured under another name)', () => {
    const replica: MasterFacts = {
      runId: 'c',
      role: 'slave',
      masterHost: 'redis-a.internal',
      masterPort: 6379,
      replid: 'r-a',
    };
    const problems = independenceProblems([master('a'), master('b'), replica], NAMES);
    expect(problems.get(2)).toMatch(/clients\[2\].*is a replica of clients\[0\]/);
  });

  it('a replica listed before its master is found too', () => {
    const replica: MasterFacts = {
      runId: 'c',
      role: 'slave',
      masterHost: '10.0.0.3',
      masterPort: 6379,
    };
    const problems = independenceProblems([replica, master('b'), master('a')], NAMES);
    expect(problems.get(0)).toMatch(/clients\[0\].*is a replica of clients\[2\]/);
  });

  it('two replicas of one unlisted master: not independent', () => {
    const replica = (runId: string): MasterFacts => ({ runId, role: 'slave', replid: 'r-x' });
    const problems = independenceProblems([replica('c'), master('b'), replica('d')], NAMES);
    expect(problems.get(2)).toMatch(/clients\[0\].*clients\[2\].*replicas of one master/);
  });

  it('loopback names are one address; unknown facts are skipped', () => {
    const replica: MasterFacts = {
      runId: 'c',
      role: 'slave',
      masterHost: 'localhost',
      masterPort: 7001,
    };
    const names = ['127.0.0.1:7001', '127.0.0.1:7002', '127.0.0.1:7003'];
    expect(independenceProblems([master('a'), undefined, replica], names).get(2)).toMatch(
      /replica of clients\[0\]/,
    );
    expect(independenceProblems([undefined, undefined, replica], names).size).toBe(0);
  });
});

describe('verdicts', () => {
  it('a Sentinel (redis_mode) cannot vote, and its missing CONFIG is not noted', () => {
    const [v] = judgeMasters(
      [{ runId: 's', mode: 'sentinel', configError: "ERR unknown command 'config'" }],
      NAMES,
    );
    expect(v.unusable).toMatch(/a Sentinel/);
    expect(v.unchecked).toEqual([]);
  });

  it('no INFO, no scripting: found by the command set', () => {
    const [v] = judgeMasters(
      [{ infoError: 'NOPERM info', scriptsRefused: "ERR unknown command 'evalsha'" }],
      NAMES,
    );
    expect(v.unusable).toMatch(/refuses the engine's scripts \(ERR unknown command/);
    expect(v.unchecked).toEqual(['INFO refused (NOPERM info)']);
  });

  it('a duplicate is unusable and a configuration error; an evicting master only warned', () => {
    const evicting: MasterFacts = { ...master('b'), maxmemory: 1 << 20, policy: 'allkeys-lru' };
    const [a, b, c] = judgeMasters([master('a'), evicting, master('a')], NAMES);
    expect(a).toEqual({ unchecked: [] });
    expect(b).toEqual({ evicts: 'allkeys-lru', unchecked: [] });
    expect(c.unusable).toMatch(/one server/);
    expect(c.notIndependent).toBe(c.unusable);
  });
});
