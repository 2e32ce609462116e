/**
 * Scheduled tasks: stored in the plugin's document (they survive restarts) and each armed as a scheduler
 * job `task.<id>`, whose executions the core records.
 */
import { errors, Type, type Document, type JobExecution, type JobHandle, type Logger, type Scheduler, type Static } from '@agent/sdk';

export const TASK_TYPES = ['backup', 'restart', 'command'] as const;
export type TaskType = (typeof TASK_TYPES)[number];

export const TaskView = Type.Object({
  id: Type.Integer(),
  deployment_name: Type.String(),
  task_type: Type.Union(TASK_TYPES.map((t) => Type.Literal(t))),
  cron_expr: Type.String(),
  action: Type.String(),
  description: Type.String(),
  enabled: Type.Boolean(),
  service: Type.Union([Type.String(), Type.Null()], { description: 'compose service (command: where it runs; restart: only this service)' }),
  command: Type.Union([Type.Array(Type.String()), Type.Null()], { description: 'argv run inside the service (command tasks)' }),
  retention: Type.Union([Type.Integer(), Type.Null()], { description: 'backup tasks: backups of the deployment kept' }),
  disabled_reason: Type.Union([Type.String(), Type.Null()]),
  run_as: Type.Union([Type.Object({ id: Type.String(), name: Type.String() }), Type.Null()], {
    description:
      'the principal (`user:<id>`, `api_key:<id>`) whose current rights every run is checked against: whoever created or last changed the task; null for tasks from before that check (they do not run until re-enabled)',
  }),
  next_run: Type.Union([Type.String(), Type.Null()]),
  last_run: Type.Union([
    Type.Object({ status: Type.String(), started_at: Type.String(), duration_ms: Type.Union([Type.Integer(), Type.Null()]) }),
    Type.Null(),
  ]),
  created_by: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String(),
  updated_at: Type.String(),
});
export type TaskView = Static<typeof TaskView>;
export type TaskRecord = Omit<TaskView, 'next_run' | 'last_run'>;

export const ExecutionView = Type.Object({
  id: Type.Integer(),
  task_id: Type.Integer(),
  deployment: Type.Union([Type.String(), Type.Null()], {
    description: "the task's deployment; `<name>~<time>` once that deployment was deleted; null when unknown",
  }),
  trigger: Type.String({ description: 'cron or manual' }),
  status: Type.Union([Type.Literal('running'), Type.Literal('succeeded'), Type.Literal('failed')]),
  started_at: Type.String(),
  finished_at: Type.Union([Type.String(), Type.Null()]),
  duration_ms: Type.Union([Type.Integer(), Type.Null()]),
  output: Type.String({ description: 'bounded output of the run' }),
  error: Type.Union([Type.String(), Type.Null()]),
});
export type ExecutionView = Static<typeof ExecutionView>;

const jobName = (id: number) => `task.${id}`;

const taskIdOf = (e: JobExecution) => Number(e.job.slice('task.'.length));

export const executionView = (e: JobExecution, deployment: string | null): ExecutionView => ({
  id: e.id,
  task_id: taskIdOf(e),
  deployment,
  trigger: e.trigger,
  status: e.status,
  started_at: e.started_at,
  finished_at: e.finished_at,
  duration_ms: e.duration_ms,
  output: e.output,
  error: e.error,
});

export type TaskRunner = (task: TaskRecord, output: (line: string) => void, signal: AbortSignal) => Promise<void>;

export interface TaskDoc {
  next_id: number;
  tasks: TaskRecord[];
  /**
   * The deployment of each task that no longer exists (deleted by a user, or removed with its deployment, then
   * under the retired name `<name>~<time>`): its executions stay in the core's journal and keep their owner.
   */
  owners?: Record<string, string>;
}

/** Executions read per job and query at most (the core answers at most 1000 at a time). */
const CHUNK = 1000;

export class TaskStore {
  private readonly handles = new Map<number, JobHandle>();

