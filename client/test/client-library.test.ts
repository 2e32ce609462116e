/**
 * The pieces of @agent/client that need no agent: naming, fields, skeletons, bodies from -f, checks with
 * suggestions, and plan diffs. The end-to-end behaviour is covered by cli.test.ts against the real agent.
 */
import { describe, expect, it } from 'vitest';
import {
  ApiDescription,
  buildBody,
  changeLines,
  diffTexts,
  kebab,
  leftoverPlaceholders,
  listFields,
  skeletonJson,
  skeletonValue,
  skeletonYaml,
  splitKey,
  suggest,
  validateBody,
  validateParameters,
  type JsonSchema,
} from '../src/index.js';
import { parse as parseYaml } from 'yaml';

/** Shaped like the create-deployment body plus nested objects and enums. */
const body: JsonSchema = {
  type: 'object',
  required: ['name', 'compose_content'],
  additionalProperties: false,
  properties: {
    name: { type: 'string', pattern: '^[a-z0-9][a-z0-9_-]{0,62}$', description: 'deployment name' },
    compose_content: { type: 'string', minLength: 1, description: 'full text of the composition file' },
    env_vars: {
      type: 'array',
      items: { type: 'object', required: ['key', 'value'], additionalProperties: false, properties: { key: { type: 'string' }, value: { type: 'string' } } },
    },
    auto_start: { type: 'boolean', default: false, description: 'start after creation' },
    ssl: {
      type: 'object',
      additionalProperties: false,
      properties: { enabled: { type: 'boolean' }, mode: { anyOf: [{ const: 'auto' }, { const: 'manual' }] } },
    },
    port: { type: 'integer', minimum: 1, maximum: 65535 },
    level: { enum: ['read', 'write', 'admin'], default: 'read' },
  },
};

