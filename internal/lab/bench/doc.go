// Package bench is the load generator behind `cairn bench`: workloads
// (etcd-benchmark put/range, the v0 entity mix, YCSB A–F, large values),
// drivers (Cairn over HTTP, etcd through its official Go client), a closed
// loop (N clients over M connections) and an open loop (fixed rate, latency
// from the intended send time so coordinated omission is not hidden),
// HdrHistogram latencies, a per-second time series, and result files
// (results.json and basho_bench-style CSVs per operation).
package bench
