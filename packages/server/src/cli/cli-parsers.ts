/** Option parsers shared by the command modules: each refuses bad input with one CliError line. */
import { CliError } from './cli-io.js';

export function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new CliError(`invalid port "${value}"`);
  return port;
}

export function parseNonNegativeInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new CliError(`invalid number "${value}": expected a whole number`);
  return n;
}

export function parsePositive(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new CliError(`invalid number "${value}": expected a positive number`);
  return n;
}

export function oneOf<T extends string>(name: string, allowed: readonly T[]) {
  return (value: string): T => {
    if (!(allowed as readonly string[]).includes(value)) throw new CliError(`invalid ${name} "${value}": use ${allowed.join(', ')}`);
    return value as T;
  };
}
