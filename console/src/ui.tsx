/** Shared pieces of every screen: loading, tables, badges, dialogs, forms from schemas, the plan review. */
import type { ComponentChildren, JSX } from 'preact';
import { createContext } from 'preact';
import { useCallback, useContext, useEffect, useId, useRef, useState } from 'preact/hooks';
import { parsePatch } from 'diff';
import { ApiError, call, may, type Description, type Operation, type Principal } from './api.js';

export interface Session {
  principal: Principal;
  description: Description;
  /** The operation at `METHOD /api/path` (path as the description writes it, `{name}` params). */
  op(method: string, path: string): Operation | undefined;
  /** Whether the principal may call that operation (on that deployment). */
  can(method: string, path: string, deployment?: string): boolean;
  /** Runs a change: plannable operations are previewed, reviewed and applied (or discarded) in a dialog. */
  change(method: string, template: string, path: string, body?: unknown, query?: Record<string, string>): Promise<any>;
  navigate(to: string): void;
  signOut(): void;
}

export const SessionContext = createContext<Session | null>(null);
export const useSession = (): Session => useContext(SessionContext)!;

export function sessionFor(principal: Principal, description: Description, parts: Pick<Session, 'change' | 'navigate' | 'signOut'>): Session {
  const op = (method: string, path: string) => description.byRoute.get(`${method} /api${path}`);
  return { principal, description, op, can: (method, path, deployment) => may(principal, op(method, path), deployment), ...parts };
}

export interface Loaded<T> {
  data: T | undefined;
  error: Error | null;
  loading: boolean;
  reload: () => void;
}

/** Loads with `fn` whenever `deps` change; `reload` loads again; `every` (ms) polls while the screen is shown. */
export function useLoad<T>(fn: (signal: AbortSignal) => Promise<T>, deps: unknown[], every?: number): Loaded<T> {
  const [state, setState] = useState<{ data: T | undefined; error: Error | null; loading: boolean }>({ data: undefined, error: null, loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const ctl = new AbortController();
    setState((s) => ({ ...s, loading: true }));
    fn(ctl.signal).then(
      (data) => !ctl.signal.aborted && setState({ data, error: null, loading: false }),
      (error: Error) => !ctl.signal.aborted && setState((s) => ({ data: s.data, error, loading: false })),
    );
    const timer = every ? setTimeout(() => setTick((t) => t + 1), every) : undefined;
    return () => {
      ctl.abort();
      clearTimeout(timer);
    };
  }, [...deps, tick]);
  return { ...state, reload: useCallback(() => setTick((t) => t + 1), []) };
}

export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  const e = error as ApiError;
  return (
    <p class="error" role="alert">
      {e.code ? <code>{e.code}</code> : null} {e.message ?? String(error)}
    </p>
  );
}

export function Loading<T>({ load, children }: { load: Loaded<T>; children: (data: T) => ComponentChildren }) {
  if (load.data === undefined) return load.error ? <ErrorBox error={load.error} /> : <p class="muted">Loading…</p>;
  return (
    <>
      {load.error ? <ErrorBox error={load.error} /> : null}
      {children(load.data)}
    </>
  );
}

const TONE: Record<string, string> = {
  running: 'ok',
  healthy: 'ok',
  ok: 'ok',
  valid: 'ok',
  succeeded: 'ok',
  completed: 'ok',
  available: 'info',
  applied: 'ok',
  true: 'ok',
  partial: 'warn',
  warning: 'warn',
  pending: 'warn',
  starting: 'warn',
  queued: 'warn',
  expiring: 'warn',
  stale: 'bad',
  expired: 'bad',
  stopped: 'muted',
  exited: 'bad',
  unhealthy: 'bad',
  failed: 'bad',
  firing: 'bad',
  error: 'bad',
  false: 'bad',
  cancelled: 'muted',
  interrupted: 'bad',
  revoked: 'bad',
  active: 'ok',
  discarded: 'muted',
};

export function Badge({ value }: { value: unknown }) {
  const text = value === null || value === undefined ? '—' : String(value);
  return <span class={`badge ${TONE[text] ?? 'muted'}`}>{text}</span>;
}

export interface Column<T> {
  label: string;
  value: (row: T) => ComponentChildren;
  class?: string;
}

/**
 * A table; with `pageSize`, long lists show that many rows and a button for more (a page of 1,000 deployments
 * costs the browser ~10x the layout of 100, and a person reads the first screenful, or filters).
 */
