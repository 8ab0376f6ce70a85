// Package bench is the parent of the packages only the benchmark harness
// (cmd/counterbench) and the benchmarks use: the SQL counting patterns it
// compares, the load generator, key distributions, latency histograms,
// process sampling and the report writer. The daemon imports none of them,
// so internal/ outside this folder shows counterd's own data flow.
package bench
