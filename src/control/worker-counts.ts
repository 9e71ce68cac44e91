// Who sets a version's worker count besides its configuration: a controller's claim (a rolling update
// owns the count while it replaces workers, the scheduler while it changes it: health's recovery
// leaves a claimed version alone) and the scheduler's target, which recovery keeps instead of the
// configured `replicas`.
export class WorkerCounts {
  private readonly claims = new Map<string, string>();
  private readonly targets = new Map<string, number>();

  /** A controller takes (or, with undefined, lets go of) a version's worker count. */
  claim(model: string, version: string, by: string | undefined): void {
    if (by === undefined) this.claims.delete(`${model}/${version}`);
    else this.claims.set(`${model}/${version}`, by);
  }

  claimedBy(model: string, version: string): string | undefined {
    return this.claims.get(`${model}/${version}`);
  }

  /** The scheduler's replica count of a version (undefined: the configured one again). */
  setTarget(model: string, version: string, replicas: number | undefined): void {
    if (replicas === undefined) this.targets.delete(`${model}/${version}`);
    else this.targets.set(`${model}/${version}`, replicas);
  }

  target(model: string, version: string): number | undefined {
    return this.targets.get(`${model}/${version}`);
  }
}
