/**
 * `GET/PUT /api/settings`: every plugin's runtime settings (from `coreServices.settings`). The documented schemas
 * are completed in `start`, once every plugin has declared its settings: the OpenAPI document is built lazily and
 * reads them then. The core's request validator only checks the outer shape; the registry validates each value.
 */
import { errors, Type, type PluginContext, type SettingDefinition, type SettingsRegistry } from '@agent/sdk';

type Json = Record<string, any>;

const SettingInfo = Type.Object({
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

const propsOf = (def: SettingDefinition): Record<string, Json> => (plain(def.schema).properties ?? {}) as Record<string, Json>;

export function registerSettingsRoutes(ctx: PluginContext, registry: SettingsRegistry): { complete(): void } {
  // Completed in `complete()`: the per-plugin sections of the answer and of the body.
  const valuesSchema: Json = Type.Object({}, { description: 'current values by plugin; secrets masked' });
  const bodySchema: Json = Type.Object(
    {},
    {
      additionalProperties: Type.Record(Type.String(), Type.Unknown()),
      description: 'a partial update: `{<plugin>: {<setting>: value}}`; unknown sections or keys are refused (400)',
    },
  );
  const restartList: string[] = [];

  const describe = () => {
    const values = registry.values();
    return registry.definitions().flatMap((def) =>
      Object.entries(propsOf(def)).map(([name, schema]) => ({
        key: `${def.plugin}.${name}`,
        plugin: def.plugin,
        name,
        schema,
        default: schema.default ?? null,
        value: values[def.plugin]?.[name] ?? null,
        apply: def.restart.includes(name) ? ('restart' as const) : ('live' as const),
        secret: def.secret.includes(name),
        ...(def.permissions[name] ? { permission: def.permissions[name] } : {}),
        ...(typeof schema.description === 'string' ? { description: schema.description } : {}),
      })),
    );
  };

  ctx.route({
    method: 'GET',
    path: '/settings',
    permission: 'settings:read',
    tag: 'settings',
    operationId: 'settings.get',
    summary: 'Current agent settings with their schemas; secrets masked; which ones need a restart',
    response: Type.Object({
      values: valuesSchema as never,
      settings: Type.Array(SettingInfo),
      restart_required_keys: Type.Array(Type.String(), { description: 'settings that only take effect after a restart' }),
    }),
    handler: () => ({ values: registry.values(), settings: describe(), restart_required_keys: [...restartList] }),
  });

  ctx.route({
    method: 'PUT',
    path: '/settings',
    permission: 'settings:write',
    tag: 'settings',
    operationId: 'settings.update',
    summary: 'Update agent settings (partial: only the keys sent change)',
    description:
      'Send `{<plugin>: {<setting>: value}}`. Unknown sections or keys answer 400. A masked secret sent back unchanged keeps its value. The answer lists the applied keys and those that need a restart.',
    body: bodySchema as never,
    response: Type.Object({
      applied: Type.Array(Type.String()),
      restart_required: Type.Array(Type.String(), { description: 'applied keys that take effect after a restart' }),
      values: Type.Record(Type.String(), Type.Record(Type.String(), Type.Unknown())),
    }),
    handler: async (req) => {
      const patch = req.body as Record<string, Record<string, unknown>>;
      const defs = new Map(registry.definitions().map((d) => [d.plugin, d]));
      const current = registry.values();
      for (const [plugin, values] of Object.entries(patch)) {
        const def = defs.get(plugin);
        if (!def) throw errors.badRequest(`body.${plugin}: unknown settings section`, 'VALIDATION_FAILED', { field: plugin });
        const known = propsOf(def);
        for (const key of Object.keys(values)) {
          if (!(key in known)) throw errors.badRequest(`body.${plugin}.${key}: unknown setting`, 'VALIDATION_FAILED', { field: `${plugin}.${key}` });
          const needed = def.permissions[key];
          // Sending a guarded value back unchanged (a read-modify-write of the whole settings) needs nothing more.
          if (needed && current[plugin]?.[key] !== values[key] && !req.principal.can(needed))
            throw errors.forbidden(`changing ${plugin}.${key} needs the permission '${needed}'`);
        }
      }
      const result = await registry.update(patch);
      return { ...result, values: registry.values() };
    },
  });

  return {
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
        valuesSchema.properties[def.plugin] = { type: 'object', properties: shown, required: Object.keys(shown) };
        bodySchema.properties[def.plugin] = { type: 'object', properties: editable };
      }
      // Sections are not `required`: a plugin that fails in `start` after this ran withdraws its settings.
      bodySchema.additionalProperties = false;
    },
  };
}
