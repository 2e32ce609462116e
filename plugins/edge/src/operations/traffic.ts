/** Traffic journal changes as operations: the cleanup of old records. */
import { defineOperation, Seconds, Type } from '@agent/sdk';
import type { TrafficJournal } from '../traffic/journal.js';

export function trafficOperations(journal: TrafficJournal) {
  const cleanup = defineOperation({
    name: 'traffic.cleanup',
    input: Type.Object({ older_than: Seconds({ minimum: 0 }) }),
    resource: () => ({ type: 'traffic', id: '*' }),
    prepare: (input) => ({
      value: Date.now() - input.older_than * 1000,
      preview: { summary: `remove traffic records older than ${input.older_than} s`, changes: [] },
    }),
    apply: (before) => ({ deleted: journal.cleanup(before) }),
  });
  return { cleanup };
}
