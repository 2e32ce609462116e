/**
 * The `ctx` a plugin receives in `setup`. Everything it registers is staged here and committed only when setup
 * succeeds, so a failing plugin leaves nothing behind.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { coreServices, } from '@agent/sdk';
import { openDocument } from '../store/documents.js';
import { openJournal } from '../store/journal.js';
const CORE_SERVICE_IDS = new Set(Object.values(coreServices).map((r) => r.id));
/** tsyringe cannot unregister a token, so a withdrawn service is re-registered as undefined. */
export const serviceAvailable = (container, id) => container.isRegistered(id) && container.resolve(id) !== undefined;
export function createContext(definition, packageDir, config, log, scheduler, events, deps) {
    const name = definition.name;
    const dataDir = join(deps.agent.dataDir, 'plugins', name);
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const entries = [];
    const provided = new Set();
    const closers = [];
    const declared = (refs) => new Set((refs ?? []).map((r) => r.id));
    const mayProvide = declared(definition.provides);
    const mayUse = new Set([...declared(definition.requires), ...declared(definition.optional), ...CORE_SERVICE_IDS]);
    let journal = null;
    const services = {
        provide: (ref, impl) => {
            if (!mayProvide.has(ref.id))
                throw new Error(`plugin '${name}' provides service '${ref.id}' without listing it in 'provides'`);
            if (serviceAvailable(deps.container, ref.id))
                throw new Error(`service '${ref.id}' is already provided`);
            deps.container.register(ref.id, { useValue: impl });
            provided.add(ref.id);
        },
        get: (ref) => {
            if (!mayUse.has(ref.id))
                throw new Error(`plugin '${name}' uses service '${ref.id}' without listing it in 'requires' or 'optional'`);
            if (!serviceAvailable(deps.container, ref.id))
                throw new Error(`service '${ref.id}' is not available (plugin '${name}')`);
            return deps.container.resolve(ref.id);
        },
        optional: (ref) => {
            if (!mayUse.has(ref.id))
                throw new Error(`plugin '${name}' uses service '${ref.id}' without listing it in 'requires' or 'optional'`);
            return serviceAvailable(deps.container, ref.id) ? deps.container.resolve(ref.id) : undefined;
        },
    };
    const store = {
        document: (defaults, docName = 'state') => {
            if (!/^[a-z0-9][a-z0-9_-]*$/.test(docName))
                throw new Error(`invalid document name '${docName}'`);
            return openDocument(join(dataDir, `${docName}.json`), defaults);
        },
        secureDocument: (defaults, docName = 'secure') => {
            if (!/^[a-z0-9][a-z0-9_-]*$/.test(docName))
                throw new Error(`invalid document name '${docName}'`);
            return openDocument(join(dataDir, `${docName}.json.enc`), defaults, deps.sealer);
        },
        journal: () => {
            journal ??= openJournal(join(dataDir, 'journal.sqlite'));
            return journal;
        },
    };
    const ctx = {
        name,
        config,
        log,
        events,
        store,
        services,
        scheduler,
        agent: deps.agent,
        dataDir,
        packageDir,
        sealer: deps.sealer,
        route: (spec) => {
            entries.push(deps.registry.prepareRoute(name, spec));
        },
        websocket: (spec) => {
            entries.push(deps.registry.prepareSocket(name, spec));
        },
        job: (spec) => scheduler.job(spec),
        audit: (event) => deps.audit.record({ actor_type: 'system', actor_id: `system:${name}`, ...event }),
        settings: (schema, options) => deps.settings.define(name, schema, options),
        onClose: (fn) => {
            closers.push(fn);
        },
    };
    for (const [resource, decl] of Object.entries(definition.resources ?? {})) {
        deps.catalog.declare({ name: resource, description: decl.description, operator: decl.operator ?? 'write', viewer: decl.viewer ?? 'read', plugin: name });
    }
    for (const spec of definition.app?.routes ?? [])
        entries.push(deps.registry.prepareAppRoute(name, spec));
    return { ctx, entries, provided, scheduler, events, closers, journal: () => journal };
}
//# sourceMappingURL=context.js.map