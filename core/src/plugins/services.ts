/**
 * The services of one agent: what the core and each plugin provide, by service id. One per agent (never a
 * process-wide container), so two agents in one process do not share anything.
 */
export class ServiceDirectory {
  private readonly services = new Map<string, { impl: unknown; provider: string }>();

  provide(id: string, impl: unknown, provider: string): void {
    const existing = this.services.get(id);
    if (existing) throw new Error(`service '${id}' is already provided by '${existing.provider}'`);
    this.services.set(id, { impl, provider });
  }

  get<T>(id: string): T | undefined {
    return this.services.get(id)?.impl as T | undefined;
  }

  has(id: string): boolean {
    return this.services.has(id);
  }

  /** Withdraws everything a plugin provided (its setup or start failed). */
  withdraw(provider: string): void {
    for (const [id, s] of this.services) if (s.provider === provider) this.services.delete(id);
  }
}
