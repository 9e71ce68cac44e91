// The load generators' token count: `data: {` events of an OpenAI stream (one token each for vLLM-style
// streams), counted across chunk borders.

/** Events in `chunk` after the previous chunk's `tail`; the tail to carry into the next chunk. */
export function countEvents(tail: string, chunk: Buffer): { n: number; tail: string } {
  const text = tail + chunk.toString('latin1');
  let i = 0;
  let n = 0;
  while ((i = text.indexOf('data: {', i)) !== -1) {
    n++;
    i += 7;
  }
  return { n, tail: text.slice(-7) };
}