describe('client library', () => {
  it('derives kebab-case command names from operationIds', () => {
    expect(kebab('list')).toBe('list');
    expect(kebab('metricsLatest')).toBe('metrics-latest');
    expect(kebab('securityEventsGet')).toBe('security-events-get');
    expect(kebab('logsStream')).toBe('logs-stream');
    expect(kebab('object-stores')).toBe('object-stores');
    const d = new ApiDescription({
      openapi: '3.1.0',
      info: { version: '1' },
      tags: [{ name: 'deployments', description: 'Compose deployments' }],
      paths: {
        '/api/deployments/{name}/logs': {
          get: {
            operationId: 'deployments.logs',
            summary: 'Logs',
            'x-permission': 'deployments:read',
            parameters: [
              { name: 'name', in: 'path', required: true, schema: { type: 'string' } },
              { name: 'tail', in: 'query', schema: { type: 'integer', default: 100 } },
            ],
            responses: {},
          },
        },
        '/api/deployments/{name}/logs/stream': {
          get: {
            operationId: 'deployments.logsStream',
            summary: 'Follow',
            'x-websocket': true,
            'x-permission': 'deployments:read',
            parameters: [{ name: 'name', in: 'path', required: true, schema: { type: 'string' } }],
            responses: {},
          },
        },
        '/api/deployments': {
          post: {
            operationId: 'deployments.create',
            'x-plan': true,
            'x-permission': 'deployments:write',
            parameters: [{ name: 'plan', in: 'query', schema: { type: 'boolean' } }],
            requestBody: { content: { 'application/json': { schema: { $ref: '#/components/schemas/Create' } } } },
            responses: { '201': { description: 'ok' } },
          },
        },
      },
      components: { schemas: { Create: body } },
    });
    expect(d.groups().map((g) => [g.name, g.description, g.operations.map((o) => o.name)])).toEqual([
      ['deployments', 'Compose deployments', ['create', 'logs', 'logs-stream']],
    ]);
    const create = d.find('deployments', 'create')!;
    expect(create).toMatchObject({ method: 'POST', plan: true, permission: 'deployments:write', queryParams: [], successStatus: 201 });
    expect(create.body?.properties?.name).toEqual(body.properties!.name);
    const logs = d.find('deployments', 'logs')!;
    expect(d.followStreamOf(logs)?.id).toBe('deployments.logsStream');
    expect(d.find('deployments', 'logsStream')?.websocket).toBe(true);
  });

  it('lists body fields with types, requirement, enums, defaults and constraints', () => {
    const fields = listFields(body);
    const by = Object.fromEntries(fields.map((f) => [f.path, f]));
    expect(fields.map((f) => f.path)).toEqual([
      'name',
      'compose_content',
      'env_vars',
      'env_vars[].key',
      'env_vars[].value',
      'auto_start',
      'ssl',
      'ssl.enabled',
      'ssl.mode',
      'port',
      'level',
    ]);
    expect(by.name).toMatchObject({ type: 'string', required: true, description: 'deployment name', constraints: ['pattern ^[a-z0-9][a-z0-9_-]{0,62}$'] });
    expect(by.env_vars).toMatchObject({ type: 'array of object', required: false });
    expect(by['env_vars[].key']).toMatchObject({ type: 'string', required: true, depth: 1 });
    expect(by.auto_start).toMatchObject({ hasDefault: true, default: false });
    expect(by['ssl.mode']).toMatchObject({ enum: ['auto', 'manual'], type: 'string' });
    expect(by.port!.constraints).toEqual(['1..65535']);
    expect(by.level).toMatchObject({ enum: ['read', 'write', 'admin'], default: 'read' });
  });

  it('builds skeletons with every field: defaults filled, placeholders marked required or optional', () => {
    expect(skeletonValue(body)).toEqual({
      name: '<required: string — deployment name>',
      compose_content: '<required: string (at least 1 chars) — full text of the composition file>',
      env_vars: [{ key: '<required: string>', value: '<required: string>' }],
      auto_start: false,
      ssl: { enabled: '<optional: boolean>', mode: '<optional: one of auto | manual>' },
      port: '<optional: integer (1..65535)>',
      level: 'read',
    });
    expect(JSON.parse(skeletonJson(body))).toEqual(skeletonValue(body));
    const yaml = skeletonYaml(body, 'POST /api/deployments');
    expect(yaml).toMatch(/^# POST \/api\/deployments$/m);
    expect(yaml).toMatch(/^auto_start: false # optional · boolean · default false · start after creation$/m);
    expect(yaml).toMatch(/^# optional · array of object\nenv_vars:$/m);
    expect(yaml).toMatch(/^level: read # optional · string · one of: "read", "write", "admin" · default "read"$/m);
    expect(parseYaml(yaml)).toEqual(skeletonValue(body, true, 0, true));
    expect(parseYaml(yaml).name).toBe('<required: string>');
    expect(leftoverPlaceholders(skeletonValue(body))).toEqual([
      'name',
      'compose_content',
      'env_vars[0].key',
      'env_vars[0].value',
      'ssl.enabled',
      'ssl.mode',
      'port',
    ]);
  });

  it('builds a body from -f assignments: dotted keys, indexes, JSON-looking values typed by the schema', () => {
    expect(splitKey('env_vars[0].key')).toEqual(['env_vars', 0, 'key']);
    expect(splitKey('env_vars.1.value')).toEqual(['env_vars', 1, 'value']);
    expect(() => splitKey('a..b')).toThrow(/empty segment/);
    expect(() => splitKey('__proto__.x')).toThrow(/invalid/);
    const files: Record<string, string> = { 'compose.yml': 'services: {}\n' };
    const built = buildBody(body, {
      data: { name: 'web', auto_start: true },
      fields: [
        'name=123',
        'port=8080',
        'ssl.enabled=true',
        'env_vars[0].key=A',
        'env_vars[0].value=1',
        'env_vars.1={"key":"B","value":"2"}',
        'compose_content=@compose.yml',
        'auto_start=false',
      ],
      readFile: (p) => files[p]!,
    });
    expect(built).toEqual({
      name: '123',
      port: 8080,
      ssl: { enabled: true },
      auto_start: false,
      env_vars: [
        { key: 'A', value: '1' },
        { key: 'B', value: '2' },
      ],
      compose_content: 'services: {}\n',
    });
    expect(validateBody(body, built)).toEqual([]);
    expect(buildBody(body, { fields: ['name=@@literal'] })).toEqual({ name: '@literal' });
    expect(buildBody(body, {})).toBeUndefined();
    expect(() => buildBody(body, { fields: ['name'] })).toThrow(/expected key=value/);
    expect(() => buildBody(body, { fields: ['port={oops'] })).not.toThrow();
    expect(() => buildBody(body, { fields: ['ssl={"enabled":tru}'] })).toThrow(/looks like JSON but does not parse/);
  });

  it('reports schema problems with the field and a suggestion', () => {
    expect(suggest('nmae', ['name', 'compose_content'])).toBe('name');
    expect(suggest('zzzzzz', ['name'])).toBeUndefined();
    expect(validateBody(body, { name: 'web', compose_contnet: 'x', ssl: { enabeld: true }, env_vars: [{ key: 'A' }], level: 'root', port: 0 })).toEqual(
      expect.arrayContaining([
        "body: unknown field 'compose_contnet' — did you mean 'compose_content'?",
        'body.compose_content: required field is missing',
        "body.ssl: unknown field 'enabeld' — did you mean 'enabled'?",
        'body.env_vars[0].value: required field is missing',
        'body.level: must be one of "read", "write", "admin"',
        'body.port: must be >= 1',
      ]),
    );
    expect(validateBody(body, { name: 'web', compose_content: 'x', ssl: { mode: 'other' } })).toEqual(['body.ssl.mode: must be one of "auto", "manual"']);
    expect(validateBody(body, { name: '<required: string — deployment name>', compose_content: 'x' })[0]).toContain(
      'body.name: still holds the skeleton placeholder',
    );

    const d = new ApiDescription({
      openapi: '3.1.0',
      info: { version: '1' },
      paths: {
        '/api/x/{id}': {
          get: {
            operationId: 'x.get',
            parameters: [
              { name: 'id', in: 'path', required: true, schema: { type: 'integer', minimum: 1 } },
              { name: 'limit', in: 'query', schema: { type: 'integer', maximum: 10 } },
            ],
            responses: {},
          },
        },
      },
    });
    const op = d.find('x', 'get')!;
    const params: Record<string, unknown> = { id: '5' };
    const query: Record<string, unknown> = { limit: '3' };
    expect(validateParameters(op, params, query)).toEqual([]);
    expect(params).toEqual({ id: 5 });
    expect(validateParameters(op, { id: 'x' }, { limt: '3', limit: '50' })).toEqual([
      'path.id: must be integer',
      "query.limt: unknown parameter — did you mean 'limit'?",
      'query.limit: must be <= 10',
    ]);
  });

  it('shows plan changes as diffs: fields, multi-line texts, a plugin diff', () => {
    const update = changeLines({
      type: 'deployment',
      id: 'web',
      actions: ['update'],
      before: { auto_start: false, ssl: { enabled: false }, compose: 'services:\n  web:\n    image: a\n' },
      after: { auto_start: false, ssl: { enabled: true }, compose: 'services:\n  web:\n    image: b\n' },
    });
    expect(update).toEqual([
      { mark: ' ', text: 'auto_start: false' },
      { mark: '-', text: 'ssl.enabled: false' },
      { mark: '+', text: 'ssl.enabled: true' },
      { mark: '@', text: 'compose:' },
      { mark: ' ', text: '  services:' },
      { mark: ' ', text: '    web:' },
      { mark: '-', text: '      image: a' },
      { mark: '+', text: '      image: b' },
      { mark: ' ', text: '  ' },
    ]);
    // File headers are dropped (the change header names the file); context lines lose their leading space.
    expect(
      changeLines({
        type: 'file',
        id: 'x',
        actions: ['update'],
        diff: 'Index: x\n===================\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n same\n-old\n+new\n',
      }),
    ).toEqual([
      { mark: '@', text: '@@ -1,2 +1,2 @@' },
      { mark: ' ', text: 'same' },
      { mark: '-', text: 'old' },
      { mark: '+', text: 'new' },
    ]);
    expect(diffTexts('a\nb\nc', 'a\nc\nd').map((l) => `${l.mark}${l.text}`)).toEqual([' a', '-b', ' c', '+d']);
  });

  it('diffs long texts line by line (jsdiff) and shows texts too far apart as removed then added', () => {
    const show = (lines: { mark: string; text: string }[]) => lines.map((l) => `${l.mark}${l.text}`);
    expect(show(diffTexts('a\nx\ny\nb', 'a\np\nq\nb'))).toEqual([' a', '-x', '-y', '+p', '+q', ' b']);
    expect(show(diffTexts('', 'a'))).toEqual(['-', '+a']);
    expect(show(diffTexts('a\n', 'a'))).toEqual([' a', '-']);
    // 2,500 lines with one changed: the LCS table this replaced (a × b cells) gave up past 4M cells and showed
    // every line removed and added; the diff names the one line.
    const long = Array.from({ length: 2500 }, (_, i) => `line ${i}`);
    const edited = long.map((l, i) => (i === 1200 ? 'changed' : l));
    const lines = diffTexts(long.join('\n'), edited.join('\n'));
    expect(lines.filter((l) => l.mark !== ' ')).toEqual([
      { mark: '-', text: 'line 1200' },
      { mark: '+', text: 'changed' },
    ]);
    expect(lines).toHaveLength(2501);
    // Every line different: past 1,000 edits, all removed then all added (bounded time).
    const other = long.map((l) => `other ${l}`);
    const started = performance.now();
    const apart = diffTexts(long.join('\n'), other.join('\n'));
    expect(performance.now() - started).toBeLessThan(2000);
    expect(apart.slice(0, 2500).every((l) => l.mark === '-')).toBe(true);
    expect(apart.slice(2500).every((l) => l.mark === '+')).toBe(true);
    expect(apart).toHaveLength(5000);
  });
});
