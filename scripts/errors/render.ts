// docs/errors.md rendered from the error catalogue (src/errors/catalogue.ts); scripts/errors-doc.ts writes it and
// test/unit/repo/errors.test.ts fails when the file and the table differ.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CATALOGUE, errorTypeOf } from '../../src/errors.js';
import type { ErrorCode } from '../../src/errors.js';

export const ERRORS_DOC = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'docs', 'errors.md');

/** The rows in the catalogue's order, grouped by its section comments' order (the table's own order). */
export function renderErrorsDoc(): string {
  const cell = (s: string) => s.replace(/\|/g, '\\|');
  const rows = (Object.keys(CATALOGUE) as ErrorCode[]).map((code) => {
    const [status, when, todo] = CATALOGUE[code];
    return `| \`${code}\` | ${status} | ${errorTypeOf(status)} | ${cell(when)} | ${cell(todo)} |`;
  });
  return `# Error codes

Every error Glidepath answers with, records or audits has a stable \`code\` — branch on it, never on
the message. The data plane answers in OpenAI's shape,
\`{"error": {"message", "type", "code"}}\`; the admin API the same, with \`details\` where there are
any; the CLI prints \`error: <message> (<code>)\` and exits 1 (2 for bad usage). Codes marked
*recorded only* appear in request records (metrics, the judge) and logs, not in a body; *audited
only* in the audit log.

This page is generated from the one table in \`src/errors/catalogue.ts\` (\`npm run docs:errors\`); a test fails
when they differ, when a code used in \`src/\` is missing from the table, or when a code in the table
is used nowhere. A code has one status everywhere; the \`type\` follows from the status.

| code | status | type | when it happens | what to do |
|---|---|---|---|---|
${rows.join('\n')}
`;
}
