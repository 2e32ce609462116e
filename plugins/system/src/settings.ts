/**
 * Every plugin's runtime settings (from `coreServices.settings`) as the settings routes show and take them. The
 * documented schemas are completed in `start`, once every plugin has declared its settings: the OpenAPI document is
 * built lazily and reads them then. The core's request validator only checks the outer shape; the registry
 * validates each value.
 */
import { Type, type SettingDefinition, type SettingsRegistry } from '@agent/sdk';

type Json = Record<string, any>;

/** A partial update: `{<plugin>: {<setting>: value}}`. */
export type SettingsPatch = Record<string, Record<string, unknown>>;
/** The body's schema typed as what it validates (TypeBox's `TUnsafe`, which the SDK does not name). */
type PatchSchema = ReturnType<typeof Type.Unsafe<SettingsPatch>>;

export const SettingInfo = Type.Object({
  key: Type.String({ description: '`<plugin>.<setting>`' }),
  plugin: Type.String(),
  name: Type.String(),
  schema: Type.Record(Type.String(), Type.Unknown(), { description: 'JSON Schema of the value (type, enum, default, bounds)' }),
  default: Type.Unknown(),
  value: Type.Unknown({ description: 'current value; secrets are masked' }),
  apply: Type.Union([Type.Literal('live'), Type.Literal('restart')], { description: '`restart`: takes effect after the agent restarts' }),
  secret: Type.Boolean(),
  permission: Type.Optional(Type.String({ description: 'a permission needed beyond `settings:write` to change it' })),
  description: Type.Optional(Type.String()),
});

/** A plain JSON copy of a TypeBox schema (symbols dropped). */
const plain = (schema: unknown): Json => JSON.parse(JSON.stringify(schema)) as Json;

export const propsOf = (def: SettingDefinition): Record<string, Json> => (plain(def.schema).properties ?? {}) as Record<string, Json>;

export type SettingsSchemas = ReturnType<typeof settingsSchemas>;

/** The schemas of the settings' answer and body, completed by `complete()` (the same objects, which the routes hold). */
export function settingsSchemas(registry: SettingsRegistry) {
  const values: Json = Type.Object({}, { description: 'current values by plugin; secrets masked' });
  const body: Json = Type.Object(
    {},
    {
      additionalProperties: Type.Record(Type.String(), Type.Unknown()),
      description: 'a partial update: `{<plugin>: {<setting>: value}}`; unknown sections or keys are refused (400)',
    },
  );
  const restartList: string[] = [];

  return {
    values,
    // Typed as what it validates; it is still the object `complete()` fills in.
    body: body as unknown as PatchSchema,
    restartList,
    describe() {
      const current = registry.values();
      return registry.definitions().flatMap((def) =>
        Object.entries(propsOf(def)).map(([name, schema]) => ({
          key: `${def.plugin}.${name}`,
          plugin: def.plugin,
          name,
          schema,
          default: schema.default ?? null,
          value: current[def.plugin]?.[name] ?? null,
          apply: def.restart.includes(name) ? ('restart' as const) : ('live' as const),
          secret: def.secret.includes(name),
          ...(def.permissions[name] ? { permission: def.permissions[name] } : {}),
          ...(typeof schema.description === 'string' ? { description: schema.description } : {}),
        })),
      );
    },
    complete() {
      for (const def of registry.definitions()) {
        const props = propsOf(def);
        const shown: Record<string, Json> = {};
        const editable: Record<string, Json> = {};
        for (const [name, schema] of Object.entries(props)) {
          const restart = def.restart.includes(name);
          const secret = def.secret.includes(name);
          if (restart) restartList.push(`${def.plugin}.${name}`);
          const marks = { 'x-apply': restart ? 'restart' : 'live', ...(secret ? { 'x-secret': true } : {}) };
          // A masked secret is shown as a string whatever its type.
          shown[name] = secret ? { type: 'string', description: schema.description, ...marks } : { ...schema, ...marks };
          editable[name] = secret ? { ...schema, writeOnly: true, ...marks } : { ...schema, ...marks };
        }
        values.properties[def.plugin] = { type: 'object', properties: shown, required: Object.keys(shown) };
        body.properties[def.plugin] = { type: 'object', properties: editable };
      }
      // Sections are not `required`: a plugin that fails in `start` after this ran withdraws its settings.
      body.additionalProperties = false;
    },
  };
}
