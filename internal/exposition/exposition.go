// Package exposition registers counterd's metrics together with their
// help text and writes them in the Prometheus text format that promtool
// accepts without findings.
//
// The one idea: VictoriaMetrics/metrics writes "# HELP name" lines with no
// text, so every metric is registered here (Counter, Gauge, Histogram)
// with its help beside it, and Write fills the text in. A metric
// registered on a metrics.Set directly has no help; a test in this package
// refuses such a call anywhere in the module.
package exposition

import (
	"fmt"
	"strings"
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

// help maps a metric family (the name without labels) to its help text.
// Families are global in a Prometheus exposition, so the registry is too:
// two sets registering one family share its help.
var help sync.Map // string -> string

// describe records the help of name's family. One family with two
// different help texts is a programming error.
func describe(name, text string) {
	family, _, _ := strings.Cut(name, "{")
	text = strings.TrimSpace(text)
	if text == "" {
		panic(fmt.Sprintf("BUG: metric %s registered without help text", family))
	}
	if old, loaded := help.LoadOrStore(family, text); loaded && old != text {
		panic(fmt.Sprintf("BUG: metric %s registered with two help texts: %q and %q", family, old, text))
	}
}

// Help returns the help text registered for a metric family and whether
// there is one.
func Help(family string) (string, bool) {
	v, ok := help.Load(family)
	if !ok {
		return "", false
	}
	return v.(string), true
}

// Counter registers a counter named name (labels included) on set.
func Counter(set *metrics.Set, name, help string) *metrics.Counter {
	describe(name, help)
	return set.NewCounter(name)
}

// Gauge registers a gauge on set whose value f returns at each scrape.
func Gauge(set *metrics.Set, name, help string, f func() float64) *metrics.Gauge {
	describe(name, help)
	return set.NewGauge(name, f)
}

// Histogram registers a Prometheus histogram (le buckets) on set, with
// the library's default buckets (5 ms .. 10 s) when buckets is nil.
func Histogram(set *metrics.Set, name, help string, buckets []float64) *metrics.PrometheusHistogram {
	describe(name, help)
	if buckets == nil {
		return set.NewPrometheusHistogram(name)
	}
	return set.NewPrometheusHistogramExt(name, buckets)
}
