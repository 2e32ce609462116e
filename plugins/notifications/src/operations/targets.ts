/**
 * The notification targets' operations: replacing the list, and a test message (one attempt, now) to a URL or a
 * stored target. `prepare` runs every check (names, ids, URLs; a masked URL only for the target it was read from;
 * either a URL or a target that exists) and gives `apply` the resolved targets or URL; `apply` stores or sends.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { defineOperation, errors, HttpError, type Document } from '@agent/sdk';
import type { Dispatcher, Target } from '../dispatcher.js';
import { TestMessage, Targets, targetView, type TargetsInput } from '../schemas.js';
import { DeliveryError } from '../senders.js';
import { MASK, maskTargetUrl, parseTargetUrl, TargetUrlError } from '../targets.js';

export type TargetOperations = ReturnType<typeof targetOperations>;

export function targetOperations(doc: Document<{ targets: Target[] }>, dispatcher: Dispatcher) {
  /** Validates the new list; a masked URL equal to the stored target's masked URL keeps the stored URL. */
  const resolveTargets = (input: TargetsInput): Target[] => {
    const names = new Set<string>();
    const ids = new Set<string>();
    return input.map((t, i) => {
      const label = `targets[${i}] '${t.name}'`;
      if (names.has(t.name)) throw errors.badRequest(`${label}: duplicate name`, 'VALIDATION_FAILED', { field: `[${i}].name`, target: t.name });
      names.add(t.name);
      const previous = t.id ? doc.data.targets.find((p) => p.id === t.id) : undefined;
      let url = t.url;
      if (url.includes(MASK)) {
        if (!previous || maskTargetUrl(previous.url) !== url) {
          throw errors.badRequest(`${label}: the url contains a masked secret (****); send the full URL`, 'INVALID_TARGET_URL', {
            field: `[${i}].url`,
            target: t.name,
          });
        }
        url = previous.url;
      }
      try {
        parseTargetUrl(url);
      } catch (err) {
        if (!(err instanceof TargetUrlError)) throw err;
        throw errors.badRequest(`${label}: invalid url: ${err.message}`, 'INVALID_TARGET_URL', { field: `[${i}].url`, target: t.name });
      }
      const id = t.id ?? randomUUID().slice(0, 8);
      if (ids.has(id)) throw errors.badRequest(`${label}: duplicate id '${id}'`, 'VALIDATION_FAILED', { field: `[${i}].id`, target: t.name });
      ids.add(id);
      return {
        id,
        name: t.name,
        url,
        enabled: t.enabled ?? true,
        events: t.events ?? [],
        severities: t.severities ?? [],
        deployments: t.deployments ?? [],
      };
    });
  };

  const replaceTargets = defineOperation({
    name: 'notifications.replaceTargets',
    input: Targets,
    resource: () => ({ type: 'notification-targets', id: 'all' }),
    prepare: (input) => {
      const targets = resolveTargets(input);
      return {
        value: targets,
        preview: {
          summary: `${targets.length} notification target(s)`,
          // The URLs carry credentials: the views mask them, and the change is marked sensitive all the same.
          changes: [
            {
              type: 'notification-targets',
              id: 'all',
              actions: ['update'],
              before: doc.data.targets.map(targetView),
              after: targets.map(targetView),
              sensitive: true,
            },
          ],
        },
      };
    },
    apply: async (targets) => {
      await doc.update((d) => {
        d.targets = targets;
      });
      return targets;
    },
  });

  const test = defineOperation({
    name: 'notifications.test',
    input: TestMessage,
    resource: (input) => ({ type: 'notification-target', id: input.target_id ?? 'url' }),
    prepare: ({ url, target_id, message }) => {
      if ((url === undefined) === (target_id === undefined)) throw errors.badRequest('send either {url} or {target_id}');
      let target: string;
      if (target_id !== undefined) {
        const t = doc.data.targets.find((x) => x.id === target_id || x.name === target_id);
        if (!t) throw errors.notFound(`notification target '${target_id}' not found`);
        target = t.url;
      } else {
        target = url!;
        try {
          parseTargetUrl(target);
        } catch (err) {
          if (err instanceof TargetUrlError) throw errors.badRequest(`body.url: invalid url: ${err.message}`, 'INVALID_TARGET_URL', { field: 'url' });
          throw err;
        }
      }
      const masked = maskTargetUrl(target);
      return {
        value: { target, message },
        preview: { summary: `test message to ${masked}`, changes: [{ type: 'notification-target', id: masked, actions: ['no-op'], after: { message } }] },
      };
    },
    apply: async ({ target, message }) => {
      const started = Date.now();
      try {
        await dispatcher.sendOnce(target, {
          event: 'test',
          severity: 'info',
          title: 'Test notification',
          message: message ?? `This is a test message from the agent on ${hostname()}.`,
          deployment: null,
          time: new Date().toISOString(),
          agent: hostname(),
        });
      } catch (err) {
        if (err instanceof DeliveryError) throw new HttpError(502, 'NOTIFICATION_FAILED', `delivery to ${maskTargetUrl(target)} failed: ${err.message}`);
        throw err;
      }
      return { delivered: true, target: maskTargetUrl(target), duration_ms: Date.now() - started };
    },
  });

  return { replaceTargets, test };
}
