package version

import (
	"fmt"
	"runtime"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/exposition"
)

// Register registers counterd_build_info on set: always 1, labelled with
// the version (Version) and the Go toolchain it was built with, so a
// fleet's versions show on its dashboards during a rolling upgrade.
func Register(set *metrics.Set) {
	name := fmt.Sprintf(`counterd_build_info{version=%q,goversion=%q}`, Version(), runtime.Version())
	exposition.Gauge(set, name, "The build: always 1, with the version and the Go toolchain that built it as labels.",
		func() float64 { return 1 })
}
