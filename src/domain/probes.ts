// A version's probe set: the prompts every worker of the version is probed with and what a healthy
// worker answers (recorded from the version's first workers, src/health/probe-set.ts). Stored with
// the version in the registry; plain data.

/** A prompt sent at temperature 0 with no top-k / top-p. */
export interface ProbePrompt {
  prompt: string;
  maxTokens: number;
}

/** What a healthy worker answers to one prompt. */
export interface ProbeExpectation extends ProbePrompt {
  /** The token texts it generates, compared as a prefix of the answer (the last ones may be cut at a near-tie). */
  tokens: string[];
  /** Per expected token, the range its logprob (the top one, at temperature 0) must fall in; null when the engine gives none. */
  logprobs: { min: number; max: number }[] | null;
}

/**
 * How the expectations were obtained: `majority` of the version's first workers (at least two),
 * `reference` — one worker checked against the configured reference, `single` — one worker and no
 * reference (nothing to check it against: reported as such), `operator` — pinned through the API.
 */
export type ProbeBasis = 'majority' | 'reference' | 'single' | 'operator';

export interface ProbeSet {
  probes: ProbeExpectation[];
  basis: ProbeBasis;
  /** Epoch ms. */
  recordedAt: number;
  /** The workers whose answers agreed and made the set. */
  from: string[];
  /** Pinned by an operator: never re-recorded by a deployment. */
  pinned: boolean;
  /** Prompts left out because no worker answered them reproducibly, with why. */
  skipped: { prompt: string; why: string }[];
}
