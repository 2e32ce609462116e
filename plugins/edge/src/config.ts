/** Config sections (agent.yaml) of the edge plugin. */
import { Type, type Static } from '@agent/sdk';

const Argv = (description: string) => Type.Array(Type.String({ minLength: 1 }), { minItems: 1, description });

export const EdgeConfig = Type.Object({
  // Keys that depend on the mode have no schema default: settings.ts gives each mode its own (and a key that names
  // the host's nginx, set without a mode, means system mode: a configuration written before own mode existed).
  proxy: Type.Object(
    {
      mode: Type.Optional(
        Type.Union([Type.Literal('own'), Type.Literal('system')], {
          description:
            "own: the agent runs its own nginx (config, logs, pid under the data folder; ports 8080/8443); system: the host's nginx (80/443, " +
            '/etc/nginx/agent, nginx -s reload). Default: own, unless config_dir, test_command or reload_command is set',
        }),
      ),
      nginx: Type.String({
        minLength: 1,
        default: 'nginx',
        description: 'own mode: the nginx program (a name looked up in PATH and the sbin folders, or a path)',
      }),
      config_dir: Type.Optional(
        Type.String({ minLength: 1, description: 'system mode: folder the agent owns, included by nginx.conf inside http {} (default /etc/nginx/agent)' }),
      ),
      test_command: Type.Optional(Argv('system mode: argv that tests the whole nginx configuration (default nginx -t)')),
      reload_command: Type.Optional(Argv('system mode: argv that reloads nginx (default nginx -s reload)')),
      http_port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535, description: 'HTTP port of the generated servers (own 8080, system 80)' })),
      https_port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535, description: 'HTTPS port of the generated servers (own 8443, system 443)' })),
      listen_address: Type.String({ default: '', description: 'address the generated servers listen on (empty: all)' }),
      default_server: Type.Boolean({ default: true, description: 'render a default server that answers 404 (and logs) for unknown host names' }),
      webroot: Type.String({ default: '', description: 'ACME HTTP-01 webroot (default <config_dir>/acme-webroot)' }),
      access_log: Type.Optional(
        Type.String({
          minLength: 1,
          description: 'JSON access log of the generated servers (own: under the data folder; system: /var/log/nginx/agent-access.log)',
        }),
      ),
      error_log: Type.Optional(
        Type.String({ minLength: 1, description: 'nginx error log, a system log source (own: under the data folder; system: /var/log/nginx/error.log)' }),
      ),
      upstream: Type.Union([Type.Literal('container_ip'), Type.Literal('published')], {
        default: 'container_ip',
        description: "how nginx reaches a service: the container's network address, or its port published on the host",
      }),
      worker_group: Type.String({
        default: 'www-data',
        description: "system mode: group of the host nginx's workers (htpasswd files are made readable to it)",
      }),
    },
    { default: {} },
  ),
  certificates: Type.Object(
    {
      directory_url: Type.String({ default: 'https://acme-v02.api.letsencrypt.org/directory' }),
      email: Type.String({ default: '', description: 'ACME account contact (optional)' }),
      renew_before_days: Type.Integer({ minimum: 1, maximum: 89, default: 30 }),
      directory_ca_file: Type.String({ default: '', description: 'extra CA (PEM) trusted for the ACME directory (test CAs)' }),
      renew_cron: Type.String({ default: '17 3 * * *', description: 'when the daily renewal job runs' }),
    },
    { default: {} },
  ),
  traffic: Type.Object(
    {
      retention_days: Type.Integer({ minimum: 1, default: 30 }),
      follow_interval_ms: Type.Integer({ minimum: 50, maximum: 2000, default: 300, description: 'how often the access log is read in real-time mode' }),
      scan_cron: Type.String({ default: '* * * * *', description: 'periodic scan of the access log when real-time capture is off' }),
      infrastructure_label: Type.String({
        default: 'agent.infrastructure',
        description: 'label marking shared infrastructure containers (system log sources)',
      }),
    },
    { default: {} },
  ),
});
export type EdgeConfig = Static<typeof EdgeConfig>;
