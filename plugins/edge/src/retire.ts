/**
 * What a deleted deployment leaves at the edge. Nothing passes to a new deployment of the same name:
 * - removed: its domains (vhosts), protected routes, security settings and the blocks tied to it;
 * - kept under the retired name (`<name>~<time>`, which only global principals reach): its traffic rows (and their
 *   counts), its security events, and the deployment recorded on its certificates' metadata.
 */
import type { Runtime } from './runtime.js';
import type { TrafficJournal } from './traffic/journal.js';
import type { SecurityEvents } from './security/events.js';

/** Returns the `deployment.deleted` handler; call it synchronously from the event (see below). */
export function retirement(rt: Runtime, journal: TrafficJournal, events: SecurityEvents, readLog: () => Promise<number>) {
  const { ctx, edge } = rt;
  // Journal retirements run one after the other: the same name deleted twice keeps its order.
  let queue: Promise<unknown> = Promise.resolve();

  /**
   * Enqueues the removal on the apply queue at once (not after an await): a new deployment of the same name can
   * only add a domain after the deletion, so its change is applied after this one and is never removed with it.
   * Resolves to the cut between the old deployment's records and a new one's: when nginx stopped tagging lines
   * with the name (its vhosts are gone), or the deletion itself when it had none.
   */
  const removeRules = (name: string, retiredAs: string): Promise<number> => {
    const s = edge.state;
    const holds =
      s.domains.some((d) => d.deployment === name) ||
      s.protected.some((p) => p.deployment === name) ||
      !!s.deployment_security[name] ||
      s.blocked.some((b) => b.deployment === name) ||
      s.certificates.some((c) => c.deployment === name);
    if (!holds) return Promise.resolve(Date.now());
    return edge
      .mutate((draft) => {
        draft.domains = draft.domains.filter((d) => d.deployment !== name);
        draft.protected = draft.protected.filter((p) => p.deployment !== name);
        delete draft.deployment_security[name];
        draft.blocked = draft.blocked.filter((b) => b.deployment !== name);
        for (const c of draft.certificates) if (c.deployment === name) c.deployment = retiredAs;
      })
      .then(
        () => {
          ctx.log.info('removed the vhosts and security rules of a deleted deployment', { deployment: name });
          return Date.now();
        },
        (err: unknown) => {
          ctx.log.error('the vhosts of a deleted deployment could not be removed', { deployment: name, error: (err as Error).message });
          return Date.now();
        },
      );
  };

  const retireRecords = async (name: string, retiredAs: string, until: number): Promise<void> => {
    // Lines nginx wrote before the cut are read now, so they are retired with the rest. A read already running may
    // have looked at the file before the cut: the second call starts one that cannot have.
    try {
      await readLog();
      await readLog();
    } catch (err) {
      ctx.log.warn('access log not read before retiring a deployment', { deployment: name, error: (err as Error).message });
    }
    const traffic = await journal.retire(name, retiredAs, until);
    const ev = events.retire(name, retiredAs, until);
    if (traffic || ev)
      ctx.log.info('traffic and security events of a deleted deployment kept under its retired name', {
        deployment: name,
        retired_as: retiredAs,
        traffic,
        events: ev,
      });
  };

  return (name: string, retiredAs: string): Promise<void> => {
    const cut = removeRules(name, retiredAs);
    const run = queue.then(() => cut).then((until) => retireRecords(name, retiredAs, until));
    queue = run.catch(() => undefined);
    return run;
  };
}
