// Public surface of the pure statistics library (no I/O, no dependencies).

export * from './describe.js';
export * from './normal.js';
export * from './special.js';
export * from './mannwhitney.js';
export * from './hodgeslehmann.js';
export * from './effect.js';
export * from './proportions.js';
export * from './power.js';
export * from './sequential.js';
export * from './binomial-sequential.js';
