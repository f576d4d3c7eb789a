import { readFileSync } from 'node:fs';
import { VERSION } from '../../lib/version';
import { repoPath } from '../harness/paths';

describe('VERSION', () => {
  it("equals package.json's version (the telemetry scope version)", () => {
    const { version } = JSON.parse(readFileSync(repoPath('package.json'), 'utf8')) as {
      version: string;
    };
    expect(VERSION).toBe(version);
  });
});
