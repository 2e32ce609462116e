/** Request and answer schemas of the credentials and registries routes, each input declared once. */
import { Nullable, RecordId, Secret, Type } from '@agent/sdk';
import { MASK } from './credentials.js';
import { REGISTRY_HOST, REGISTRY_TYPES, SLUG } from './registries.js';

export const CredentialView = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  type: Type.Literal('registry'),
  registry: Type.String({ description: 'slug of the registry configuration' }),
  registry_host: Nullable(Type.String()),
  credentials: Type.Object({ username: Type.String(), password: Type.Literal(MASK, { description: 'always masked' }) }),
  description: Type.String(),
  created_at: Type.String(),
  updated_at: Type.String(),
  last_test: Nullable(Type.Object({ at: Type.String(), valid: Type.Boolean(), message: Type.String() })),
  bound_url: Type.String({ description: 'the registry URL the password was entered for: it is sent nowhere else' }),
  bound: Type.Boolean({ description: 'false when the registry now answers at another URL: re-enter the password to use the credential there' }),
});

export const IdParams = Type.Object({ id: RecordId('credential id') });
const Name = Type.String({ minLength: 1, maxLength: 100 });
const Username = Type.String({ minLength: 1, maxLength: 256, pattern: '^[^\\s:]+$', description: 'no spaces or colons' });

/** `POST /credentials`. */
export const CreateCredential = Type.Object({
  name: Name,
  type: Type.Literal('registry'),
  registry: Type.Optional(Type.String({ pattern: SLUG, default: 'dockerhub' })),
  credentials: Type.Object({ username: Username, password: Secret({ minLength: 1, maxLength: 4096 }) }),
  description: Type.Optional(Type.String({ maxLength: 500 })),
});

/** `PUT /credentials/:id`. */
export const UpdateCredential = Type.Object({
  name: Type.Optional(Name),
  registry: Type.Optional(Type.String({ pattern: SLUG })),
  credentials: Type.Optional(Type.Object({ username: Type.Optional(Username), password: Type.Optional(Secret({ minLength: 1, maxLength: 4096 })) })),
  description: Type.Optional(Type.String({ maxLength: 500 })),
});
export const UpdateCredentialInput = Type.Composite([IdParams, UpdateCredential]);

export const TestResult = Type.Object({
  valid: Type.Boolean(),
  message: Type.String(),
  registry: Type.String(),
  url: Type.String(),
  status: Nullable(Type.Integer()),
});

const RegistryType = Type.Union(REGISTRY_TYPES.map((t) => Type.Literal(t)));
export const RegistryView = Type.Object({
  slug: Type.String(),
  name: Type.String(),
  type: RegistryType,
  host: Type.String(),
  insecure: Type.Boolean(),
  description: Type.String(),
  builtin: Type.Boolean(),
  created_at: Nullable(Type.String()),
  updated_at: Nullable(Type.String()),
});
export const SlugParams = Type.Object({ slug: Type.String({ pattern: SLUG }) });
const Host = Type.String({
  pattern: REGISTRY_HOST,
  description: '`host[:port]` as written in image references, e.g. `registry.example.com` or `127.0.0.1:5000`',
});

/** `POST /registries`. */
export const CreateRegistry = Type.Object({
  slug: Type.String({ pattern: SLUG }),
  name: Type.String({ minLength: 1, maxLength: 100 }),
  host: Host,
  type: Type.Optional(Type.Union([Type.Literal('generic'), Type.Literal('gitlab')], { default: 'generic' })),
  insecure: Type.Optional(Type.Boolean({ default: false, description: 'plain HTTP (loopback registries always use HTTP)' })),
  description: Type.Optional(Type.String({ maxLength: 500 })),
});

/** `PUT /registries/:slug`. */
export const UpdateRegistry = Type.Object({
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
  host: Type.Optional(Host),
  insecure: Type.Optional(Type.Boolean()),
  description: Type.Optional(Type.String({ maxLength: 500 })),
  credentials: Type.Optional(
    Type.Array(
      Type.Object({
        id: RecordId('a credential of this registry'),
        password: Secret({ minLength: 1, maxLength: 4096, description: 'its password, entered again for the new URL' }),
      }),
      { maxItems: 100, description: "passwords of this registry's credentials, re-entered when the URL changes" },
    ),
  ),
});
export const UpdateRegistryInput = Type.Composite([SlugParams, UpdateRegistry]);
