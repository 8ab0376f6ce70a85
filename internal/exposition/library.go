package exposition

// libraryFamily is what Write adds to a Go runtime or process metric
// that VictoriaMetrics/metrics writes without help text.
type libraryFamily struct {
	help string
	// typ replaces the library's type where it is wrong: the process_io
	// totals only grow but are written as gauges.
	typ string
	// name replaces a name promtool's lints refuse (a counter without
	// _total, a _count suffix outside a histogram or summary).
	name string
}

// library holds the families VictoriaMetrics/metrics v1.44 writes on
// Linux, from runtime/metrics, runtime.MemStats and /proc/self.
var library = map[string]libraryFamily{
	"go_sched_latencies_seconds":          {help: "Time goroutines spent runnable before they ran (runtime/metrics /sched/latencies)."},
	"go_mutex_wait_seconds_total":         {help: "Time goroutines spent blocked on a sync.Mutex, sync.RWMutex or runtime lock."},
	"go_gc_mark_assist_cpu_seconds_total": {help: "CPU time goroutines spent assisting the garbage collector's mark phase."},
	"go_gc_cpu_seconds_total":             {help: "CPU time spent by the garbage collector."},
	"go_gc_pauses_seconds":                {help: "Stop-the-world pauses of the garbage collector."},
	"go_scavenge_cpu_seconds_total":       {help: "CPU time spent returning unused memory to the operating system."},
	"go_memlimit_bytes":                   {help: "The Go memory limit (GOMEMLIMIT)."},

	"go_memstats_alloc_bytes":          {help: "Bytes of allocated heap objects."},
	"go_memstats_alloc_bytes_total":    {help: "Bytes allocated for heap objects since the process started."},
	"go_memstats_buck_hash_sys_bytes":  {help: "Bytes of memory in profiling bucket hash tables."},
	"go_memstats_frees_total":          {help: "Heap objects freed since the process started."},
	"go_memstats_gc_cpu_fraction":      {help: "Fraction of the available CPU time used by the garbage collector since the process started."},
	"go_memstats_gc_sys_bytes":         {help: "Bytes of memory in garbage collection metadata."},
	"go_memstats_heap_alloc_bytes":     {help: "Bytes of allocated heap objects."},
	"go_memstats_heap_idle_bytes":      {help: "Bytes in idle (unused) heap spans."},
	"go_memstats_heap_inuse_bytes":     {help: "Bytes in in-use heap spans."},
	"go_memstats_heap_objects":         {help: "Number of allocated heap objects."},
	"go_memstats_heap_released_bytes":  {help: "Bytes of heap memory returned to the operating system."},
	"go_memstats_heap_sys_bytes":       {help: "Bytes of heap memory obtained from the operating system."},
	"go_memstats_last_gc_time_seconds": {help: "When the last garbage collection finished, in seconds since the Unix epoch."},
	"go_memstats_lookups_total":        {help: "Pointer lookups performed by the runtime."},
	"go_memstats_mallocs_total":        {help: "Heap objects allocated since the process started."},
	"go_memstats_mcache_inuse_bytes":   {help: "Bytes of allocated mcache structures."},
	"go_memstats_mcache_sys_bytes":     {help: "Bytes of memory obtained from the operating system for mcache structures."},
	"go_memstats_mspan_inuse_bytes":    {help: "Bytes of allocated mspan structures."},
	"go_memstats_mspan_sys_bytes":      {help: "Bytes of memory obtained from the operating system for mspan structures."},
	"go_memstats_next_gc_bytes":        {help: "Heap size the next garbage collection aims for."},
	"go_memstats_other_sys_bytes":      {help: "Bytes of memory in miscellaneous off-heap runtime allocations."},
	"go_memstats_stack_inuse_bytes":    {help: "Bytes in stack spans."},
	"go_memstats_stack_sys_bytes":      {help: "Bytes of stack memory obtained from the operating system."},
	"go_memstats_sys_bytes":            {help: "Bytes of memory obtained from the operating system."},

	"go_cgo_calls_count":     {help: "Calls from Go to C since the process started.", name: "go_cgo_calls_total"},
	"go_cpu_count":           {help: "Logical CPUs usable by the process.", name: "go_cpus"},
	"go_gc_duration_seconds": {help: "Pause durations of the last garbage collections."},
	"go_gc_forced_count":     {help: "Garbage collections forced by the application.", name: "go_gc_forced_total"},
	"go_gomaxprocs":          {help: "GOMAXPROCS: OS threads that may run Go code at once."},
	"go_goroutines":          {help: "Goroutines that currently exist."},
	"go_threads":             {help: "OS threads created."},
	"go_info":                {help: "The Go version the binary was built with, as a label."},
	"go_info_ext":            {help: "The Go compiler, GOARCH, GOOS and GOROOT, as labels."},

	"process_cpu_seconds_system_total":              {help: "CPU time spent in the kernel for the process."},
	"process_cpu_seconds_total":                     {help: "CPU time spent by the process, user and system."},
	"process_cpu_seconds_user_total":                {help: "CPU time spent in user mode by the process."},
	"process_major_pagefaults_total":                {help: "Page faults that needed a disk read."},
	"process_minor_pagefaults_total":                {help: "Page faults served without a disk read."},
	"process_num_threads":                           {help: "OS threads in the process."},
	"process_resident_memory_bytes":                 {help: "Resident set size of the process."},
	"process_start_time_seconds":                    {help: "When the process started, in seconds since the Unix epoch."},
	"process_virtual_memory_bytes":                  {help: "Virtual memory size of the process."},
	"process_virtual_memory_peak_bytes":             {help: "Peak virtual memory size of the process."},
	"process_resident_memory_peak_bytes":            {help: "Peak resident set size of the process."},
	"process_resident_memory_anon_bytes":            {help: "Resident anonymous memory of the process."},
	"process_resident_memory_file_bytes":            {help: "Resident file-backed memory of the process."},
	"process_resident_memory_shared_bytes":          {help: "Resident shared memory of the process."},
	"process_io_read_bytes_total":                   {help: "Bytes the process read through read-like system calls.", typ: "counter"},
	"process_io_written_bytes_total":                {help: "Bytes the process wrote through write-like system calls.", typ: "counter"},
	"process_io_read_syscalls_total":                {help: "Read-like system calls of the process.", typ: "counter"},
	"process_io_write_syscalls_total":               {help: "Write-like system calls of the process.", typ: "counter"},
	"process_io_storage_read_bytes_total":           {help: "Bytes the process caused to be read from storage.", typ: "counter"},
	"process_io_storage_written_bytes_total":        {help: "Bytes the process caused to be written to storage.", typ: "counter"},
	"process_pressure_cpu_waiting_seconds_total":    {help: "Time some of the process's tasks waited for a CPU (PSI)."},
	"process_pressure_cpu_stalled_seconds_total":    {help: "Time all of the process's tasks waited for a CPU (PSI)."},
	"process_pressure_io_waiting_seconds_total":     {help: "Time some of the process's tasks waited for I/O (PSI)."},
	"process_pressure_io_stalled_seconds_total":     {help: "Time all of the process's tasks waited for I/O (PSI)."},
	"process_pressure_memory_waiting_seconds_total": {help: "Time some of the process's tasks waited for memory (PSI)."},
	"process_pressure_memory_stalled_seconds_total": {help: "Time all of the process's tasks waited for memory (PSI)."},
	"process_max_fds":                               {help: "Most file descriptors the process may open."},
	"process_open_fds":                              {help: "File descriptors the process has open."},
}
