/**
 * A revision against the deployment now: the compose diff from the current file to the revision's, the `.env`
 * keys that differ (never values), and the image of each service (what the containers run now, what the revision
 * ran). What a rollback to it would change; its plan shows the same.
 */
import type { PlanChange } from '@agent/sdk';
import type { DeploymentManager } from './manager.js';
import type { Entry } from './records.js';
import { composeDiff } from './plans.js';
import type { RevisionImage, RevisionRecord } from './revisions.js';

export interface RevisionDiff {
  against: 'current';
  compose: string;
  env: { added: string[]; changed: string[]; removed: string[] };
  images: { service: string; current: { image: string; id: string | null } | null; revision: RevisionImage | null; changed: boolean }[];
}

/** Keys of `to` that `from` lacks, has with another value, or has and `to` lacks. */
export function envKeys(from: Record<string, string>, to: Record<string, string>): RevisionDiff['env'] {
  return {
    added: Object.keys(to).filter((k) => !(k in from)),
    changed: Object.keys(to).filter((k) => k in from && from[k] !== to[k]),
    removed: Object.keys(from).filter((k) => !(k in to)),
  };
}

/** The image each service's container runs now; null when the engine does not answer. */
async function imagesNow(manager: DeploymentManager, entry: Entry): Promise<Map<string, { image: string; id: string | null }> | null> {
  try {
    const out = new Map<string, { image: string; id: string | null }>();
    for (const c of await manager.opts.docker.images.ofProject(entry.name)) {
      if (!c.service || (out.has(c.service) && c.state !== 'running')) continue;
      out.set(c.service, { image: c.image, id: c.image_id });
    }
    return out;
  } catch {
    return null;
  }
}

export async function revisionDiff(
  manager: DeploymentManager,
  entry: Entry,
  record: RevisionRecord,
  env: Record<string, string>,
  current?: { content: string; env: Record<string, string> },
): Promise<RevisionDiff> {
  const now = current ?? (await manager.source(entry));
  const running = await imagesNow(manager, entry);
  const services = [
    ...new Set([...Object.keys(record.images), ...(running ? running.keys() : []), ...Object.keys((record.model?.services ?? {}) as object)]),
  ].sort();
  return {
    against: 'current',
    compose: now.content === record.compose_content ? '' : composeDiff(entry.composeFile, now.content, record.compose_content),
    env: envKeys(now.env, env),
    images: services.map((service) => {
      const was = record.images[service] ?? null;
      const is = running?.get(service) ?? null;
      return { service, current: is, revision: was, changed: (was?.id ?? null) !== (is?.id ?? null) };
    }),
  };
}

/** The same, as the changes of a plan (a rollback's preview). */
export function diffChanges(entry: Entry, diff: RevisionDiff, pins: Record<string, string>): PlanChange[] {
  const changes: PlanChange[] = [];
  if (diff.compose) changes.push({ type: 'file', id: entry.composeFile, actions: ['update'], diff: diff.compose });
  if (diff.env.added.length || diff.env.changed.length || diff.env.removed.length)
    changes.push({ type: 'file', id: '.env', actions: ['update'], after: { ...diff.env } });
  for (const i of diff.images) {
    const pin = pins[i.service];
    changes.push({
      type: 'image',
      id: i.service,
      actions: [pin && i.changed ? 'update' : pin ? 'no-op' : 'update'],
      before: i.current ?? undefined,
      after: pin
        ? { pinned: pin, image: i.revision?.image ?? null, id: i.revision?.id ?? null }
        : { pinned: null, image: i.revision?.image ?? null, resolved: 'from its tag now' },
    });
  }
  return changes;
}
