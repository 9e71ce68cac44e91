// Live state shared by every page: the change events (the admin API's /events stream, the last 200
// kept) and the chart samples (/series/stream, one a second). Pages re-read what they show when an
// event arrives — updates are pushed, never polled.
import { useEffect, useState } from 'preact/hooks';
import type { SeriesSampleView } from '../../src/api/series.js';
import { stream } from './api.js';

export interface ControlEvent {
  seq: number;
  at: number;
  kind: string;
  model?: string;
  version?: string;
  message: string;
}

const MAX_EVENTS = 200;

class Live {
  events: ControlEvent[] = [];
  sample: SeriesSampleView | null = null;
  /** Grows with every change event: a page's reads depend on it. */
  changes = 0;
  private readonly listeners = new Set<() => void>();
  private stop: (() => void)[] = [];

  start(): void {
    if (this.stop.length > 0) return;
    this.stop.push(
      stream('/events?unnamed=1', {
        message: (d) => {
          const e = d as ControlEvent;
          if (this.events.some((x) => x.seq === e.seq)) return;
          this.events = [e, ...this.events].slice(0, MAX_EVENTS);
          this.changes++;
          this.emit();
        },
      }),
    );
    this.stop.push(
      stream('/series/stream', {
        sample: (d) => {
          this.sample = d as SeriesSampleView;
          this.emit();
        },
      }),
    );
  }

  end(): void {
    for (const s of this.stop) s();
    this.stop = [];
    this.events = [];
    this.sample = null;
  }

  subscribe(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private emit(): void {
    for (const l of this.listeners) l();
  }
}

export const live = new Live();

/** Re-render on every live change; returns the live state. */
export function useLive(): Live {
  const [, setN] = useState(0);
  useEffect(() => live.subscribe(() => setN((n) => n + 1)), []);
  return live;
}
