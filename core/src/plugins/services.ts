/**
 * The services of one agent: what the core and each plugin provide, held by a tsyringe child container of the
 * agent's own (never the process-wide root container), so two agents in one process share nothing. The injection
 * token of a service is its typed ref's id (`ServiceRef`), as a registered symbol, so a ref from another copy of a
 * plugin's package names the same service.
 */
import 'reflect-metadata';
import { container, type DependencyContainer, type InjectionToken } from 'tsyringe';

/** The token a service ref stands for. */
export const tokenOf = <T>(id: string): InjectionToken<T> => Symbol.for(`agent.service:${id}`);

export class ServiceDirectory {
  private readonly container: DependencyContainer = container.createChildContainer();
  /** Who provides what: a plugin's services are withdrawn with it when its setup or start fails. */
  private readonly providers = new Map<string, string>();

  provide(id: string, impl: unknown, provider: string): void {
    const existing = this.providers.get(id);
    if (existing) throw new Error(`service '${id}' is already provided by '${existing}'`);
    this.container.register(tokenOf(id), { useValue: impl });
    this.providers.set(id, provider);
  }

  get<T>(id: string): T | undefined {
    return this.providers.has(id) ? this.container.resolve(tokenOf<T>(id)) : undefined;
  }

  has(id: string): boolean {
    return this.providers.has(id);
  }

  /** Withdraws everything a plugin provided (its setup or start failed): it is no longer resolved. */
  withdraw(provider: string): void {
    for (const [id, p] of this.providers) if (p === provider) this.providers.delete(id);
  }
}
