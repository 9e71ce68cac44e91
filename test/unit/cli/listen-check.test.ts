// `up`'s listen check in words: a listen error found at start-up (a port taken between the check and
// the real listen) is worded like the check's, naming the listener, its flag and its config key.
import { describe, expect, it } from 'vitest';
import { describeListenError, explainListenError } from '../../../src/cli/up/listen-check.js';
import type { Listener } from '../../../src/cli/up/listen-check.js';

const LISTENERS: Listener[] = [
  { name: 'data plane', flag: '--listen', key: 'server.listen', address: '127.0.0.1:8080' },
  { name: 'admin API', flag: '--admin-listen', key: 'server.admin_listen', address: '127.0.0.1:8081' },
];

function listenError(code: string, port: number): NodeJS.ErrnoException & { port: number } {
  return Object.assign(new Error(`listen ${code}: 127.0.0.1:${port}`), { code, syscall: 'listen', port });
}

describe('up exits with a bare listen EADDRINUSE', () => {
  it('a listen error on the admin port names the admin listener, its flag and its key', () => {
    const e = explainListenError(LISTENERS, listenError('EADDRINUSE', 8081)) as Error;
    expect(e.message).toBe(
      'the admin API cannot listen on 127.0.0.1:8081: the port is already in use (another glidepath up, or another server); choose another address with --admin-listen HOST:PORT or server.admin_listen in the config',
    );
  });

  it('privileged ports and foreign hosts are said in words', () => {
    expect(describeListenError(LISTENERS[0]!, listenError('EACCES', 80))).toMatch(/: permission denied .*--listen HOST:PORT or server.listen/);
    expect(describeListenError(LISTENERS[0]!, listenError('EADDRNOTAVAIL', 8080))).toMatch(/not an address of this machine/);
  });

  it('other errors pass through unchanged', () => {
    const other = new Error('boom');
    expect(explainListenError(LISTENERS, other)).toBe(other);
    expect(explainListenError(LISTENERS, listenError('EADDRINUSE', 9999))).toBeInstanceOf(Error);
    expect((explainListenError(LISTENERS, listenError('EADDRINUSE', 9999)) as Error).message).toMatch(/^listen EADDRINUSE/);
  });
});
