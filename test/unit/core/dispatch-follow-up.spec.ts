/**
 * A script call's follow-up (redis/scripts/call.ts `ScriptCall.followUp`, redis/masters/dispatch.ts): the
 * plain lock's acquire asks the same master again among the kinds. The second call is sent only
 * while the caller still wants it: after an attempt failed (its clean-up on the wire) or its lock
 * ended, a late write would leave an orphan key. Pure routing: a stub master.
 */
import { Dispatch } from '../../../lib/core/redis/masters/dispatch';
import type { MasterNode } from '../../../lib/core/redis/masters/node';
import type { ScriptCall } from '../../../lib/core/redis/scripts/call';
import type { LuaScript } from '../../../lib/core/redis/scripts/lua';

const script = (name: string): LuaScript => ({ name, source: '', sha: name });

function stubMaster(replies: Record<string, unknown>): { node: MasterNode; sent: string[] } {
  const sent: string[] = [];
  const node = {
    cluster: false,
    // As MasterNode.evalScript: the reply, or what `onReply` makes of it.
    evalScript: (
      s: LuaScript,
      _keys: unknown,
      _args: unknown,
      _wanted: unknown,
      onReply?: (reply: unknown) => unknown,
    ) => {
      sent.push(s.name);
      const reply = Promise.resolve(replies[s.name]);
      return onReply ? reply.then(onReply) : reply;
    },
    // As MasterNode.evalScriptInto: the reply delivered to `onReply`.
    evalScriptInto: (
      s: LuaScript,
      _keys: unknown,
      _args: unknown,
      _wanted: unknown,
      onReply: (reply: unknown) => void,
      onError: (err: unknown) => void,
    ) => {
      sent.push(s.name);
      Promise.resolve(replies[s.name]).then(onReply, onError);
    },
  } as unknown as MasterNode;
  return { node, sent };
}

const second: ScriptCall = { script: script('second'), keys: ['k'], args: [] };
const first: ScriptCall = {
  script: script('first'),
  keys: ['k'],
  args: [],
  followUp: (reply) => (Array.isArray(reply) && reply[0] === -3 ? second : undefined),
};

describe('a follow-up call', () => {
  const dispatch = new Dispatch((r) => `lock:{${r}}`);

  it('is sent, and its reply read, when the first reply asks for it', async () => {
    const { node, sent } = stubMaster({ first: [-3, -1], second: [1, -1] });
    const value = await dispatch.read(
      node,
      ['r'],
      ['k'],
      () => first,
      (g) => g[0].value,
    );
    expect(sent).toEqual(['first', 'second']);
    expect(value).toEqual([1, -1]);
  });

  it('is not sent when the first reply does not ask for it', async () => {
    const { node, sent } = stubMaster({ first: [0, -1, 100, 'tok'] });
    await dispatch.read(
      node,
      ['r'],
      ['k'],
      () => first,
      (g) => g[0].value,
    );
    expect(sent).toEqual(['first']);
  });

  it('is not sent once the caller no longer wants it: the first reply is read', async () => {
    const { node, sent } = stubMaster({ first: [-3, -1], second: [1, -1] });
    let wanted = true;
    const value = await dispatch.read(
      node,
      ['r'],
      ['k'],
      () => {
        wanted = false; // (the attempt failed while its first call was on the wire)
        return first;
      },
      (g) => g[0].value,
      () => wanted,
    );
    expect(sent).toEqual(['first']);
    expect(value).toEqual([-3, -1]);
  });
});
