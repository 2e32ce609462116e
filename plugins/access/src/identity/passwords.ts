import argon2 from 'argon2';

// OWASP's argon2id baseline (19 MiB, 2 passes): strong, and a login stays around 30 ms.
const OPTIONS = { type: argon2.argon2id, memoryCost: 19456, timeCost: 2, parallelism: 1 } as const;

export const hashPassword = (password: string): Promise<string> => argon2.hash(password, OPTIONS);

export async function verifyPassword(hash: string, password: string): Promise<boolean> {
  try {
    return await argon2.verify(hash, password);
  } catch {
    return false;
  }
}

const COMMON = new Set([
  'password',
  'password1',
  'password123',
  '123456789',
  '1234567890',
  'qwertyuiop',
  'letmein123',
  'administrator',
  'changeme123',
  'welcome123',
]);

/** Why a password is too weak for a user account, or null. */
export function passwordProblem(password: string, username?: string): string | null {
  if (password.length < 10) return 'password must be at least 10 characters';
  if (password.length > 512) return 'password must be at most 512 characters';
  if (COMMON.has(password.toLowerCase())) return 'password is too common';
  if (username && username.length >= 3 && password.toLowerCase().includes(username.toLowerCase())) return 'password must not contain the username';
  const classes = [/[a-z]/, /[A-Z]/, /[0-9]/, /[^A-Za-z0-9]/].filter((re) => re.test(password)).length;
  if (password.length < 16 && classes < 3) return 'password needs three of: lower case, upper case, digits, symbols (or 16+ characters)';
  return null;
}
