/**
 * Pinning: the images a rollback runs are the ones its revision ran, whatever their tags point at now. Each pinned
 * service's `image` becomes `<repo>@sha256:…` (an image pulled from a registry) or the image id `sha256:…` (built or
 * tagged on this host), written into the compose text that goes through the compose guard: the pinned file is
 * checked like any other, and the guard runs exactly that model.
 */
import { isMap, parseDocument } from 'yaml';
import { errors } from '@agent/sdk';

/** The compose text with each pinned service running its pinned reference (a service that builds no longer builds). */
export function pinContent(content: string, pins: Record<string, string>): string {
  if (!Object.keys(pins).length) return content;
  const doc = parseDocument(content, { merge: true, uniqueKeys: true });
  if (doc.errors.length) throw errors.badRequest(`compose file: ${doc.errors[0]!.message.split('\n')[0]}`, 'INVALID_YAML');
  for (const [service, ref] of Object.entries(pins)) {
    const def = doc.getIn(['services', service], true);
    // A service spelled through an alias (`web: *base`) would pin every service sharing that node.
    if (!isMap(def)) throw errors.conflict(`service '${service}' cannot be pinned: it is not a mapping of its own in the compose file`, 'PIN_FAILED');
    def.set('image', ref);
    // The image is the one that ran: building again would make another one.
    def.delete('build');
    // `pull_policy: always|build` would pull or build instead of running the pinned image.
    def.delete('pull_policy');
  }
  return doc.toString();
}
