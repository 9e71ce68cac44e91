// One uPlot chart as a Preact component: created once, fed new data in place (no re-creation per
// sample), resized with its container. Colours from a colour-blind-safe palette (Okabe–Ito).
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import type { AlignedData, Options } from 'uplot';

export const PALETTE = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#D55E00', '#F0E442', '#000000'];

/** A version's colour: by its place among the model's versions sorted, the same in every chart and list. */
export function colorOf(versions: readonly string[], v: string): string {
  const i = [...versions].sort().indexOf(v);
  return PALETTE[(i < 0 ? 0 : i) % PALETTE.length] as string;
}

export interface ChartSeries {
  label: string;
  color: string;
  dash?: number[];
}

export function Chart(props: {
  title: string;
  /** x first (seconds since the epoch for time, or any number), then one array per series. */
  data: AlignedData;
  series: ChartSeries[];
  yLabel: string;
  time?: boolean;
  xLabel?: string;
  height?: number;
  yRange?: [number, number];
  step?: boolean;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = `${props.series.map((s) => s.label).join('|')}|${props.time === false ? 'x' : 't'}`;

  useEffect(() => {
    const el = box.current;
    if (el === null) return;
    // sized with the page's type, which grows with the viewport: readable on a wall display too
    const rem = parseFloat(getComputedStyle(document.documentElement).fontSize) || 16;
    const height = props.height ?? Math.round(rem * 12);
    const font = `${Math.round(rem * 0.8)}px system-ui, sans-serif`;
    const axis = { stroke: '#888', font, labelFont: font, grid: { stroke: 'rgba(128,128,128,0.2)' }, ticks: { stroke: 'rgba(128,128,128,0.3)' } };
    const opts: Options = {
      width: Math.max(200, el.clientWidth),
      height,
      scales: { x: { time: props.time !== false }, ...(props.yRange ? { y: { range: props.yRange } } : {}) },
      axes: [
        {
          ...axis,
          size: Math.round(rem * (props.xLabel ? 3.6 : 2.4)),
          // one line of wall-clock time (uPlot's default adds a date line whose labels collide)
          ...(props.time === false
            ? {}
            : {
                space: Math.round(rem * 5),
                values: (_u: uPlot, splits: number[]) => splits.map((v) => new Date(v * 1000).toLocaleTimeString([], { hour12: false })),
              }),
          ...(props.xLabel ? { label: props.xLabel } : {}),
        },
        { ...axis, label: props.yLabel, size: Math.round(rem * 4) },
      ],
      legend: { live: false },
      cursor: { drag: { x: false, y: false } },
      series: [
        {},
        ...props.series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 2,
          ...(s.dash ? { dash: s.dash } : {}),
          ...(props.step ? { paths: uPlot.paths.stepped?.({ align: 1 }) } : {}),
          spanGaps: false,
        })),
      ],
    };
    const u = new uPlot(opts, props.data, el);
    plot.current = u;
    const ro = new ResizeObserver(() => u.setSize({ width: Math.max(200, el.clientWidth), height }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
    // re-created only when the series change (a version added); data goes through setData below
  }, [shape]);

  useEffect(() => {
    plot.current?.setData(props.data);
  }, [props.data]);

  return (
    <figure class="chart">
      <figcaption>{props.title}</figcaption>
      <div ref={box} role="img" aria-label={`${props.title}: ${props.series.map((s) => s.label).join(', ')}`} />
    </figure>
  );
}
