/**
 * The `notify` service: sends a message to the configured notification targets (provided by the notifications
 * plugin). Delivery is asynchronous (queued per target, retried with backoff); `send` only routes and queues.
 */
import { createServiceRef } from '@agent/sdk';

export type NotificationSeverity = 'info' | 'warning' | 'critical';

/** Kinds of messages targets can subscribe to. */
export const NOTIFICATION_EVENTS = [
  'alert.fired',
  'alert.resolved',
  'health.recovered',
  'health.gave_up',
  'backup.failed',
  'deployment.failed',
  'certificate.renewal_failed',
  'certificate.expiring',
  'security.ip_blocked',
  'test',
] as const;
export type NotificationEvent = (typeof NOTIFICATION_EVENTS)[number];

export interface NotificationMessage {
  event: NotificationEvent;
  severity: NotificationSeverity;
  /** One line. */
  title: string;
  message: string;
  /** The deployment the message is about (targets restricted to deployments only get theirs). */
  deployment?: string | null;
  /**
   * Target ids or names to send to, whatever their event/severity filters (disabled targets are skipped).
   * Empty or absent: every enabled target whose filters match.
   */
  targets?: string[];
}

export interface NotificationsService {
  /** Routes and queues a message; resolves with the ids of the targets it was queued for. */
  send(message: NotificationMessage): Promise<{ queued: string[] }>;
}

export const notificationsService = createServiceRef<NotificationsService>('notify', 'notification delivery to the configured targets');