export function Table<T>({
  rows,
  columns,
  empty = 'Nothing yet.',
  caption,
  pageSize,
}: {
  rows: T[];
  columns: Column<T>[];
  empty?: string;
  caption?: string;
  pageSize?: number;
}) {
  const [limit, setLimit] = useState(pageSize ?? Infinity);
  if (!rows.length) return <p class="muted">{empty}</p>;
  const shown = rows.length > limit ? rows.slice(0, limit) : rows;
  return (
    <div class="table-wrap">
      <table>
        {caption ? <caption>{caption}</caption> : null}
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col" class={c.class}>
                {c.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {shown.map((row) => (
            <tr>
              {columns.map((c) => (
                <td class={c.class}>{c.value(row)}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
      {shown.length < rows.length ? (
        <div class="pager">
          <span class="muted">
            {shown.length} of {rows.length} shown
          </span>
          <button type="button" onClick={() => setLimit(limit + (pageSize ?? rows.length))}>
            Show {Math.min(pageSize ?? rows.length, rows.length - shown.length)} more
          </button>
          <button type="button" onClick={() => setLimit(Infinity)}>
            Show all
          </button>
        </div>
      ) : null}
    </div>
  );
}

export function Tabs({ tabs, current, onChange, label }: { tabs: [string, string][]; current: string; onChange: (id: string) => void; label: string }) {
  const refs = useRef<(HTMLButtonElement | null)[]>([]);
  const onKey = (e: KeyboardEvent, i: number) => {
    const next = e.key === 'ArrowRight' ? i + 1 : e.key === 'ArrowLeft' ? i - 1 : e.key === 'Home' ? 0 : e.key === 'End' ? tabs.length - 1 : -2;
    if (next === -2) return;
    e.preventDefault();
    const j = (next + tabs.length) % tabs.length;
    onChange(tabs[j]![0]);
    refs.current[j]?.focus();
  };
  return (
    <div class="tabs" role="tablist" aria-label={label}>
      {tabs.map(([id, text], i) => (
        <button
          ref={(el) => {
            refs.current[i] = el;
          }}
          type="button"
          role="tab"
          id={`tab-${id}`}
          aria-selected={id === current}
          aria-controls={`panel-${id}`}
          tabIndex={id === current ? 0 : -1}
          onClick={() => onChange(id)}
          onKeyDown={(e) => onKey(e as unknown as KeyboardEvent, i)}
        >
          {text}
        </button>
      ))}
    </div>
  );
}

/** A modal dialog (the native `<dialog>`: focus stays inside, Escape closes). */
export function Dialog({ title, onClose, children }: { title: string; onClose: () => void; children: ComponentChildren }) {
  const ref = useRef<HTMLDialogElement>(null);
  // Dialogs stack (a form, then the plan it made): each names itself by its own title.
  const titleId = useId();
  useEffect(() => {
    const el = ref.current!;
    if (!el.open) el.showModal();
    const cancel = (e: Event) => {
      e.preventDefault();
      onClose();
    };
    el.addEventListener('cancel', cancel);
    return () => el.removeEventListener('cancel', cancel);
  }, [onClose]);
  return (
    <dialog ref={ref} aria-labelledby={titleId}>
      <div class="dialog-head">
        <h2 id={titleId}>{title}</h2>
        <button type="button" class="ghost" onClick={onClose} aria-label="Close">
          ✕
        </button>
      </div>
      {children}
    </dialog>
  );
}

/**
 * `password` for secrets, `text` otherwise. Preact 11 types each input `type` apart; one element whose type switches
 * is fine in the DOM, so the union is given as one of its members.
 */
export const textOrPassword = (secret: boolean) => (secret ? 'password' : 'text') as 'text';

// One formatter for every cell: `toLocaleString` builds one per call, which a 1,000-row list notices.
const TIME = new Intl.DateTimeFormat(undefined, { dateStyle: 'short', timeStyle: 'medium' });
const DATE = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium' });
export const fmtTime = (iso: string | number | null | undefined) => (iso ? TIME.format(new Date(iso)) : '—');
export const fmtDate = (iso: string | number | null | undefined) => (iso ? DATE.format(new Date(iso)) : '—');

export function fmtBytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(v < 10 && i ? 1 : 0)} ${units[i]}`;
}

export const pct = (n: number | null | undefined) => (n === null || n === undefined ? '—' : `${n.toFixed(1)} %`);

/** A unified diff (the plan's `diff` of a file), lines coloured and numbered, parsed by jsdiff. */
export function DiffView({ text }: { text: string }) {
  const patches = parsePatch(text);
  return (
    <div class="diff" role="group" aria-label="Changes">
      {patches.map((p) => (
        <div>
          <div class="diff-file">{(p.newFileName ?? p.oldFileName ?? '').replace(/^[ab]\//, '')}</div>
          {p.hunks.map((h) => {
            let oldNo = h.oldStart;
            let newNo = h.newStart;
            return (
              <table class="diff-hunk">
                <caption class="sr-only">
                  lines {h.oldStart}–{h.oldStart + h.oldLines} become {h.newStart}–{h.newStart + h.newLines}
                </caption>
                <tbody>
                  {h.lines.map((line) => {
                    const kind = line[0] === '+' ? 'add' : line[0] === '-' ? 'del' : 'ctx';
                    const o = kind === 'add' ? '' : oldNo++;
                    const n = kind === 'del' ? '' : newNo++;
                    return (
                      <tr class={kind}>
                        <td class="no">{o}</td>
                        <td class="no">{n}</td>
                        <td class="code">
                          <span class="sr-only">{kind === 'add' ? 'added: ' : kind === 'del' ? 'removed: ' : ''}</span>
                          {line}
                        </td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
            );
          })}
        </div>
      ))}
    </div>
  );
}

/** What a plan changes: each change with its actions, and the diff of a file or the before/after of a record. */
export function PlanChanges({ plan }: { plan: any }) {
  return (
    <div class="plan">
      <p>
        <strong>{plan.summary ?? plan.action}</strong> <Badge value={plan.status} />{' '}
        <span class="muted">
          by {plan.created_by?.name ?? '—'}, expires {fmtTime(plan.expires_at)}
        </span>
      </p>
      {plan.status === 'stale' || plan.drifted ? (
        <p class="error" role="alert">
          Stale: what this plan depends on has changed since it was made ({(plan.drifted ?? []).join(', ') || 'see the agent'}). Make a new plan.
        </p>
      ) : null}
      {plan.status === 'expired' ? (
        <p class="error" role="alert">
          Expired: this plan can no longer be applied.
        </p>
      ) : null}
      <ul class="changes">
        {(plan.changes ?? []).map((c: any) => (
          <li>
            <span class="change-kind">{(c.actions ?? []).join(', ')}</span> {c.type} <code>{c.id}</code>
            {c.diff ? <DiffView text={c.diff} /> : null}
            {!c.diff && (c.before !== undefined || c.after !== undefined) ? (
              <div class="before-after">
                {c.before !== undefined ? (
                  <div>
                    <div class="muted">before</div>
                    <pre>{JSON.stringify(c.before, null, 2)}</pre>
                  </div>
                ) : null}
                {c.after !== undefined ? (
                  <div>
                    <div class="muted">after</div>
                    <pre>{JSON.stringify(c.after, null, 2)}</pre>
                  </div>
                ) : null}
              </div>
            ) : null}
          </li>
        ))}
      </ul>
    </div>
  );
}

/** The review of a plan just made: apply it, or discard it. */
export function PlanDialog({ plan, onDone }: { plan: any; onDone: (result: { applied: boolean; data?: any; error?: unknown }) => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [current, setCurrent] = useState(plan);
  const apply = async () => {
    setBusy(true);
    setError(null);
    try {
      const res = await call('POST', `/plans/${current.id}/apply`);
      onDone({ applied: true, data: res.data });
    } catch (err) {
      setError(err);
      const e = err as ApiError;
      if (e.code === 'PLAN_STALE' || e.code === 'PLAN_EXPIRED')
        setCurrent({ ...current, status: e.code === 'PLAN_STALE' ? 'stale' : 'expired', drifted: (e.body as any)?.drifted });
      setBusy(false);
    }
  };
  const discard = async () => {
    setBusy(true);
    await call('DELETE', `/plans/${current.id}`).catch(() => undefined);
    onDone({ applied: false });
  };
  return (
    <Dialog title="Review the plan" onClose={() => onDone({ applied: false, error: 'closed' })}>
      <PlanChanges plan={current} />
      <ErrorBox error={error} />
      <div class="actions">
        <button type="button" class="primary" onClick={apply} disabled={busy || current.status !== 'available'}>
          Apply
        </button>
        <button type="button" onClick={discard} disabled={busy}>
          Discard
        </button>
      </div>
    </Dialog>
  );
}

// ---- forms from the request schemas of the live description ----

type Schema = Record<string, any>;

function options(schema: Schema): string[] | null {
  if (Array.isArray(schema.enum)) return schema.enum.map(String);
  const alts = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(alts) && alts.every((a: Schema) => a.const !== undefined)) return alts.map((a: Schema) => String(a.const));
  return null;
}

function kindOf(schema: Schema): string {
  if (options(schema)) return 'enum';
  if (schema.type === 'array' && (schema.items?.type === 'string' || options(schema.items ?? {}))) return 'list';
  return Array.isArray(schema.type) ? schema.type.find((t: string) => t !== 'null') : (schema.type ?? 'json');
}

/** The initial value of a form for a schema: defaults where declared. */
export function initialValues(schema: Schema | undefined, given: Record<string, unknown> = {}): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, prop] of Object.entries<Schema>(schema?.properties ?? {})) if (prop.default !== undefined) out[key] = prop.default;
  return { ...out, ...given };
}

function Field({
  name,
  schema,
  required,
  value,
  onChange,
  id,
}: {
  name: string;
  schema: Schema;
  required: boolean;
  value: unknown;
  onChange: (v: unknown) => void;
  id: string;
}) {
  const kind = kindOf(schema);
  const label = (
    <label for={id}>
      {name}
      {required ? <span aria-hidden="true"> *</span> : null}
    </label>
  );
  const hint = schema.description ? (
    <small id={`${id}-hint`} class="muted">
      {schema.description}
    </small>
  ) : null;
  const common = { id, name, 'aria-describedby': schema.description ? `${id}-hint` : undefined, required };
  let input: JSX.Element;
  if (kind === 'boolean') {
    return (
      <div class="field check">
        <input {...common} required={false} type="checkbox" checked={value === true} onChange={(e) => onChange((e.target as HTMLInputElement).checked)} />
        {label}
        {hint}
      </div>
    );
  } else if (kind === 'enum') {
    input = (
      <select {...common} value={value === undefined ? '' : String(value)} onChange={(e) => onChange((e.target as HTMLSelectElement).value || undefined)}>
        {!required ? <option value="">—</option> : null}
        {options(schema)!.map((o) => (
          <option value={o}>{o}</option>
        ))}
      </select>
    );
  } else if (kind === 'integer' || kind === 'number') {
    input = (
      <input
        {...common}
        type="number"
        min={schema.minimum}
        max={schema.maximum}
        value={value === undefined ? '' : String(value)}
        onInput={(e) => {
          const t = (e.target as HTMLInputElement).value;
          onChange(t === '' ? undefined : Number(t));
        }}
      />
    );
  } else if (kind === 'list') {
    input = (
      <input
        {...common}
        type="text"
        placeholder="comma-separated"
        value={Array.isArray(value) ? value.join(', ') : ''}
        onInput={(e) => {
          const t = (e.target as HTMLInputElement).value;
          const parts = t
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean);
          onChange(parts.length ? parts : undefined);
        }}
      />
    );
  } else if (kind === 'string') {
    const long = (schema.maxLength ?? 0) > 2000 || /content|compose|script|command/.test(name);
    input = long ? (
      <textarea {...common} rows={8} value={(value as string) ?? ''} onInput={(e) => onChange((e.target as HTMLTextAreaElement).value || undefined)} />
    ) : (
      <input
        {...common}
        type={textOrPassword(/password|secret/.test(name) || schema.format === 'password')}
        autoComplete="off"
        value={(value as string) ?? ''}
        onInput={(e) => onChange((e.target as HTMLInputElement).value || undefined)}
      />
    );
  } else {
    // Objects and arrays of objects: JSON, checked by the agent against the same schema.
    input = (
      <textarea
        {...common}
        rows={4}
        class="mono"
        placeholder="JSON"
        value={value === undefined ? '' : typeof value === 'string' ? value : JSON.stringify(value, null, 2)}
        onInput={(e) => {
          const t = (e.target as HTMLTextAreaElement).value;
          try {
            onChange(t.trim() ? JSON.parse(t) : undefined);
          } catch {
            onChange(t);
          }
        }}
      />
    );
  }
  return (
    <div class="field">
      {label}
      {input}
      {hint}
    </div>
  );
}

/**
 * A form for an operation's JSON body, made from its schema in the live description: one field per property,
 * required ones marked, defaults filled in; `hidden` fields are set by the screen (the deployment's name).
 */
export function SchemaForm({
  schema,
  submit,
  onSubmit,
  initial = {},
  hidden = [],
  idPrefix,
}: {
  schema: Schema | undefined;
  submit: string;
  onSubmit: (body: any) => Promise<unknown>;
  initial?: Record<string, unknown>;
  hidden?: string[];
  idPrefix: string;
}) {
  const [values, setValues] = useState<Record<string, unknown>>(() => initialValues(schema, initial));
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const required = new Set<string>(schema?.required ?? []);
  // A body that is a whole array (alert rules, notification targets: replaced as one): edited as JSON.
  const whole = schema?.type === 'array';
  const onFormSubmit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body = whole ? values.body : Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined));
      await onSubmit(body);
    } catch (err) {
      if (err !== 'closed') setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form onSubmit={onFormSubmit} class="schema-form">
      {whole ? (
        <Field id={`${idPrefix}-body`} name="body" schema={{ ...schema, type: 'json' }} required value={values.body} onChange={(v) => setValues({ body: v })} />
      ) : null}
      {Object.entries<Schema>(whole ? {} : (schema?.properties ?? {}))
        .filter(([key]) => !hidden.includes(key))
        .map(([key, prop]) => (
          <Field
            id={`${idPrefix}-${key}`}
            name={key}
            schema={prop}
            required={required.has(key)}
            value={values[key]}
            onChange={(v) => setValues((old) => ({ ...old, [key]: v }))}
          />
        ))}
      <ErrorBox error={error} />
      <div class="actions">
        <button type="submit" class="primary" disabled={busy}>
          {submit}
        </button>
      </div>
    </form>
  );
}

/** A button that opens a form made from an operation's schema, and runs the change (plan → review → apply). */
export function ActionForm({
  method,
  template,
  path,
  label,
  deployment,
  initial,
  hidden,
  onDone,
  buttonClass = '',
}: {
  method: string;
  template: string;
  path: string;
  label: string;
  deployment?: string;
  initial?: Record<string, unknown>;
  hidden?: string[];
  onDone?: (data: any) => void;
  buttonClass?: string;
}) {
  const session = useSession();
  const [open, setOpen] = useState(false);
  const op = session.op(method, template);
  if (!session.can(method, template, deployment)) return null;
  const id = `form-${(op?.operationId ?? label).replace(/[^a-zA-Z0-9]/g, '-')}`;
  return (
    <>
      <button type="button" class={buttonClass} onClick={() => setOpen(true)}>
        {label}
      </button>
      {open ? (
        <Dialog title={label} onClose={() => setOpen(false)}>
          {op?.summary ? <p class="muted">{op.summary}</p> : null}
          <SchemaForm
            idPrefix={id}
            schema={op?.body}
            initial={initial}
            hidden={hidden}
            submit={op?.plan ? 'Preview the plan' : label}
            onSubmit={async (body) => {
              const data = await session.change(
                method,
                template,
                path,
                Array.isArray(body) ? body : { ...body, ...Object.fromEntries((hidden ?? []).map((k) => [k, initial?.[k]])) },
              );
              setOpen(false);
              onDone?.(data);
            }}
          />
        </Dialog>
      ) : null}
    </>
  );
}

/** A button for a change without a form (start, stop, revoke): plannable ones are reviewed first. */
export function ActionButton({
  method,
  template,
  path,
  label,
  deployment,
  body,
  confirm,
  onDone,
  className = '',
}: {
  method: string;
  template: string;
  path: string;
  label: string;
  deployment?: string;
  body?: unknown;
  confirm?: string;
  onDone?: (data: any) => void;
  className?: string;
}) {
  const session = useSession();
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  if (!session.can(method, template, deployment)) return null;
  const run = async () => {
    if (confirm && !window.confirm(confirm)) return;
    setBusy(true);
    setError(null);
    try {
      onDone?.(await session.change(method, template, path, body));
    } catch (err) {
      if (err !== 'closed') setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <span class="action">
      <button type="button" class={className} onClick={run} disabled={busy}>
        {label}
      </button>
      {error ? <ErrorBox error={error} /> : null}
    </span>
  );
}

export function Section({ title, actions, children }: { title: string; actions?: ComponentChildren; children: ComponentChildren }) {
  return (
    <section class="card" aria-label={title}>
      <div class="card-head">
        <h2>{title}</h2>
        <div class="card-actions">{actions}</div>
      </div>
      {children}
    </section>
  );
}

export function Link({ href, children, class: cls }: { href: string; children: ComponentChildren; class?: string }) {
  const { navigate } = useSession();
  return (
    <a
      href={href}
      class={cls}
      onClick={(e) => {
        if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
        e.preventDefault();
        navigate(href);
      }}
    >
      {children}
    </a>
  );
}
