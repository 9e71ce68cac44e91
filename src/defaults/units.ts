// Byte units the defaults are written in.
export const KiB = 1024;
export const MiB = 1024 * KiB;
