// The engine scheduler: running sequences, a FIFO waiting queue, KV capacity and max_num_seqs.
//
// A request reserves prompt + max_tokens KV tokens when it starts (vLLM allocates blocks as it
// goes and may preempt; reserving up front gives the same queueing without preemption). The
// queue is first-come-first-served with head-of-line blocking, like vLLM's FCFS policy.

export interface Ticket {
  /** KV tokens this request reserves while it runs. */
  readonly need: number;
  /** Called when the request leaves the queue and starts running. */
  readonly start: () => void;
  /** Set by the scheduler. */
  state?: 'waiting' | 'running' | 'done';
}

export type SubmitResult = 'running' | 'waiting' | 'rejected';

export class Scheduler {
  private readonly queue: Ticket[] = [];
  private head = 0;
  private runningCount = 0;
  private kv = 0;

  constructor(
    private readonly maxNumSeqs: number,
    private readonly kvCapacity: number,
    private readonly maxWaiting: number,
  ) {}

  get running(): number {
    return this.runningCount;
  }
  get waiting(): number {
    return this.queue.length - this.head;
  }
  get kvUsed(): number {
    return this.kv;
  }
  get kvUsage(): number {
    return this.kv / this.kvCapacity;
  }

  /** Start the request now (calls `start` synchronously), queue it, or reject it when the queue is full. */
  submit(t: Ticket): SubmitResult {
    if (this.waiting === 0 && this.canRun(t)) {
      this.run(t);
      return 'running';
    }
    if (this.waiting >= this.maxWaiting) return 'rejected';
    t.state = 'waiting';
    this.queue.push(t);
    return 'waiting';
  }

  /** The request ended (finished, failed or cancelled) in whatever state it was. */
  release(t: Ticket): void {
    if (t.state === 'running') {
      this.runningCount--;
      this.kv -= t.need;
      t.state = 'done';
      this.drain();
    } else if (t.state === 'waiting') {
      t.state = 'done';
      const i = this.queue.indexOf(t, this.head);
      if (i >= 0) this.queue.splice(i, 1);
      this.drain();
    }
  }

  private canRun(t: Ticket): boolean {
    return this.runningCount < this.maxNumSeqs && this.kv + t.need <= this.kvCapacity;
  }

  private run(t: Ticket): void {
    t.state = 'running';
    this.runningCount++;
    this.kv += t.need;
    t.start();
  }

  private drain(): void {
    while (this.head < this.queue.length) {
      const t = this.queue[this.head];
      if (!t || !this.canRun(t)) break;
      this.head++;
      this.run(t);
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
  }
}
