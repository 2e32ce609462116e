/** The `credentials` service: stored registry credentials for image pulls (provided by the credentials plugin). */
import { createServiceRef } from '@agent/sdk';

export interface RegistryAuth {
  username: string;
  password: string;
  /** Registry host, e.g. `ghcr.io` or `127.0.0.1:5000`. */
  serveraddress: string;
}

export interface CredentialsService {
  /** The credential that matches the registry of an image reference, or null. */
  registryAuth(imageRef: string): Promise<RegistryAuth | null>;
}

export const credentialsService = createServiceRef<CredentialsService>('credentials', 'stored registry credentials');
