/**
 * A message the app sends through the agent's `POST /api/notifications/send`: the app reaches the notifications
 * plugin over the agent's HTTP API (it is another process), so this is that request's body, not a service contract.
 */
export interface Notice {
  event: 'alert.fired' | 'alert.resolved' | 'health.recovered' | 'health.gave_up';
  severity: 'info' | 'warning' | 'critical';
  title: string;
  message: string;
  deployment?: string | null;
  targets?: string[];
}
