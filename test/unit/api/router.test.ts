// The admin router's own rules: a POST or PUT must declare its body schema, a route is defined once, a 405 knows the
// methods its path takes; and the admin listener's catalogue answer to malformed HTTP.
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { clientErrorAnswer } from '../../../src/api/client-error.js';
import { Router, post } from '../../../src/api/router.js';
import { MethodNotAllowedError } from '../../../src/errors.js';

describe('Router.add', () => {
  it('refuses a POST or PUT without a body schema, naming the route', () => {
    const r = new Router();
    expect(() => r.add({ method: 'POST', path: '/models/:model/thing', role: 'operator', summary: 's', handler: () => ({}) })).toThrow(
      'admin route POST /models/:model/thing declares no body schema',
    );
    expect(() => r.add({ method: 'PUT', path: '/x', role: 'operator', summary: 's', handler: () => ({}) })).toThrow(/PUT \/x declares no body schema/);
  });

  it('refuses a route defined twice', () => {
    const r = new Router();
    const def = post('/x', { role: 'operator', summary: 's', body: z.object({}).strict() }, () => ({}));
    r.add(def);
    expect(() => r.add(def)).toThrow('admin route POST /x is defined twice');
  });
});

describe('Router.match', () => {
  it('refuses a method a path does not take with the methods it does take (for Allow), each once', () => {
    const r = new Router();
    const body = z.object({}).strict();
    r.add({ method: 'GET', path: '/models/:model/route', role: 'viewer', summary: 's', handler: () => ({}) });
    r.add(post('/models/:model/route', { role: 'operator', summary: 's', body }, () => ({})));
    r.add({ method: 'GET', path: '/models/:model/:thing', role: 'viewer', summary: 's', handler: () => ({}) });
    let err: unknown;
    try {
      r.match('DELETE', '/models/m/route');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(MethodNotAllowedError);
    expect((err as MethodNotAllowedError).allow).toEqual(['GET', 'POST']);
  });
});

describe('clientErrorAnswer', () => {
  it.each([
    ['HPE_HEADER_OVERFLOW', 431, 'headers_too_large'],
    ['ERR_HTTP_REQUEST_TIMEOUT', 408, 'request_timeout'],
    ['HPE_INVALID_METHOD', 400, 'invalid_method'],
    ['HPE_INVALID_CONTENT_LENGTH', 400, 'invalid_content_length'],
    ['HPE_SOMETHING_NEW', 400, 'invalid_header'],
  ])('answers %s with %i %s', (code, status, name) => {
    expect(clientErrorAnswer(Object.assign(new Error('Parse Error'), { code, reason: 'why' }))).toMatchObject({ status, code: name });
  });

  it('answers nobody who reset or left', () => {
    expect(clientErrorAnswer(Object.assign(new Error('reset'), { code: 'ECONNRESET' }))).toBeUndefined();
  });
});