  constructor(
    private readonly doc: Document<TaskDoc>,
    private readonly scheduler: Scheduler,
    private readonly runner: TaskRunner,
    private readonly log: Logger,
  ) {}

  /** Arms every enabled task (at plugin start). */
  armAll(): void {
    for (const t of this.doc.data.tasks) this.arm(t);
  }

  list(deployment?: string): TaskRecord[] {
    return this.doc.data.tasks.filter((t) => !deployment || t.deployment_name === deployment);
  }

  find(id: number): TaskRecord | undefined {
    return this.doc.data.tasks.find((t) => t.id === id);
  }

  get(id: number): TaskRecord {
    const t = this.find(id);
    if (!t) throw errors.notFound(`task ${id} not found`, 'TASK_NOT_FOUND');
    return t;
  }

  view(t: TaskRecord): TaskView {
    const last = this.scheduler.executions({ job: jobName(t.id), limit: 1 })[0];
    return {
      ...t,
      run_as: t.run_as ?? null,
      next_run: this.handles.get(t.id)?.nextRun()?.toISOString() ?? null,
      last_run: last ? { status: last.status, started_at: last.started_at, duration_ms: last.duration_ms } : null,
    };
  }

  checkCron(expr: string): void {
    const problem = this.scheduler.validateCron(expr);
    if (problem) throw errors.badRequest(`body.cron_expr: invalid cron expression '${expr}': ${problem}`, 'INVALID_CRON');
  }

  /** The deployment of a task, live or gone (null when unknown: executions of tasks deleted before owners were kept). */
  deploymentOf(id: number): string | null {
    return this.find(id)?.deployment_name ?? this.doc.data.owners?.[String(id)] ?? null;
  }

  /** Every task id with a known deployment, live or gone. */
  knownIds(): { id: number; deployment: string }[] {
    const out = this.doc.data.tasks.map((t) => ({ id: t.id, deployment: t.deployment_name }));
    for (const [id, deployment] of Object.entries(this.doc.data.owners ?? {})) out.push({ id: Number(id), deployment });
    return out;
  }

  async create(input: Omit<TaskRecord, 'id' | 'created_at' | 'updated_at' | 'disabled_reason'>): Promise<TaskRecord> {
    this.checkCron(input.cron_expr);
    const task = await this.doc.update((d) => {
      const now = new Date().toISOString();
      const t: TaskRecord = { ...input, id: d.next_id++, disabled_reason: null, created_at: now, updated_at: now };
      d.tasks.push(t);
      return t;
    });
    this.arm(task);
    return task;
  }

  async update(id: number, patch: Partial<Omit<TaskRecord, 'id' | 'created_at' | 'created_by' | 'deployment_name'>>): Promise<TaskRecord> {
    if (patch.cron_expr !== undefined) this.checkCron(patch.cron_expr);
    const task = await this.doc.update((d) => {
      const t = d.tasks.find((x) => x.id === id);
      if (!t) throw errors.notFound(`task ${id} not found`, 'TASK_NOT_FOUND');
      Object.assign(t, patch, { updated_at: new Date().toISOString() });
      if (patch.enabled) t.disabled_reason = null;
      return t;
    });
    this.arm(task);
    return task;
  }

  async delete(id: number): Promise<void> {
    const task = this.get(id);
    this.disarm(id);
    await this.doc.update((d) => {
      d.tasks = d.tasks.filter((t) => t.id !== id);
      (d.owners ??= {})[String(id)] = task.deployment_name;
    });
  }

  /**
   * A deployment was deleted: its tasks are removed (a new deployment of the same name must not get them back),
   * and their executions, with those of its tasks deleted before, are kept under the retired name.
   */
  async removeDeployment(deployment: string, retiredAs: string): Promise<number[]> {
    const ids = this.doc.data.tasks.filter((t) => t.deployment_name === deployment).map((t) => t.id);
    for (const id of ids) this.disarm(id);
    const owned = Object.values(this.doc.data.owners ?? {}).includes(deployment);
    if (ids.length || owned) {
      await this.doc.update((d) => {
        d.tasks = d.tasks.filter((t) => t.deployment_name !== deployment);
        const owners = (d.owners ??= {});
        for (const [id, name] of Object.entries(owners)) if (name === deployment) owners[id] = retiredAs;
        for (const id of ids) owners[String(id)] = retiredAs;
      });
      this.log.info('tasks of a deleted deployment removed', { deployment, retired_as: retiredAs, tasks: ids });
    }
    return ids;
  }

