// The control plane's change events: in-process fan-out to watchers (admin SSE stream, CLI --watch).

export interface ControlEvent {
  seq: number;
  at: number;
  kind: string;
  model?: string | undefined;
  version?: string | undefined;
  message: string;
  data?: unknown;
}

export type EventListener = (e: ControlEvent) => void;

/** Bounded history so a watcher that connects late (or reconnects with Last-Event-ID) catches up. */
export class EventBus {
  private seq = 0;
  private readonly history: ControlEvent[] = [];
  private listeners = new Set<EventListener>();
  constructor(private readonly keep = 1_000) {}

  emit(e: Omit<ControlEvent, 'seq' | 'at'> & { at?: number }): ControlEvent {
    const ev: ControlEvent = { ...e, seq: ++this.seq, at: e.at ?? Date.now() };
    this.history.push(ev);
    if (this.history.length > this.keep) this.history.splice(0, this.history.length - this.keep);
    for (const l of this.listeners) {
      try {
        l(ev);
      } catch {
        // a broken watcher must not break the control plane
      }
    }
    return ev;
  }

  since(seq: number): ControlEvent[] {
    return this.history.filter((e) => e.seq > seq);
  }

  subscribe(l: EventListener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }
}
