/** What the security plugin tells the others: its events. */
import '@agent/sdk';

declare module '@agent/sdk' {
  interface AgentEvents {
    /** An address was blocked in the proxy, by a request (`auto: false`) or by the detection (`auto: true`). */
    'security.ip_blocked': { ip: string; reason: string; deployment?: string | null; auto: boolean };
  }
}
