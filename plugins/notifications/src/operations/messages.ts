/**
 * A message queued for the targets that receive it (`POST /notifications/send`) as an operation. The targets are
 * global (the route's tenancy); `prepare` refuses a `deployment` the caller cannot access as unknown.
 */
import { defineOperation, errors } from '@agent/sdk';
import type { NotificationsService } from '../api.js';
import { Message } from '../schemas.js';

export type MessageOperations = ReturnType<typeof messageOperations>;

export function messageOperations(notify: NotificationsService) {
  const send = defineOperation({
    name: 'notifications.send',
    input: Message,
    resource: (input) => ({ type: 'notification', id: input.event }),
    prepare: (input, { principal }) => {
      const about = input.deployment;
      if (about && !principal.canAccessDeployment(about)) throw errors.notFound(`deployment '${about}' not found`);
      return {
        value: input,
        preview: { summary: `queue '${input.title}'`, changes: [{ type: 'notification', id: input.event, actions: ['create'], after: input }] },
      };
    },
    apply: (message) => notify.send(message),
  });
  return { send };
}
