/** Whitelist entries as operations. */
import { defineOperation, errors, RecordId, Type } from '@agent/sdk';
import { WhitelistBody } from '../schemas.js';
import type { SecurityRuntime } from '../runtime.js';
import type { SecurityState, WhitelistEntry } from '../state.js';
import { checkCidr, checkIp, checkText, checkUrlPath } from '../validate.js';

export function whitelistOperations(rt: SecurityRuntime) {
  const duplicate = (s: SecurityState, type: string, value: string) => {
    if (s.whitelist.some((w) => w.type === type && w.value === value)) throw errors.conflict(`${type} '${value}' is already whitelisted`, 'WHITELIST_EXISTS');
  };

  const add = defineOperation({
    name: 'security.addWhitelist',
    input: WhitelistBody,
    resource: (i) => ({ type: 'whitelist', id: `${i.type}:${i.value}` }),
    prepare: (input) => {
      const { type } = input;
      const value = type === 'ip' ? checkIp(input.value, 'value') : type === 'cidr' ? checkCidr(input.value, 'value') : checkUrlPath(input.value, 'value');
      const description = checkText(input.description ?? '', 'description');
      duplicate(rt.rules.state, type, value);
      const entry = { type, value, description };
      return {
        value: entry,
        preview: { summary: `whitelist ${type} ${value}`, changes: [{ type: 'whitelist', id: value, actions: ['create' as const], after: entry }] },
      };
    },
    apply: async (entry) => {
      const { result } = await rt.rules.proxy.mutate((draft) => {
        duplicate(draft, entry.type, entry.value);
        const created: WhitelistEntry = { id: draft.next_id++, ...entry, created_at: new Date().toISOString() };
        draft.whitelist.push(created);
        return created;
      });
      return result;
    },
  });

  const remove = defineOperation({
    name: 'security.removeWhitelist',
    input: Type.Object({ id: RecordId() }),
    resource: (i) => ({ type: 'whitelist', id: String(i.id) }),
    prepare: ({ id }) => {
      if (!rt.rules.state.whitelist.some((w) => w.id === id)) throw errors.notFound(`whitelist entry ${id} not found`);
      return {
        value: id,
        preview: { summary: `remove whitelist entry ${id}`, changes: [{ type: 'whitelist', id: String(id), actions: ['delete' as const] }] },
      };
    },
    apply: async (id) => {
      await rt.rules.proxy.mutate((draft) => {
        draft.whitelist = draft.whitelist.filter((w) => w.id !== id);
      });
      return id;
    },
  });

  return { add, remove };
}
