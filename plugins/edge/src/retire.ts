/**
 * What a deleted deployment leaves at the edge. Nothing passes to a new deployment of the same name:
 * - removed: its domains (vhosts), and what the contributors hold for it (`forget`, e.g. the security plugin's
 *   rules), in one transaction;
 * - kept under the retired name (`<name>~<time>`, which only global principals reach): its traffic rows (and their
 *   counts), what the traffic observers derived from them (`retire`, e.g. security events), and the deployment
 *   recorded on its certificates' metadata.
 */
import type { Runtime } from './runtime.js';
import type { TrafficJournal } from './traffic/journal.js';
import type { Traffic } from './traffic/stream.js';

/** Returns the `deployment.deleted` handler; call it synchronously from the event (see below). */
export function retirement(rt: Runtime, journal: TrafficJournal, traffic: Traffic) {
  const { ctx, edge } = rt;
  // Journal retirements run one after the other: the same name deleted twice keeps its order.
  let queue: Promise<unknown> = Promise.resolve();

  /**
   * Enqueues the removal on the apply queue at once (not after an await): a new deployment of the same name can
   * only add a domain after the deletion, so its change is applied after this one and is never removed with it.
   * Resolves to the cut between the old deployment's records and a new one's: when nginx stopped tagging lines
   * with the name (its vhosts are gone), or the deletion itself when it had none.
   */
  const removeRules = (name: string, retiredAs: string): Promise<number> =>
    edge
      .removeDeployment(name, (draft) => {
        const before = draft.domains.length;
        draft.domains = draft.domains.filter((d) => d.deployment !== name);
        let changed = draft.domains.length !== before;
        for (const c of draft.certificates) {
          if (c.deployment !== name) continue;
          c.deployment = retiredAs;
          changed = true;
        }
        return changed;
      })
      .then(
        ({ result }) => {
          if (result) ctx.log.info('removed the vhosts and proxy rules of a deleted deployment', { deployment: name });
          return Date.now();
        },
        (err: unknown) => {
          ctx.log.error('the vhosts of a deleted deployment could not be removed', { deployment: name, error: (err as Error).message });
          return Date.now();
        },
      );

  const retireRecords = async (name: string, retiredAs: string, until: number): Promise<void> => {
    // Lines nginx wrote before the cut are read now, so they are retired with the rest. A read already running may
    // have looked at the file before the cut: the second call starts one that cannot have.
    try {
      await traffic.readNew();
      await traffic.readNew();
    } catch (err) {
      ctx.log.warn('access log not read before retiring a deployment', { deployment: name, error: (err as Error).message });
    }
    const rows = await journal.retire(name, retiredAs, until);
    await traffic.retire(name, retiredAs, until);
    if (rows) ctx.log.info('traffic of a deleted deployment kept under its retired name', { deployment: name, retired_as: retiredAs, traffic: rows });
  };

  return (name: string, retiredAs: string): Promise<void> => {
    const cut = removeRules(name, retiredAs);
    const run = queue.then(() => cut).then((until) => retireRecords(name, retiredAs, until));
    queue = run.catch(() => undefined);
    return run;
  };
}
