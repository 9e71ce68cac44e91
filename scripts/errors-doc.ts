// `npm run docs:errors`: writes docs/errors.md from the error catalogue in src/errors/catalogue.ts.
import { writeFileSync } from 'node:fs';
import { ERRORS_DOC, renderErrorsDoc } from './errors/render.js';

writeFileSync(ERRORS_DOC, renderErrorsDoc());
console.log(`wrote ${ERRORS_DOC}`);
