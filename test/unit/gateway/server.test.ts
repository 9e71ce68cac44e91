// Listener helpers: HOST:PORT parsing, URLs, and a clear error when the port is taken.
import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { parseHostPort, startListening, urlFor } from '../../../src/gateway/server.js';

describe('parseHostPort / urlFor', () => {
  it('parses IPv4, names and bracketed IPv6', () => {
    expect(parseHostPort('127.0.0.1:8080')).toEqual({ host: '127.0.0.1', port: 8080 });
    expect(parseHostPort('localhost:0')).toEqual({ host: 'localhost', port: 0 });
    expect(parseHostPort('[::1]:9000')).toEqual({ host: '::1', port: 9000 });
  });
  it('refuses what is not HOST:PORT, naming the input', () => {
    expect(() => parseHostPort('8080')).toThrow(/expected HOST:PORT, got "8080"/);
    expect(() => parseHostPort('host:')).toThrow(/HOST:PORT/);
    expect(() => parseHostPort('host:70000')).toThrow(/port out of range/);
  });
  it('brackets IPv6 hosts in URLs', () => {
    expect(urlFor('127.0.0.1', 1)).toBe('http://127.0.0.1:1');
    expect(urlFor('::1', 2)).toBe('http://[::1]:2');
  });
});

describe('startListening', () => {
  it('resolves with the bound port and rejects when the port is taken', async () => {
    const a = await startListening(createServer(), '127.0.0.1', 0);
    expect(a.port).toBeGreaterThan(0);
    expect(a.url).toBe(`http://127.0.0.1:${a.port}`);
    await expect(startListening(createServer(), '127.0.0.1', a.port)).rejects.toMatchObject({ code: 'EADDRINUSE' });
    await a.close();
  });
});
