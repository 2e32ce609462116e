/**
 * A plan's changes as diff lines: objects are compared field by field (`ssl.enabled: false` → `true`),
 * multi-line texts (compose files, configs) line by line, and a plugin's own unified diff is shown as is.
 */
import { diffArrays } from 'diff';
import type { Plan, PlanChange } from './types.js';

export type DiffMark = '+' | '-' | ' ' | '@';
export interface DiffLine {
  mark: DiffMark;
  text: string;
}

/** `{a: {b: 1}, c: [2]}` → `[['a.b', 1], ['c[0]', 2]]`; texts with newlines stay whole. */
function flatten(value: unknown, prefix = '', out: [string, unknown][] = []): [string, unknown][] {
  if (Array.isArray(value)) {
    if (value.length === 0) out.push([prefix, []]);
    value.forEach((v, i) => flatten(v, `${prefix}[${i}]`, out));
  } else if (value && typeof value === 'object') {
    const entries = Object.entries(value);
    if (entries.length === 0 && prefix) out.push([prefix, {}]);
    for (const [k, v] of entries) flatten(v, prefix ? `${prefix}.${k}` : k, out);
  } else {
    out.push([prefix, value]);
  }
  return out;
}

const show = (v: unknown) => JSON.stringify(v);

/**
 * Edits beyond which two texts are shown as all removed then all added: jsdiff's Myers diff gives up after about
 * 80 ms whatever the texts' length (measured: 1,000 edits over 1,000–10,000 lines), where an exact diff would
 * not help a reader anyway.
 */
const MAX_EDITS = 1000;

/** Line diff (jsdiff's Myers diff over the lines; removals before additions where lines were replaced). */
export function diffTexts(before: string, after: string): DiffLine[] {
  const a = before.split('\n');
  const b = after.split('\n');
  const changes = diffArrays(a, b, { maxEditLength: MAX_EDITS });
  if (!changes) return [...a.map((text) => ({ mark: '-' as const, text })), ...b.map((text) => ({ mark: '+' as const, text }))];
  return changes.flatMap((c) => {
    const mark: DiffMark = c.added ? '+' : c.removed ? '-' : ' ';
    return c.value.map((text) => ({ mark, text }));
  });
}

function multiline(key: string, before: unknown, after: unknown): DiffLine[] {
  const lines: DiffLine[] = [{ mark: '@', text: `${key}:` }];
  const a = typeof before === 'string' ? before : '';
  const b = typeof after === 'string' ? after : '';
  if (before === undefined) return [...lines, ...b.split('\n').map((text) => ({ mark: '+' as const, text: `  ${text}` }))];
  if (after === undefined) return [...lines, ...a.split('\n').map((text) => ({ mark: '-' as const, text: `  ${text}` }))];
  return [...lines, ...diffTexts(a, b).map((l) => ({ ...l, text: `  ${l.text}` }))];
}

/** Diff lines of one change (without its header). */
export function changeLines(change: PlanChange): DiffLine[] {
  if (typeof change.diff === 'string' && change.diff.length > 0) {
    return (
      change.diff
        .replace(/\n$/, '')
        .split('\n')
        // File headers of a unified diff (`Index:`, `====`, `---`, `+++`) say what the change header already says.
        .filter((line) => !/^(Index: |={3,}$|--- |\+\+\+ )/.test(line))
        .map((line) => {
          const mark: DiffMark = line.startsWith('@@') ? '@' : line.startsWith('+') ? '+' : line.startsWith('-') ? '-' : ' ';
          return { mark, text: mark === '+' || mark === '-' || (mark === ' ' && line.startsWith(' ')) ? line.slice(1) : line };
        })
    );
  }
  const before = new Map(change.before === undefined ? [] : flatten(change.before));
  const after = new Map(change.after === undefined ? [] : flatten(change.after));
  const keys = [...new Set([...before.keys(), ...after.keys()])];
  const out: DiffLine[] = [];
  for (const key of keys) {
    const had = before.has(key);
    const has = after.has(key);
    const a = before.get(key);
    const b = after.get(key);
    const label = key || '(value)';
    if ((typeof a === 'string' && a.includes('\n')) || (typeof b === 'string' && b.includes('\n'))) {
      if (a !== b) out.push(...multiline(label, had ? a : undefined, has ? b : undefined));
      else out.push({ mark: ' ', text: `${label}: (${String(a).split('\n').length} lines, unchanged)` });
      continue;
    }
    if (had && has && JSON.stringify(a) === JSON.stringify(b)) out.push({ mark: ' ', text: `${label}: ${show(a)}` });
    else {
      if (had) out.push({ mark: '-', text: `${label}: ${show(a)}` });
      if (has) out.push({ mark: '+', text: `${label}: ${show(b)}` });
    }
  }
  return out;
}

/** `2 to create, 1 to update, 0 to delete` */
export function planTotals(plan: Plan): Record<'create' | 'update' | 'delete' | 'no-op', number> {
  const totals = { create: 0, update: 0, delete: 0, 'no-op': 0 };
  for (const c of plan.changes) for (const a of c.actions) if (a in totals) totals[a]++;
  return totals;
}
