/** What the edge plugin tells the others: its events (certificates and blocks). */
import '@agent/sdk';

declare module '@agent/sdk' {
  interface AgentEvents {
    'certificate.issued': { domain: string };
    'certificate.renewal_failed': { domain: string; error: string };
    'certificate.expiring': { domain: string; days_left: number };
    'security.ip_blocked': { ip: string; reason: string; deployment?: string | null; auto: boolean };
  }
}
