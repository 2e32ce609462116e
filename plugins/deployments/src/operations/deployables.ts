/**
 * A deployment from what a plugin offers to deploy (its `deployable`): the plugin renders its compose file from the
 * given config, then it is the create operation, with every check of any other create (host-safety policy included).
 */
import { defineOperation, errors, type PluginDirectory } from '@agent/sdk';
import { DeployFromPluginInput } from '../schemas.js';
import type { DeploymentOperations } from './deployments.js';

export type DeployableOperations = ReturnType<typeof deployableOperations>;

export function deployableOperations(plugins: PluginDirectory, create: DeploymentOperations['create']) {
  const deploy = defineOperation({
    name: 'plugins.deploy',
    input: DeployFromPluginInput,
    resource: ({ name }) => ({ type: 'deployment', id: name }),
    prepare: async (input, caller) => {
      const offer = plugins.deployable(input.plugin);
      if (offer === undefined) throw errors.notFound(`plugin '${input.plugin}' not found`);
      if (offer === null) throw errors.badRequest(`plugin '${input.plugin}' offers no deployment`, 'PLUGIN_NOT_DEPLOYABLE');
      if (!caller.principal.can('deployments:write')) throw errors.forbidden("permission 'deployments:write' required");
      const config = structuredClone(input.config ?? {});
      const problem = offer.validate(config);
      if (problem) throw errors.badRequest(problem);
      const rendered = await offer.render(config);
      const created = await create.prepare(
        { name: input.name, compose_content: rendered.compose_content, env_vars: rendered.env_vars, auto_start: true },
        caller,
      );
      return { value: { plan: created.value, plugin: offer.plugin }, preview: created.preview };
    },
    apply: async ({ plan, plugin }, caller) => ({ info: (await create.apply(plan, caller)).info, plugin }),
  });
  return { deploy };
}
