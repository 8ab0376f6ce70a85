// Package bench is the parent of the load-generation packages that both
// counterd's own end-to-end benchmarks (cmd/counterd) and the benchmark
// harness (bench/cmd/counterbench, a module of its own) use: the load
// generator, key distributions and latency histograms. They stay in this
// module because counterd's tests import them; everything only the harness
// needs (the SQL counting patterns, process sampling, the report writer
// and its plotting dependencies) lives in bench/. The daemon imports none
// of them, so internal/ outside this folder shows counterd's own data flow.
package bench
