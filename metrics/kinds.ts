// The metric kinds every part of the registry makes, named with the one prefix and registered in the one registry
// of a service instance; a live gauge is read at scrape time.
import client from "prom-client";

export const PREFIX = "obi_";

export type MetricKinds = ReturnType<typeof metricKinds>;

export function metricKinds(registers: client.Registry[]) {
  return {
    registers,
    counter: (name: string, help: string, labelNames: string[]) =>
      new client.Counter({ name: `${PREFIX}${name}`, help, labelNames, registers }),
    histogram: (name: string, help: string, labelNames: string[], buckets: number[]) =>
      new client.Histogram({ name: `${PREFIX}${name}`, help, labelNames, buckets, registers }),
    gauge: (name: string, help: string, labelNames: string[]) =>
      new client.Gauge({ name: `${PREFIX}${name}`, help, labelNames, registers }),
    liveGauge: (name: string, help: string, read: (g: client.Gauge) => void | Promise<void>, labelNames: string[] = []) =>
      new client.Gauge({
        name: `${PREFIX}${name}`,
        help,
        labelNames,
        registers,
        collect() {
          return read(this);
        },
      }),
  };
}
