// The GlidepathError a call throws (any other outcome fails the test).
import { GlidepathError } from '../../src/errors.js';

export function caught(fn: () => unknown): GlidepathError {
  try {
    fn();
  } catch (e) {
    if (e instanceof GlidepathError) return e;
    throw e;
  }
  throw new Error('expected an error');
}

/** The GlidepathError a promise rejects with (any other outcome fails the test). */
export async function rejected(p: Promise<unknown>): Promise<GlidepathError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof GlidepathError) return e;
    throw e;
  }
  throw new Error('expected a rejection');
}
