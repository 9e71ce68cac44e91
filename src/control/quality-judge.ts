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
   * An answer a follower sampled (cluster mode): judged as if this data plane had tapped it. Its pair
   * id, the follower's own, becomes one of this process's (negative: never one the local tap issues),
   * so that a shadow pair's two answers still meet here and never meet another replica's.
   */
  ingest(replica: string, s: ShippedSample): void {
    let pairId: number | undefined;
    if (s.pairId !== undefined) {
      const key = `${replica}\u0000${s.pairId}`;
      pairId = this.pairIds.get(key);
      if (pairId === undefined) {
        pairId = --this.lastPairId;
        this.pairIds.set(key, pairId);
        if (this.pairIds.size > DEFAULTS.cluster.judgePairIds) this.pairIds.delete(this.pairIds.keys().next().value as string);
      }
    }
    const q = s.request;
    this.judge.listener({
      model: s.model,
      version: s.version,
      adapter: s.adapter,
      pairId,
      shadow: s.shadow,
      request: { raw: Buffer.from(JSON.stringify(q.body)), body: q.body, model: q.model, stream: q.stream, user: q.user, maxTokens: q.maxTokens },
      status: s.status,
      body: s.body,
      latencyMs: s.latencyMs,
    });
  }

  private readonly pairIds = new Map<string, number>();
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
