/**
 * The scale of a swarm deployment's services set through the API (`POST /deployments/:name/scale`) outlives the
 * deploys of the same file: each is kept in the deployment's record with the file's own `deploy.replicas` of that
 * moment, and every deploy of the file runs with it, written into the compose text that goes through the compose
 * guard (like a rollback's pins: the model checked is the one that runs). Once the file's `deploy.replicas` of that
 * service is another than it was (an update, a rollback to a revision that said otherwise), the file decides again
 * and the kept scale is dropped.
 */
import { isMap, parseDocument } from 'yaml';

/** service → the replicas set through the API, and the file's `deploy.replicas` then (as written; null: none). */
export type ScaleOverrides = Record<string, { replicas: number; file: number | string | null }>;

/** The `deploy.replicas` of each service as the compose text writes it (null when it gives none). */
export function fileReplicas(content: string): Record<string, number | string | null> {
  const doc = parseDocument(content, { merge: true });
  const services = doc.get('services', true);
  const out: Record<string, number | string | null> = {};
  if (!isMap(services)) return out;
  for (const item of services.items) {
    const service = String((item.key as { value?: unknown } | null)?.value ?? item.key);
    const value: unknown = isMap(item.value) ? item.value.getIn(['deploy', 'replicas']) : undefined;
    out[service] = typeof value === 'number' || typeof value === 'string' ? value : null;
  }
  return out;
}

/** The overrides that still hold for this compose text (the file's replicas unchanged since the scale). */
export function holdingScale(content: string, overrides: ScaleOverrides | undefined): ScaleOverrides {
  if (!overrides || !Object.keys(overrides).length) return {};
  const now = fileReplicas(content);
  return Object.fromEntries(Object.entries(overrides).filter(([service, o]) => service in now && now[service] === o.file));
}

/** The compose text with the replicas of each override that still holds. */
export function scaleContent(content: string, overrides: ScaleOverrides | undefined): string {
  const holding = holdingScale(content, overrides);
  if (!Object.keys(holding).length) return content;
  const doc = parseDocument(content, { merge: true, uniqueKeys: true });
  if (doc.errors.length) return content;
  for (const [service, o] of Object.entries(holding)) {
    const def = doc.getIn(['services', service], true);
    // A service spelled through an alias would scale every service sharing that node: the file decides for it.
    if (!isMap(def)) continue;
    doc.setIn(['services', service, 'deploy', 'replicas'], o.replicas);
  }
  return doc.toString();
}
