// zod's issues in Glidepath's words, for every input validated with zod: glidepath.yaml, admin
// API bodies, the simulator's requests, options and fault sets (pipeline files add their own
// wording on top). A field is named by its path as written (`models[0].versions[1].tp`), an
// unknown key at its own path, and a missing value is `required`.
import type { z } from 'zod';

export interface FieldIssue {
  path: PropertyKey[];
  message: string;
}

/** `models[0].versions[1].tp` from ['models', 0, 'versions', 1, 'tp']. */
export function formatPath(p: readonly PropertyKey[]): string {
  let out = '';
  for (const seg of p) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else out += out ? `.${String(seg)}` : String(seg);
  }
  return out;
}

/**
 * One issue per problem, under `prefix` (where the validated value sits). "required" needs the
 * value parsed with `{ reportInput: true }`: only then does zod tell a missing value from a wrong one.
 */
export function zodIssues(err: z.ZodError, prefix: readonly PropertyKey[] = []): FieldIssue[] {
  const out: FieldIssue[] = [];
  for (const iss of err.issues) {
    const path = [...prefix, ...iss.path];
    if (iss.code === 'unrecognized_keys') {
      for (const k of iss.keys) out.push({ path: [...path, k], message: `unknown key "${k}"` });
    } else {
      const missing = iss.code === 'invalid_type' && 'input' in iss && iss.input === undefined;
      out.push({ path, message: missing ? 'required' : iss.message });
    }
  }
  return out;
}

/** The issues as `path: message` lines; `whole` stands for the empty path (the value itself). */
export function zodLines(err: z.ZodError, whole = 'body', prefix: readonly PropertyKey[] = []): string[] {
  return zodIssues(err, prefix).map((i) => `${formatPath(i.path) || whole}: ${i.message}`);
}

/** One message naming every bad field, for an error body. */
export function zodMessage(err: z.ZodError, whole = 'body'): string {
  return zodLines(err, whole).join('; ');
}
