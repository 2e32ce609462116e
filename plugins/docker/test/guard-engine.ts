/** The compose guard's view of the real engine, for tests that drive the guard without an agent. */
import { connect } from '../src/connection.js';
import { toHttpError } from '../src/engine-errors.js';
import { guardEngine } from '../src/engine.js';
import type { GuardEngine } from '../src/compose/guard.js';

export function realEngine(): GuardEngine {
  const { docker } = connect('');
  const call = <T>(what: string, fn: () => Promise<T>) =>
    fn().catch((err: unknown) => {
      throw toHttpError(err, what);
    });
  return guardEngine(docker, call, (id) => call(`container '${id}'`, () => docker.getContainer(id).remove({ force: true })));
}
