/** Turns bus events into notification messages. */
import type { EventBus, Logger } from '@agent/sdk';
import type { NotificationMessage } from './api.js';
// The events it turns into messages are declared by the plugins that emit them.
import type {} from '@agent/plugin-backups/api';
import type {} from '@agent/plugin-deployments/api';
import type {} from '@agent/plugin-edge/api';
import type {} from '@agent/plugin-observability/api';
import type {} from '@agent/plugin-security/api';

export function subscribeToEvents(bus: EventBus, send: (m: NotificationMessage) => Promise<unknown>, log: Logger): void {
  const emit = (m: NotificationMessage) => {
    send(m).catch((err: unknown) => log.warn('could not queue a notification', { event: m.event, error: String(err) }));
  };
  bus.on('alert.fired', (e) =>
    emit({ event: 'alert.fired', severity: 'warning', title: `Alert firing: ${e.rule}`, message: e.message, deployment: e.deployment ?? null }),
  );
  bus.on('alert.resolved', (e) =>
    emit({ event: 'alert.resolved', severity: 'info', title: `Alert resolved: ${e.rule}`, message: e.message, deployment: e.deployment ?? null }),
  );
  bus.on('health.recovered', (e) =>
    emit({ event: 'health.recovered', severity: 'info', title: `Container recovered: ${e.container}`, message: e.message, deployment: e.deployment }),
  );
  bus.on('health.gave_up', (e) =>
    emit({ event: 'health.gave_up', severity: 'critical', title: `Container still unhealthy: ${e.container}`, message: e.message, deployment: e.deployment }),
  );
  bus.on('backup.finished', (e) => {
    if (e.success) return;
    emit({
      event: 'backup.failed',
      severity: 'critical',
      title: `Backup failed: ${e.deployment}`,
      message: `Backup ${e.id} of ${e.deployment} failed: ${e.error ?? 'unknown error'}`,
      deployment: e.deployment,
    });
  });
  bus.on('deployment.failed', (e) =>
    emit({ event: 'deployment.failed', severity: 'critical', title: `Deployment failed to start: ${e.name}`, message: e.error, deployment: e.name }),
  );
  bus.on('certificate.renewal_failed', (e) =>
    emit({ event: 'certificate.renewal_failed', severity: 'critical', title: `Certificate renewal failed: ${e.domain}`, message: e.error }),
  );
  bus.on('certificate.expiring', (e) =>
    emit({
      event: 'certificate.expiring',
      severity: e.days_left <= 7 ? 'critical' : 'warning',
      title: `Certificate expiring: ${e.domain}`,
      message: `The certificate of ${e.domain} expires in ${e.days_left} day(s).`,
    }),
  );
  bus.on('security.ip_blocked', (e) => {
    if (!e.auto) return;
    emit({
      event: 'security.ip_blocked',
      severity: 'warning',
      title: `IP auto-blocked: ${e.ip}`,
      message: `${e.ip} was blocked automatically: ${e.reason}`,
      deployment: e.deployment ?? null,
    });
  });
}