  /** Disables one task, with the reason shown in it (its creator lost the right to run it). */
  async disable(id: number, reason: string): Promise<void> {
    this.disarm(id);
    await this.doc.update((d) => {
      const t = d.tasks.find((x) => x.id === id);
      if (t) Object.assign(t, { enabled: false, disabled_reason: reason, updated_at: new Date().toISOString() });
    });
    this.log.warn('task disabled', { task: id, reason });
  }

  /** Disables every task of a deployment that is gone (they are kept, with the reason, not left failing). */
  async disableDeployment(deployment: string, reason: string): Promise<number[]> {
    const ids = this.doc.data.tasks.filter((t) => t.deployment_name === deployment && t.enabled).map((t) => t.id);
    for (const id of ids) this.disarm(id);
    if (ids.length) {
      await this.doc.update((d) => {
        for (const t of d.tasks) if (ids.includes(t.id)) Object.assign(t, { enabled: false, disabled_reason: reason, updated_at: new Date().toISOString() });
      });
      this.log.info('tasks disabled', { deployment, tasks: ids, reason });
    }
    return ids;
  }

  /** Runs a task now (also when disabled); resolves with the recorded execution. */
  async runNow(id: number): Promise<JobExecution> {
    const task = this.get(id);
    const handle = this.handles.get(id);
    if (handle) return handle.runNow();
    // A disabled task has no armed job: arm it for this one run, then cancel.
    const once = this.scheduler.job({ name: jobName(id), cron: task.cron_expr, run: (ctx) => this.runner(this.get(id), ctx.output, ctx.signal) });
    try {
      return await once.runNow();
    } finally {
      once.cancel();
    }
  }

  private executionOf(e: JobExecution): ExecutionView {
    return executionView(e, this.deploymentOf(taskIdOf(e)));
  }

  executions(id: number, limit: number, offset: number): ExecutionView[] {
    return this.scheduler.executions({ job: jobName(id), limit, offset }).map((e) => this.executionOf(e));
  }

  /** Recent executions of every task, newest first (also those of tasks whose deployment is unknown). */
  recent(limit: number, offset: number): ExecutionView[] {
    return this.scheduler
      .executions({ limit, offset })
      .filter((e) => e.job.startsWith('task.'))
      .map((e) => this.executionOf(e));
  }

  /** Recent executions of some tasks only, newest first, paginated over their union. */
  recentOf(ids: number[], limit: number, offset: number): ExecutionView[] {
    const want = offset + limit;
    const merged: JobExecution[] = [];
    for (const id of new Set(ids)) {
      for (let at = 0; at < want; at += CHUNK) {
        const size = Math.min(CHUNK, want - at);
        const chunk = this.scheduler.executions({ job: jobName(id), limit: size, offset: at });
        merged.push(...chunk);
        if (chunk.length < size) break;
      }
    }
    merged.sort((a, b) => b.id - a.id);
    return merged.slice(offset, want).map((e) => this.executionOf(e));
  }

  private disarm(id: number): void {
    this.handles.get(id)?.cancel();
    this.handles.delete(id);
  }

  private arm(task: TaskRecord): void {
    this.disarm(task.id);
    if (!task.enabled) return;
    try {
      this.handles.set(
        task.id,
        this.scheduler.job({
          name: jobName(task.id),
          cron: task.cron_expr,
          description: task.description || `${task.task_type} ${task.deployment_name}`,
          run: (ctx) => this.runner(this.get(task.id), ctx.output, ctx.signal),
        }),
      );
    } catch (err) {
      this.log.error('could not schedule task', { task: task.id, error: (err as Error).message });
    }
  }
}
