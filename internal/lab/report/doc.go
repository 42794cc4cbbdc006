// Package report turns bench result directories into a Markdown and an HTML
// report with SVG charts: throughput and p99 over time, throughput–latency
// curves for sweeps, side-by-side bars, a comparison of systems run on the
// same case (labels "<system> <case>", e.g. "cairn put-1" and "etcd put-1")
// with their ratio, and a before/after table against the first directory
// with deltas in percent.
package report
