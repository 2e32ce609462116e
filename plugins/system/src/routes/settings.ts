/** `GET/PUT /api/settings`: the settings with their schemas (a read), and a partial update (an operation). */
import { operationRoute, Type, type PluginContext, type SettingsRegistry } from '@agent/sdk';
import type { SettingsOperations } from '../operations/settings.js';
import { SettingInfo, type SettingsSchemas } from '../settings.js';

export function settingsRoutes(ctx: PluginContext, registry: SettingsRegistry, schemas: SettingsSchemas, ops: SettingsOperations): void {
  ctx.route({
    method: 'GET',
    path: '/settings',
    permission: 'settings:read',
    tag: 'settings',
    operationId: 'settings.get',
    summary: 'Current agent settings with their schemas; secrets masked; which ones need a restart',
    response: Type.Object({
      values: schemas.values as never,
      settings: Type.Array(SettingInfo),
      restart_required_keys: Type.Array(Type.String(), { description: 'settings that only take effect after a restart' }),
    }),
    handler: () => ({ values: registry.values(), settings: schemas.describe(), restart_required_keys: [...schemas.restartList] }),
  });

  ctx.route(
    operationRoute(ops.update, {
      method: 'PUT',
      path: '/settings',
      permission: 'settings:write',
      tag: 'settings',
      summary: 'Update agent settings (partial: only the keys sent change)',
      description:
        'Send `{<plugin>: {<setting>: value}}`. Unknown sections or keys answer 400. A masked secret sent back unchanged keeps its value. The answer lists the applied keys and those that need a restart.',
      body: ops.update.input,
      response: Type.Object({
        applied: Type.Array(Type.String()),
        restart_required: Type.Array(Type.String(), { description: 'applied keys that take effect after a restart' }),
        values: Type.Record(Type.String(), Type.Record(Type.String(), Type.Unknown())),
      }),
      input: (req) => req.body,
    }),
  );
}
