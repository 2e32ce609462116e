/** Privileges each engine accepts in a grant (kept apart from the drivers, which load the client libraries). */
export const MYSQL_PRIVILEGES = new Set([
  'ALL',
  'SELECT',
  'INSERT',
  'UPDATE',
  'DELETE',
  'CREATE',
  'DROP',
  'ALTER',
  'INDEX',
  'REFERENCES',
  'TRIGGER',
  'EXECUTE',
  'CREATE VIEW',
  'SHOW VIEW',
  'CREATE ROUTINE',
  'ALTER ROUTINE',
  'EVENT',
  'LOCK TABLES',
  'CREATE TEMPORARY TABLES',
]);

export const DATABASE_PRIVILEGES = new Set(['CONNECT', 'CREATE', 'TEMPORARY']);
export const TABLE_PRIVILEGES = new Set(['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']);
export const POSTGRES_PRIVILEGES = new Set(['ALL', ...DATABASE_PRIVILEGES, ...TABLE_PRIVILEGES]);
