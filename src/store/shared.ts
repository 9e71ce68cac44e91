// Rules every Store backend applies the same way: list limits and the refusal of a misused transaction handle.
import { BadRequestError, UnavailableError } from '../errors.js';

/** A list's limit: the default when none is given, at most `max`; BadRequestError `invalid_limit` when not a positive integer. */
export function clampLimit(limit: number | undefined, def: number, max: number): number {
  if (limit === undefined) return def;
  if (!Number.isInteger(limit) || limit < 1) throw new BadRequestError('invalid_limit', `limit must be a positive integer, got ${limit}`);
  return Math.min(limit, max);
}

/** Why a transaction handle may not be used now (UnavailableError `store_tx_misuse`), or undefined when it may. */
export function txRefusal(open: boolean, nested: boolean): Error | undefined {
  if (!open) return new UnavailableError('store_tx_misuse', 'store transaction handle used after its transaction ended');
  if (nested) return new UnavailableError('store_tx_misuse', 'store transaction handle used while a nested transaction on it is open (use the nested handle)');
  return undefined;
}

/** UnavailableError `store_closed`. */
export function closedError(location: string): Error {
  return new UnavailableError('store_closed', `store ${location} is closed`);
}
