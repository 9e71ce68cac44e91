// The admin router's own rules: a POST or PUT must declare its body schema, and a route is defined once.
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { Router, post } from '../../../src/api/router.js';

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
