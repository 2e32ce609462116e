/** What the observability plugin offers the others: the metric catalogue and its events (alerts, container health). */
import '@agent/sdk';

export * from './metrics.js';

declare module '@agent/sdk' {
  interface AgentEvents {
    'alert.fired': { rule: string; deployment?: string | null; container?: string; value: number; message: string };
    'alert.resolved': { rule: string; deployment?: string | null; container?: string; message: string };
    'health.recovered': { container: string; deployment: string | null; message: string };
    'health.gave_up': { container: string; deployment: string | null; message: string };
  }
}
