/** Response and body schemas shared by several route modules. */
import { deploymentName, Nullable, RecordId, Type, type Static } from '@agent/sdk';

export const SERVICE_NAME = '^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$';

export const Domain = Type.Object({
  id: Type.Integer(),
  deployment: Type.String(),
  service: Type.String(),
  domain: Type.String(),
  container_port: Type.Integer(),
  path_prefix: Type.String(),
  strip_prefix: Type.Boolean(),
  ssl: Type.Object({ enabled: Type.Boolean() }),
  aliases: Type.Array(Type.String()),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
  upstream: Nullable(
    Type.String({
      description: "ip:port nginx forwards to (null: the service has no running container); a swarm service's tasks: several, separated by commas",
    }),
  ),
  https: Type.Boolean({ description: 'nginx serves this domain over HTTPS (certificate present)' }),
});

export const DomainBody = {
  service: Type.String({ pattern: SERVICE_NAME, description: 'compose service the domain routes to' }),
  domain: Type.String({ maxLength: 253, description: 'host name' }),
  container_port: Type.Integer({ minimum: 1, maximum: 65535, description: 'port inside the container' }),
  path_prefix: Type.String({ maxLength: 512, default: '/', description: 'URL path prefix' }),
  strip_prefix: Type.Boolean({ default: false, description: 'remove the prefix before forwarding' }),
  ssl: Type.Object({ enabled: Type.Boolean() }, { description: 'obtain a certificate and serve HTTPS' }),
  aliases: Type.Array(Type.String({ maxLength: 253 }), { maxItems: 50, description: 'additional host names' }),
};

/** A domain entry as a request gives it (only service, domain and port are required). */
export const DomainAdd = Type.Object({
  service: DomainBody.service,
  domain: DomainBody.domain,
  container_port: DomainBody.container_port,
  path_prefix: Type.Optional(DomainBody.path_prefix),
  strip_prefix: Type.Optional(DomainBody.strip_prefix),
  ssl: Type.Optional(DomainBody.ssl),
  aliases: Type.Optional(DomainBody.aliases),
});
export type DomainInput = Static<typeof DomainAdd>;
export const DomainUpdate = Type.Partial(DomainAdd);

export const NameParams = Type.Object({ name: deploymentName() });
export const DomainIdParams = Type.Object({ name: deploymentName(), domainId: RecordId('domain entry id') });
