/**
 * Where an outbound database connection goes: a host name is resolved once, the address is checked, and the driver
 * connects to that address (never to the name again: a second lookup could answer something else, DNS rebinding).
 * Loopback, link-local, private and other non-public ranges are the host's own and its neighbours': only a
 * principal with global scope may make the agent connect there.
 */
import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { errors, HttpError, type Principal } from '@agent/sdk';

const INTERNAL = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  INTERNAL.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const)
  INTERNAL.addSubnet(net, prefix, 'ipv6');

/** `::ffff:127.0.0.1` is 127.0.0.1: checked as IPv4. */
function normalise(address: string): { address: string; family: 'ipv4' | 'ipv6' } {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return { address: mapped[1]!, family: 'ipv4' };
  return { address, family: isIP(address) === 6 ? 'ipv6' : 'ipv4' };
}

/** Whether an address is on the host itself or a non-public network (loopback, link-local, private, reserved). */
export function isInternal(address: string): boolean {
  const n = normalise(address);
  return INTERNAL.check(n.address, n.family);
}

/** Resolves `host` once and checks the address for `principal`; the caller connects to the address returned. */
export async function resolveTarget(host: string, principal: Principal): Promise<string> {
  let address = host;
  if (!isIP(host)) {
    try {
      address = (await lookup(host, { verbatim: true })).address;
    } catch (err) {
      const code = (err as { code?: string }).code ?? 'ENOTFOUND';
      throw new HttpError(424, 'DB_UNREACHABLE', `cannot resolve '${host}': ${code}`);
    }
  }
  if (isInternal(address) && !principal.isGlobal) {
    throw errors.forbidden(
      `'${host}' is on the host or a private network (${address}): only a principal with global scope may connect there`,
      'GLOBAL_SCOPE_REQUIRED',
    );
  }
  return normalise(address).address;
}
