// What the config loader refuses in a raw config: its issues, each a path and a message (the error must be a ConfigError).
import { expect } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/errors.js';
import { caught } from './errors.js';

export function configIssues(raw: unknown): { path: string; message: string }[] {
  const e = caught(() => parseConfig(raw));
  expect(e).toBeInstanceOf(ConfigError);
  return (e as ConfigError).issues.map((i) => ({ path: i.path, message: i.message }));
}
