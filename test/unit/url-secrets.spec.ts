/**
 * The passwords the module learns from `clients` URLs (lib/clients.ts `optionSecrets`, core's
 * `urlSecrets`): scrubbed literally from every log line, so a URL without user info must give
 * none — a part of its host or port would be cut out of every message.
 */
import { optionSecrets } from '../../lib/clients';

it('finds the password of a URL, raw and decoded, and the secret query values', () => {
  expect(optionSecrets('redis://user:p%40ss%23word@host:6379')).toEqual(
    expect.arrayContaining(['p%40ss%23word', 'p@ss#word']),
  );
  expect(optionSecrets('redis://host:6379?password=a+b%21')).toEqual(
    expect.arrayContaining(['a+b%21', 'a b!']),
  );
});

it('takes nothing of a URL without user info for a password', () => {
  expect(optionSecrets('redis://myhost:16379')).toEqual([]);
  expect(optionSecrets('rediss://cache.example.com:6380/2')).toEqual([]);
});
