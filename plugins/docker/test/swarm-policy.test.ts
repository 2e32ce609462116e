/** Swarm's own rules over compose's model (compose/swarm-policy.ts), and the update defaults a stack runs with. */
import { describe, expect, it } from 'vitest';
import { checkSwarm, withSwarmDefaults } from '../src/compose/swarm-policy.js';

const refusedOf = (model: Record<string, unknown>, granted: string[] = []) => checkSwarm(model, new Set(granted)).violations.map((v) => v.exception);

describe('swarm policy', () => {
  it('refuses placement on managers in every spelling, and nothing else of placement', () => {
    for (const c of ['node.role==manager', 'node.role == manager', ' node.role==MANAGER ', 'node.role != worker', 'node.role!=Worker'])
      expect(refusedOf({ services: { web: { deploy: { placement: { constraints: [c] } } } } }), c).toEqual(['deploy.placement:managers']);
    for (const c of ['node.role==worker', 'node.role!=manager', 'node.labels.zone==a', 'node.hostname==vm'])
      expect(refusedOf({ services: { web: { deploy: { placement: { constraints: [c] } } } } }), c).toEqual([]);
  });

  it('refuses global mode, host-mode ports and bind mounts; a granted exception lets exactly that through', () => {
    const model = {
      services: {
        web: {
          deploy: { mode: 'global' },
          ports: [
            { target: 80, published: 8080, mode: 'host' },
            { target: 81, published: 8081, mode: 'ingress' },
          ],
          volumes: ['/srv/app/data:/data:rw', 'named:/v:rw', { type: 'bind', source: '/etc', target: '/x' }],
        },
      },
    };
    expect(refusedOf(model)).toEqual(['deploy.mode:global', 'ports.mode:host:8080', 'swarm.bind:/srv/app/data', 'swarm.bind:/etc']);
    const { violations, granted } = checkSwarm(model, new Set(['deploy.mode:global', 'swarm.bind:/srv/app/data']));
    expect(violations.map((v) => v.exception)).toEqual(['ports.mode:host:8080', 'swarm.bind:/etc']);
    expect(granted).toEqual(['deploy.mode:global', 'swarm.bind:/srv/app/data']);
  });

  it('gives start-first updates with rollback unless the file says otherwise, and the compose labels of the project', () => {
    const model: Record<string, any> = {
      services: { web: { labels: { a: '1' } }, worker: { deploy: { update_config: { order: 'stop-first' } }, labels: ['b=2'] } },
      networks: { back: {}, outside: { external: true, name: 'x' } },
      volumes: { data: {} },
    };
    withSwarmDefaults(model, 'shop');
    expect(model.services.web.deploy.update_config).toEqual({ delay: '3s', failure_action: 'rollback', monitor: '10s', order: 'start-first', parallelism: 1 });
    expect(model.services.worker.deploy.update_config).toEqual({ order: 'stop-first' });
    expect(model.services.web.labels).toEqual({ a: '1', 'com.docker.compose.project': 'shop', 'com.docker.compose.service': 'web' });
    expect(model.services.worker.labels).toEqual(['b=2', 'com.docker.compose.project=shop', 'com.docker.compose.service=worker']);
    expect(model.networks.back.labels).toEqual({ 'com.docker.compose.project': 'shop' });
    expect(model.networks.default).toEqual({ labels: { 'com.docker.compose.project': 'shop' } });
    expect(model.networks.outside.labels).toBeUndefined();
    expect(model.volumes.data.labels).toEqual({ 'com.docker.compose.project': 'shop' });
    expect(model.version).toBe('3.9');
  });
});
