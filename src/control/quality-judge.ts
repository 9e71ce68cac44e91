// The LLM judge wired into the running system: the data plane's response tap feeds the judge, and
// every score goes to the telemetry windows and to the rollouts that judge quality (canary,
// experiments). Built by the composition root only when glidepath.yaml has a `judge:` section.
import { QualityJudge } from '../analysis/llmjudge.js';
import type { JudgeSample } from '../analysis/llmjudge.js';
import type { JudgeEndpointConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import type { DataPlane } from '../gateway/dataplane.js';
import type { ShippedSample } from './shipper.js';

/** Anything that takes judge scores (the canary, adapter canary and experiment controllers); `adapter`: an adapter's answer, by the name it was served as. */
export interface QualitySink {
  quality(model: string, version: string, score: number, adapter?: string): void;
}

export type JudgeStats = ReturnType<QualityJudge['stats']>;

export class QualityFeed {
  private readonly judge: QualityJudge;

  constructor(
    private readonly cfg: JudgeEndpointConfig,
    private readonly models: readonly string[],
    private readonly dp: DataPlane,
    sinks: readonly QualitySink[],
  ) {
    this.judge = new QualityJudge(
      { url: cfg.url, model: cfg.model, apiKey: cfg.apiKeyEnv ? process.env[cfg.apiKeyEnv] : undefined, timeoutMs: cfg.timeoutMs },
      (r) => {
        dp.telemetry.recordQuality(r.model, r.version, r.score);
        for (const s of sinks) s.quality(r.model, r.version, r.score, r.adapter);
      },
      {
        concurrency: cfg.concurrency,
        queueMax: DEFAULTS.judge.queueMax,
        pairTtlMs: DEFAULTS.judge.pairTtlMs,
        pointwise: cfg.mode === 'pointwise',
        capturePrompts: cfg.capturePrompts,
      },
    );
  }

  /** Tap every model's responses (pointwise: a sample share of them; pairwise: shadow pairs only). */
  run(): void {
    const share = this.cfg.mode === 'pointwise' ? this.cfg.sampleShare : 0;
    for (const m of this.models) this.dp.setTap(m, { share, listener: this.judge.listener });
  }

  /**
   * An answer a follower sampled (cluster mode): judged as if this data plane had tapped it; false when
   * refused. A shadow pair's key, the follower's own, becomes a pair id of this process (negative:
   * never one the local tap issues) until its other half arrives: one client answer and one shadow
   * answer of the same model, from the same replica, or nothing is paired.
   */
  ingest(replica: string, s: ShippedSample): boolean {
    let pairId: number | undefined;
    if (s.pair !== undefined) {
      const key = `${replica}\u0000${s.pair}`;
      const first = this.pairs.get(key);
      if (first === undefined) {
        pairId = --this.lastPairId;
        this.pairs.set(key, { id: pairId, shadow: s.shadow, model: s.model });
        if (this.pairs.size > DEFAULTS.cluster.judgePairIds) this.pairs.delete(this.pairs.keys().next().value as string);
      } else {
        if (first.shadow === s.shadow || first.model !== s.model) return false;
        this.pairs.delete(key);
        pairId = first.id;
      }
    }
    const body = { prompt: s.prompt };
    this.judge.listener({
      model: s.model,
      version: s.version,
      adapter: s.adapter,
      pairId,
      shadow: s.shadow,
      request: { raw: Buffer.from(JSON.stringify(body)), body, model: s.model, stream: false, user: undefined, maxTokens: undefined },
      status: 200,
      body: JSON.stringify({ choices: [{ index: 0, text: s.answer }] }),
      latencyMs: 0,
    });
    return true;
  }

  /** Followers' pairs waiting for their other half: this process's id for each, and the half that came. */
  private readonly pairs = new Map<string, { id: number; shadow: boolean; model: string }>();
  private lastPairId = 0;

  shutdown(): void {
    for (const m of this.models) this.dp.setTap(m, undefined);
  }

  stats(): JudgeStats {
    return this.judge.stats();
  }

  /** The judge's last decisions, newest first (prompts and answers only with capture_prompts). */
  samples(model?: string): JudgeSample[] {
    return this.judge.samples(model);
  }

  get capturesPrompts(): boolean {
    return this.cfg.capturePrompts;
  }
}
