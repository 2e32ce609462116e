import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { Type } from '@agent/sdk';
import { describe, expect, it } from 'vitest';
import { closeObjects, defaultsOf } from '../src/openapi/validation.js';

/** What the agent did before `defaultsOf`: validate `{}` with ajv's useDefaults. */
function ajvDefaults(schema: unknown): Record<string, unknown> | null {
  const validate = new Ajv2020({ strict: false, useDefaults: true, validateSchema: false }).compile(closeObjects(schema));
  const value: Record<string, unknown> = {};
  return validate(value) ? value : null;
}

const ROOT = join(import.meta.dirname, '..', '..');

describe('defaultsOf (config and settings sections left out)', () => {
  it('gives what ajv useDefaults gives for every config section of the built-in plugins', async () => {
    let sections = 0;
    for (const name of readdirSync(join(ROOT, 'plugins'))) {
      const mod = (await import(pathToFileURL(join(ROOT, 'plugins', name, 'src', 'index.ts')).href)) as {
        default: { config?: { properties?: Record<string, unknown> } };
      };
      for (const [section, schema] of Object.entries(mod.default.config?.properties ?? {})) {
        expect({ section, value: defaultsOf(schema) }).toEqual({ section, value: ajvDefaults(schema) });
        sections++;
      }
    }
    expect(sections).toBeGreaterThan(5);
  });

  it('fills nested objects, copies defaults, and gives null when a required field has no default', () => {
    const list: string[] = [];
    const schema = Type.Object({
      a: Type.Integer({ default: 3 }),
      nested: Type.Object({ b: Type.String({ default: 'x' }), c: Type.Optional(Type.Boolean()) }, { default: {} }),
      absent: Type.Optional(Type.Object({ d: Type.Integer({ default: 1 }) })),
      list: Type.Array(Type.String(), { default: list }),
    });
    const value = defaultsOf(schema)!;
    expect(value).toEqual({ a: 3, nested: { b: 'x' }, list: [] });
    expect(value).toEqual(ajvDefaults(schema));
    expect(value.list).not.toBe(list);
    expect(defaultsOf(Type.Object({ must: Type.String() }))).toBeNull();
    expect(ajvDefaults(Type.Object({ must: Type.String() }))).toBeNull();
  });
});
