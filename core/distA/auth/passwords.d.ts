export declare const hashPassword: (password: string) => Promise<string>;
export declare function verifyPassword(hash: string, password: string): Promise<boolean>;
/** Why a password is too weak for a user account, or null. */
export declare function passwordProblem(password: string, username?: string): string | null;
//# sourceMappingURL=passwords.d.ts.map