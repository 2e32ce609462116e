/** Request and answer schemas of the infrastructure routes, each input declared once. */
import { deploymentName, Nullable, Type } from '@agent/sdk';
import { TEMPLATES } from './templates.js';

const NAME = '^[a-z][a-z0-9-]{0,31}$';
const SettingValue = Type.Union([Type.String({ maxLength: 256 }), Type.Number(), Type.Boolean()]);
const SettingsPatch = Type.Record(Type.String({ pattern: '^[a-z][a-z0-9_]{0,31}$' }), SettingValue, { maxProperties: 32 });

const Health = Type.Unsafe<string>({ type: 'string', enum: ['healthy', 'unhealthy', 'starting', 'none'] });
export const Status = Type.Object({
  name: Type.String(),
  description: Type.String(),
  template: Type.String(),
  status: Type.Unsafe<string>({ type: 'string', enum: ['running', 'stopped', 'partial', 'starting', 'failed', 'not_created'] }),
  health: Health,
  enabled: Type.Boolean(),
  services: Type.Array(
    Type.Object({
      name: Type.String(),
      status: Type.String(),
      health: Health,
      container_id: Nullable(Type.String()),
      image: Nullable(Type.String()),
    }),
  ),
  ports: Type.Array(
    Type.Object({
      service: Type.String(),
      host_ip: Nullable(Type.String()),
      host_port: Nullable(Type.Integer()),
      container_port: Type.Integer(),
      protocol: Type.String(),
    }),
  ),
  networks: Type.Array(Type.String()),
  settings: Type.Record(Type.String(), SettingValue),
});

export const NameParams = Type.Object({ name: Type.String({ pattern: NAME, description: `one of ${TEMPLATES.map((t) => t.name).join(', ')}` }) });

/** `PUT /infrastructure/:name/settings`. */
export const Configure = Type.Object({ settings: SettingsPatch });
export const ConfigureInput = Type.Composite([NameParams, Configure]);
/** `POST /infrastructure/:name/start`. */
export const Start = Type.Object({ settings: Type.Optional(SettingsPatch) });
export const StartInput = Type.Composite([NameParams, Start]);

export const LogsQuery = Type.Object({
  tail: Type.Optional(Type.Integer({ minimum: 0, maximum: 10000, default: 100 })),
  filter: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'case-insensitive substring' })),
  service: Type.Optional(Type.String({ pattern: '^[a-z][a-z0-9_-]{0,31}$' })),
});
export const LogLines = Type.Array(Type.Object({ service: Type.String(), stream: Type.String(), time: Nullable(Type.String()), text: Type.String() }));

export const NetworkView = Type.Object({ name: Type.String(), description: Type.String() });
/** The params of the attach and detach routes: one of the shared networks of this agent (their names depend on its config). */
export const networkParams = (names: string[]) => Type.Object({ network: Type.Unsafe<string>({ type: 'string', enum: names }) });
/** `POST /infrastructure/networks/:network/attach` and `detach`. */
export const Attach = Type.Object({
  deployment: deploymentName(),
  service: Type.Optional(Type.String({ pattern: '^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$', description: 'only this compose service (default: all)' })),
});
export const Attached = Type.Object({ network: Type.String(), deployment: Type.String(), containers: Type.Array(Type.String()) });
