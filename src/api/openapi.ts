// The OpenAPI 3.1 document for the admin API, generated from the router's own route table.
import { z } from 'zod';
import type { RouteDef } from './router.js';

/** JSON Schema of a request body (input side: defaults make fields optional). */
function bodySchema(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { unrepresentable: 'any', io: 'input' }) as Record<string, unknown>;
  return rest;
}

export function openApiDocument(routes: readonly RouteDef[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const p = `/admin/v1${r.path.replace(/:([a-z_]+)/g, '{$1}')}`;
    const params = [...r.path.matchAll(/:([a-z_]+)/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } }));
    (paths[p] ??= {})[r.method.toLowerCase()] = {
      summary: r.summary,
      description: `Requires role: ${r.role}.`,
      parameters: params,
      security: [{ bearer: [] }],
      ...(r.body ? { requestBody: { required: false, content: { 'application/json': { schema: bodySchema(r.body) } } } } : {}),
      responses: {
        '200': { description: 'OK', content: { 'application/json': { schema: { type: 'object' } } } },
        '400': { $ref: '#/components/responses/Error' },
        '401': { $ref: '#/components/responses/Error' },
        '403': { $ref: '#/components/responses/Error' },
        '404': { $ref: '#/components/responses/Error' },
        '409': { $ref: '#/components/responses/Error' },
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Glidepath admin API', version: '1' },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: {
        Error: {
          type: 'object',
          required: ['error'],
          properties: {
            error: {
              type: 'object',
              required: ['message', 'type', 'code'],
              properties: { message: { type: 'string' }, type: { type: 'string' }, code: { type: 'string' }, details: { type: 'object' } },
            },
          },
        },
      },
      responses: { Error: { description: 'An error with a stable code', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } } },
    },
    paths,
  };
}
