/**
 * A swarm of two nodes for placement and drain tests: two dockerds of their own, each in a network namespace of its
 * own, joined by a veth pair; the first is a manager advertising its veth address, the second joins it as a worker.
 * The engine the other suites share was initialised advertising 127.0.0.1, the address a worker is given for the
 * manager (and gossips with), which in the worker's own network namespace is its own loopback; re-initialising it
 * would destroy every stack of the suites running beside this one, and a worker joined to it would get their tasks.
 * So the two nodes are a cluster of their own, and an agent of the test drives the manager. Needs root (ip,
 * nsenter, dockerd), like the rest of the suite.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { execa } from 'execa';
import { runId, until } from './helpers.js';

export interface TwoNodes {
  /** The manager's engine (`unix://…`): the agent's `docker.host`. */
  manager: string;
  worker: string;
  /** The worker's node id in the swarm. */
  workerId: string;
  stop(): Promise<void>;
}

/** The image every test container runs, loaded into both engines (no registry is reachable). */
const IMAGE = 'agent-test/busybox:latest';

export async function startTwoNodes(): Promise<TwoNodes> {
  const id = runId;
  const root = `/var/lib/agent-test-swarm/${id}`;
  // A /24 of 10.231.x.0 per run: the namespaces are private, the address only has to differ from the host's own.
  const subnet = `10.231.${parseInt(id.slice(0, 2), 16)}`;
  const nodes = [
    { role: 'manager', ns: `agt${id}m`, veth: `agt${id}m`, ip: `${subnet}.1` },
    { role: 'worker', ns: `agt${id}w`, veth: `agt${id}w`, ip: `${subnet}.2` },
  ].map((n) => ({ ...n, sock: `/run/agt-${id}-${n.role[0]}.sock`, exec: `/run/agt-${id}-${n.role[0]}`, data: `${root}/${n.role}` }));
  const daemons: ChildProcess[] = [];
  const host = (n: (typeof nodes)[number]) => `unix://${n.sock}`;

  const stop = async () => {
    for (const n of [...nodes].reverse()) await execa('docker', ['-H', host(n), 'swarm', 'leave', '--force'], { reject: false, timeout: 20_000 });
    for (const d of daemons) {
      d.kill('SIGTERM');
      await until(
        async () => d.exitCode !== null || d.signalCode !== null,
        (done) => done,
        20_000,
        200,
      );
      if (d.exitCode === null && d.signalCode === null) d.kill('SIGKILL');
    }
    for (const n of nodes) await execa('ip', ['netns', 'del', n.ns], { reject: false });
    await rm(root, { recursive: true, force: true });
    for (const n of nodes) await rm(n.exec, { recursive: true, force: true });
  };

  try {
    await mkdir(root, { recursive: true, mode: 0o700 });
    for (const n of nodes) {
      await execa('ip', ['netns', 'add', n.ns]);
      await execa('ip', ['-n', n.ns, 'link', 'set', 'lo', 'up']);
    }
    const [m, w] = nodes as [(typeof nodes)[number], (typeof nodes)[number]];
    await execa('ip', ['link', 'add', m.veth, 'netns', m.ns, 'type', 'veth', 'peer', 'name', w.veth, 'netns', w.ns]);
    for (const n of nodes) {
      await execa('ip', ['-n', n.ns, 'addr', 'add', `${n.ip}/24`, 'dev', n.veth]);
      await execa('ip', ['-n', n.ns, 'link', 'set', n.veth, 'up']);
      // `nsenter --net`, not `ip netns exec`: the latter remounts /sys, hiding the cgroup mounts dockerd needs.
      const log = openSync(`${root}/${n.role}.log`, 'a');
      const d = spawn(
        'nsenter',
        [`--net=/var/run/netns/${n.ns}`, 'dockerd', '--data-root', n.data, '--exec-root', n.exec, '--pidfile', `${n.exec}.pid`, '-H', host(n)],
        { stdio: ['ignore', log, log] },
      );
      daemons.push(d);
      const up = await until(
        async () => (await execa('docker', ['-H', host(n), 'info', '--format', '{{.ServerVersion}}'], { reject: false })).exitCode === 0,
        (ok) => ok,
        60_000,
        300,
      );
      if (!up) throw new Error(`the ${n.role}'s dockerd did not start (log: ${root}/${n.role}.log)`);
      await execa('docker', ['save', IMAGE]).pipe('docker', ['-H', host(n), 'load', '-q']);
    }
    await execa('docker', ['-H', host(m), 'swarm', 'init', '--advertise-addr', m.ip]);
    const token = (await execa('docker', ['-H', host(m), 'swarm', 'join-token', '-q', 'worker'])).stdout.trim();
    await execa('docker', ['-H', host(w), 'swarm', 'join', '--token', token, '--advertise-addr', w.ip, `${m.ip}:2377`]);
    const workerId = (await execa('docker', ['-H', host(w), 'info', '--format', '{{.Swarm.NodeID}}'])).stdout.trim();
    const ready = await until(
      async () => (await execa('docker', ['-H', host(m), 'node', 'inspect', workerId, '--format', '{{.Status.State}}'])).stdout.trim(),
      (s) => s === 'ready',
      30_000,
      300,
    );
    if (ready !== 'ready') throw new Error(`the worker is ${ready}`);
    return { manager: host(m), worker: host(w), workerId, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The running containers of a deployment's tasks on one engine. */
export async function tasksOn(engine: string, deployment: string): Promise<number> {
  const { stdout } = await execa('docker', ['-H', engine, 'ps', '-q', '--filter', `label=com.docker.compose.project=${deployment}`]);
  return stdout.split('\n').filter(Boolean).length;
}
