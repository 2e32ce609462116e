/** Config sections (agent.yaml) of the edge plugin. */
import { Type, type Static } from '@agent/sdk';

const Argv = (def: string[], description: string) => Type.Array(Type.String({ minLength: 1 }), { minItems: 1, default: def, description });

export const EdgeConfig = Type.Object({
  proxy: Type.Object(
    {
      config_dir: Type.String({
        default: '/etc/nginx/agent',
        description: 'folder the agent owns; nginx.conf includes <config_dir>/agent.conf inside http {}',
      }),
      test_command: Argv(['nginx', '-t'], 'argv that tests the whole nginx configuration'),
      reload_command: Argv(['nginx', '-s', 'reload'], 'argv that reloads nginx'),
      http_port: Type.Integer({ minimum: 1, maximum: 65535, default: 80 }),
      https_port: Type.Integer({ minimum: 1, maximum: 65535, default: 443 }),
      listen_address: Type.String({ default: '', description: 'address the generated servers listen on (empty: all)' }),
      default_server: Type.Boolean({ default: true, description: 'render a default server that answers 404 (and logs) for unknown host names' }),
      webroot: Type.String({ default: '', description: 'ACME HTTP-01 webroot (default <config_dir>/acme-webroot)' }),
      access_log: Type.String({ default: '/var/log/nginx/agent-access.log', description: 'JSON access log written by the generated servers' }),
      error_log: Type.String({ default: '/var/log/nginx/error.log', description: 'nginx error log (a system log source)' }),
      upstream: Type.Union([Type.Literal('container_ip'), Type.Literal('published')], {
        default: 'container_ip',
        description: "how nginx reaches a service: the container's network address, or its port published on the host",
      }),
      worker_group: Type.String({ default: 'www-data', description: 'group of the nginx workers (htpasswd files are made readable to it)' }),
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
