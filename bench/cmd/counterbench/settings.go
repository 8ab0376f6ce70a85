package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/counterd/counterd/internal/bench/keyspace"
	"github.com/counterd/counterd/internal/config"
)

// settings is counterbench's configuration, read from the environment.
type settings struct {
	DatabaseURL string        `env:"DATABASE_URL,required,notEmpty" help:"PostgreSQL to measure (never logged); the run drops and recreates COUNTERBENCH_SCHEMA in it"`
	Duration    time.Duration `env:"COUNTERBENCH_DURATION" envDefault:"5s" help:"how long each cell runs"`
	Clients     []int         `env:"COUNTERBENCH_CLIENTS" envDefault:"1,8,32,64" help:"client concurrencies, comma-separated"`
	Keys        []string      `env:"COUNTERBENCH_KEYS" envDefault:"hot,zipf,uniform" help:"key distributions: hot (one key), zipf (s=1.1), uniform"`
	// A million keys makes uniform keys almost never collide, the opposite
	// of hot.
	Keyspace   uint64   `env:"COUNTERBENCH_KEYSPACE" envDefault:"1000000" help:"keys that zipf and uniform draw from"`
	Approaches []string `env:"COUNTERBENCH_APPROACHES" envDefault:"all" help:"approaches to measure, comma-separated, or all"`
	Sections   []string `env:"COUNTERBENCH_SECTIONS" envDefault:"matrix,ceiling,ingest,latency,sustain,windows,uniques,partitions,budget,tickets,fleet,sets" help:"sections to run: matrix, ceiling, ingest, latency, sustain, windows, uniques, partitions, budget, tickets, fleet, sets"`
	Out        string   `env:"COUNTERBENCH_OUT" envDefault:"results" help:"directory for bench.md, bench.csv, bench.png and the servers' logs"`
	Schema     string   `env:"COUNTERBENCH_SCHEMA" envDefault:"counterbench" help:"schema holding every table of the run, counterd's included"`

	Counterd       string `env:"COUNTERBENCH_COUNTERD" envDefault:"bin/counterd" help:"counterd binary (make build); COUNTERD_* variables are passed to it"`
	RedisServer    string `env:"COUNTERBENCH_REDIS_SERVER" help:"redis-server binary (default: redis-server on PATH; rows say so when there is none)"`
	RedisBenchmark string `env:"COUNTERBENCH_REDIS_BENCHMARK" help:"redis-benchmark binary (default: redis-benchmark on PATH)"`

	IngestRequests int `env:"COUNTERBENCH_INGEST_REQUESTS" envDefault:"2000000" help:"redis-benchmark -n per ingest run (a multiple of 16)"`
	// Three runs give a median and a range on a machine whose load
	// varies.
	IngestRuns int `env:"COUNTERBENCH_INGEST_RUNS" envDefault:"3" help:"times the ingest section runs every server at each pipeline depth, interleaved"`
	// The target is 50,000/s; the lower rates show where latency bends.
	LatencyRates   []float64 `env:"COUNTERBENCH_LATENCY_RATES" envDefault:"10000,25000,50000" help:"increments per second offered in the latency section, comma-separated"`
	LatencyClients int       `env:"COUNTERBENCH_LATENCY_CLIENTS" envDefault:"50" help:"unpipelined clients sharing that rate"`
	CeilingBatch   int       `env:"COUNTERBENCH_CEILING_BATCH" envDefault:"10000" help:"distinct keys per statement in the ceiling section"`
	// Long enough for several rounds to queue up if PostgreSQL cannot
	// keep up, at a rate a busy web tier's counters might offer.
	SustainRate     float64       `env:"COUNTERBENCH_SUSTAIN_RATE" envDefault:"150000" help:"increments per second offered to counterd in the sustain section"`
	SustainDuration time.Duration `env:"COUNTERBENCH_SUSTAIN_DURATION" envDefault:"30s" help:"how long the sustain section runs"`

	// K keys drawing members from K: 2,000,000 adds over 1,000 keys
	// leave about 865 distinct members a key, below postgresql-hll's
	// explicit threshold (1,280), where counter_uniques is exact, and
	// repeat about 57% of the members.
	UniquesRequests int `env:"COUNTERBENCH_UNIQUES_REQUESTS" envDefault:"2000000" help:"redis-benchmark -n of each INCR and PFADD cell of the uniques section (a multiple of 16)"`
	UniquesKeys     int `env:"COUNTERBENCH_UNIQUES_KEYS" envDefault:"1000" help:"redis-benchmark -r of the INCR and PFADD cells: the keys, and the members each key draws from"`
	UniquesRuns     int `env:"COUNTERBENCH_UNIQUES_RUNS" envDefault:"2" help:"times the uniques section runs every cell, interleaved"`
	// INCRONCE decides every view in PostgreSQL (a seen-set row per
	// new visitor), so its cells are smaller to keep the section short.
	OnceRequests int       `env:"COUNTERBENCH_ONCE_REQUESTS" envDefault:"500000" help:"redis-benchmark -n of each INCRONCE cell of the uniques section (a multiple of 16)"`
	OnceRepeats  []float64 `env:"COUNTERBENCH_ONCE_REPEATS" envDefault:"1,50" help:"shares of repeated views, in percent, the INCRONCE cells aim at (one cell each)"`

	// Plain PostgreSQL and three clusters, 3 runs (a median) of
	// 1,600,000 increments: twelve cells of a few seconds each on two
	// cores (long enough for rounds to coalesce as they would under a
	// steady load), about a minute with declaring the clusters and
	// starting every daemon.
	Partitions        []int  `env:"COUNTERBENCH_PARTITIONS" envDefault:"1,2,4" help:"partition counts (powers of two) of the PL/Proxy clusters the partitions section compares with plain PostgreSQL"`
	PartitionRequests int    `env:"COUNTERBENCH_PARTITIONS_REQUESTS" envDefault:"1600000" help:"redis-benchmark -n of each partitions cell (a multiple of 16)"`
	PartitionRuns     int    `env:"COUNTERBENCH_PARTITIONS_RUNS" envDefault:"3" help:"times the partitions section runs every setup, interleaved"`
	ClusterScript     string `env:"COUNTERBENCH_CLUSTER_SCRIPT" envDefault:"scripts/cluster.sh" help:"script that declares a cluster (--fresh URL N NAME; prints the proxy's URL); make bench runs from the checkout, where the default is"`

	// Seed 000's sizes: one budget that runs out within a cell, one that
	// does not (the steady state).
	BudgetSizes      []int64  `env:"COUNTERBENCH_BUDGETS" envDefault:"10000,10000000" help:"budgets the budget section spends, comma-separated"`
	BudgetClients    []int    `env:"COUNTERBENCH_BUDGET_CLIENTS" envDefault:"3,6,9,32" help:"client concurrencies of the budget section"`
	BudgetApproaches []string `env:"COUNTERBENCH_BUDGET_APPROACHES" envDefault:"all" help:"budget approaches, comma-separated, or all: naive, for-update, lock-free, counterd, counterd-2"`
	// Long enough for the SQL approaches to spend a budget of 10,000 on
	// a quiet two-core machine (the seed's 1,000–4,000 grants/s).
	BudgetDuration time.Duration `env:"COUNTERBENCH_BUDGET_DURATION" envDefault:"10s" help:"longest a budget or tickets cell runs; it ends earlier once the budget or the tickets are spent"`
	Tickets        int           `env:"COUNTERBENCH_TICKETS" envDefault:"10000" help:"tickets the owner has in each tickets cell"`
	TicketClients  []int         `env:"COUNTERBENCH_TICKET_CLIENTS" envDefault:"2,8,32" help:"concurrent draws of one owner in the tickets section"`

	// An app server per daemon: one, a few, a rack, a large web tier.
	FleetSizes    []int `env:"COUNTERBENCH_FLEET_SIZES" envDefault:"1,4,16,32" help:"numbers of counterd daemons the fleet section runs against one PostgreSQL (1..64)"`
	FleetRequests int   `env:"COUNTERBENCH_FLEET_REQUESTS" envDefault:"400000" help:"increments of each fleet cell, split over its daemons (a multiple of 16)"`
	// 1,000 keys: every daemon writes the same popular keys every
	// round; 100,000: keys that rarely repeat within a round.
	FleetKeys []int `env:"COUNTERBENCH_FLEET_KEYS" envDefault:"1000,100000" help:"redis-benchmark -r of the fleet section's workloads, comma-separated"`
	// PostgreSQL 15 flushes an idle backend's statistics up to 10 s
	// (PGSTAT_IDLE_INTERVAL) after its last transaction: a cell that
	// read them sooner would count its daemons' start-up as its own.
	FleetSettle time.Duration `env:"COUNTERBENCH_FLEET_SETTLE" envDefault:"11s" help:"how long a fleet cell waits after starting its processes before it reads PostgreSQL's statistics"`
	// Unpaced, a fleet too large for the machine's cores runs slower than
	// one daemon, and each increment bears more of every per-second cost;
	// paced below what the largest fleet reaches, every N gets the same
	// load a second, as a real fleet's database does.
	FleetRate float64 `env:"COUNTERBENCH_FLEET_RATE" envDefault:"0" help:"when positive, the fleet section's increments a second in all, paced by counterbench's own load generator (INCR, HINCRBY for the peer) rather than redis-benchmark as fast as it goes"`

	// A hundred hot posts liked by a busy site's users: every round
	// touches every key, and in the application's own pattern every
	// like waits for its post's row lock.
	SetsPosts   int `env:"COUNTERBENCH_SETS_POSTS" envDefault:"100" help:"keys (posts) of the sets section: post:0:likes ... and the likes pattern's posts rows"`
	SetsClients int `env:"COUNTERBENCH_SETS_CLIENTS" envDefault:"32" help:"clients of every sets cell (and the likes pattern's connections)"`
	SetsRuns    int `env:"COUNTERBENCH_SETS_RUNS" envDefault:"2" help:"times the sets section runs every cell, interleaved"`
	// A cap besides COUNTERBENCH_DURATION, so a cell's loop is bounded by
	// count too, and the members the run keeps track of stay few.
	SetsRequests int `env:"COUNTERBENCH_SETS_REQUESTS" envDefault:"20000000" help:"most requests of a sets cell; it ends there or after COUNTERBENCH_DURATION, whichever comes first"`
}

var (
	sectionNames = []string{"matrix", "ceiling", "ingest", "latency", "sustain", "windows", "uniques", "partitions", "budget", "tickets", "fleet", "sets"}
	schemaName   = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)
)

// Validate checks and normalises what env cannot: lists are trimmed,
// clients sorted without repeats, "all" expanded.
func (s *settings) Validate() error {
	bad := func(name, format string, args ...any) error {
		return &config.Error{Var: name, Msg: fmt.Sprintf(format, args...)}
	}
	if s.Duration <= 0 {
		return bad("COUNTERBENCH_DURATION", "must be positive")
	}
	if len(s.Clients) == 0 {
		return bad("COUNTERBENCH_CLIENTS", "must name at least one concurrency")
	}
	for _, c := range s.Clients {
		if c < 1 || c > 512 {
			return bad("COUNTERBENCH_CLIENTS", "%d is not within 1..512", c)
		}
	}
	slices.Sort(s.Clients)
	s.Clients = slices.Compact(s.Clients)

	s.Keys = tidy(s.Keys)
	if len(s.Keys) == 0 {
		return bad("COUNTERBENCH_KEYS", "must name at least one distribution")
	}
	for _, k := range s.Keys {
		if _, err := keyspace.Parse(k); err != nil {
			return bad("COUNTERBENCH_KEYS", "%v", err)
		}
	}
	if s.Keyspace < 1 || s.Keyspace > 100_000_000 {
		return bad("COUNTERBENCH_KEYSPACE", "must be within 1..100000000")
	}

	s.Approaches = tidy(s.Approaches)
	if len(s.Approaches) == 1 && s.Approaches[0] == "all" {
		s.Approaches = approachNames()
	}
	for _, a := range s.Approaches {
		if _, ok := lookupApproach(a); !ok {
			return bad("COUNTERBENCH_APPROACHES", "unknown approach %q (want all or some of %s)", a, strings.Join(approachNames(), ", "))
		}
	}
	s.Sections = tidy(s.Sections)
	for _, sec := range s.Sections {
		if !slices.Contains(sectionNames, sec) {
			return bad("COUNTERBENCH_SECTIONS", "unknown section %q (want some of %s)", sec, strings.Join(sectionNames, ", "))
		}
	}
	switch {
	case s.Out == "":
		return bad("COUNTERBENCH_OUT", "must not be empty")
	case !schemaName.MatchString(s.Schema) || s.Schema == "public" || strings.HasPrefix(s.Schema, "pg_"):
		return bad("COUNTERBENCH_SCHEMA", "%q is not a lower-case identifier of our own (it is dropped at start)", s.Schema)
	case s.IngestRequests < 16 || s.IngestRequests%16 != 0:
		// redis-benchmark sends whole pipelines: with -P 16 it would
		// send more than -n asked for otherwise.
		return bad("COUNTERBENCH_INGEST_REQUESTS", "must be a positive multiple of 16")
	case s.IngestRuns < 1 || s.IngestRuns > 100:
		return bad("COUNTERBENCH_INGEST_RUNS", "must be within 1..100")
	case len(s.LatencyRates) == 0 || slices.Min(s.LatencyRates) <= 0:
		return bad("COUNTERBENCH_LATENCY_RATES", "must list positive rates")
	case s.LatencyClients < 1 || s.LatencyClients > 512:
		return bad("COUNTERBENCH_LATENCY_CLIENTS", "must be within 1..512")
	case s.CeilingBatch < 1:
		return bad("COUNTERBENCH_CEILING_BATCH", "must be at least 1")
	case s.SustainRate <= 0:
		return bad("COUNTERBENCH_SUSTAIN_RATE", "must be positive")
	case s.SustainDuration <= 0:
		return bad("COUNTERBENCH_SUSTAIN_DURATION", "must be positive")
	}
	for _, validate := range []func(func(name, format string, args ...any) error) error{s.validateUniques, s.validatePartitions, s.validateBudget, s.validateFleet, s.validateSets} {
		if err := validate(bad); err != nil {
			return err
		}
	}
	return nil
}

// validateUniques checks the uniques section's settings.
func (s *settings) validateUniques(bad func(name, format string, args ...any) error) error {
	for _, n := range []struct {
		name string
		v    int
	}{{"COUNTERBENCH_UNIQUES_REQUESTS", s.UniquesRequests}, {"COUNTERBENCH_ONCE_REQUESTS", s.OnceRequests}} {
		if n.v < 16 || n.v%16 != 0 {
			// Whole pipelines of 16, as in the ingest section.
			return bad(n.name, "must be a positive multiple of 16")
		}
	}
	switch {
	case s.UniquesKeys < 1 || s.UniquesKeys > 10_000_000:
		return bad("COUNTERBENCH_UNIQUES_KEYS", "must be within 1..10000000")
	case s.UniquesRuns < 1 || s.UniquesRuns > 100:
		return bad("COUNTERBENCH_UNIQUES_RUNS", "must be within 1..100")
	case len(s.OnceRepeats) == 0 || slices.Min(s.OnceRepeats) <= 0 || slices.Max(s.OnceRepeats) >= 100:
		return bad("COUNTERBENCH_ONCE_REPEATS", "must list percentages above 0 and below 100")
	}
	s.OnceRepeats = slices.Compact(s.OnceRepeats)
	return nil
}

// validatePartitions checks the partitions section's settings.
func (s *settings) validatePartitions(bad func(name, format string, args ...any) error) error {
	if len(s.Partitions) == 0 {
		return bad("COUNTERBENCH_PARTITIONS", "must list at least one partition count")
	}
	for _, n := range s.Partitions {
		// PL/Proxy routes by hashtext(key) & (n-1).
		if n < 1 || n > 256 || n&(n-1) != 0 {
			return bad("COUNTERBENCH_PARTITIONS", "%d is not a power of two within 1..256", n)
		}
	}
	slices.Sort(s.Partitions)
	s.Partitions = slices.Compact(s.Partitions)
	switch {
	case s.PartitionRequests < 16 || s.PartitionRequests%16 != 0:
		// Whole pipelines of 16, as in the ingest section.
		return bad("COUNTERBENCH_PARTITIONS_REQUESTS", "must be a positive multiple of 16")
	case s.PartitionRuns < 1 || s.PartitionRuns > 100:
		return bad("COUNTERBENCH_PARTITIONS_RUNS", "must be within 1..100")
	case s.runs("partitions") && len(clusterName(s.Schema, s.Partitions[len(s.Partitions)-1])) > 51:
		// scripts/cluster.sh's limit: NAME_p255 must stay an identifier.
		return bad("COUNTERBENCH_SCHEMA", "%q is too long to name the partitions section's clusters", s.Schema)
	}
	return nil
}

// validateBudget checks the budget and tickets sections' settings.
func (s *settings) validateBudget(bad func(name, format string, args ...any) error) error {
	if len(s.BudgetSizes) == 0 || slices.Min(s.BudgetSizes) < 1 {
		return bad("COUNTERBENCH_BUDGETS", "must list positive budgets")
	}
	s.BudgetSizes = slices.Compact(s.BudgetSizes)
	for _, l := range []struct {
		name string
		list *[]int
	}{{"COUNTERBENCH_BUDGET_CLIENTS", &s.BudgetClients}, {"COUNTERBENCH_TICKET_CLIENTS", &s.TicketClients}} {
		if len(*l.list) == 0 || slices.Min(*l.list) < 1 || slices.Max(*l.list) > 512 {
			return bad(l.name, "must list concurrencies within 1..512")
		}
		slices.Sort(*l.list)
		*l.list = slices.Compact(*l.list)
	}
	s.BudgetApproaches = tidy(s.BudgetApproaches)
	if len(s.BudgetApproaches) == 1 && s.BudgetApproaches[0] == "all" {
		s.BudgetApproaches = budgetApproachNames()
	}
	for _, a := range s.BudgetApproaches {
		if _, ok := lookupBudgetApproach(a); !ok {
			return bad("COUNTERBENCH_BUDGET_APPROACHES", "unknown approach %q (want all or some of %s)", a, strings.Join(budgetApproachNames(), ", "))
		}
	}
	switch {
	case s.BudgetDuration <= 0:
		return bad("COUNTERBENCH_BUDGET_DURATION", "must be positive")
	case s.Tickets < 1:
		return bad("COUNTERBENCH_TICKETS", "must be at least 1")
	}
	return nil
}

// validateFleet checks the fleet section's settings.
func (s *settings) validateFleet(bad func(name, format string, args ...any) error) error {
	if len(s.FleetSizes) == 0 || slices.Min(s.FleetSizes) < 1 || slices.Max(s.FleetSizes) > 64 {
		return bad("COUNTERBENCH_FLEET_SIZES", "must list daemon counts within 1..64")
	}
	slices.Sort(s.FleetSizes)
	s.FleetSizes = slices.Compact(s.FleetSizes)
	if len(s.FleetKeys) == 0 || slices.Min(s.FleetKeys) < 1 || slices.Max(s.FleetKeys) > 10_000_000 {
		return bad("COUNTERBENCH_FLEET_KEYS", "must list key counts within 1..10000000")
	}
	s.FleetKeys = slices.Compact(s.FleetKeys)
	switch {
	case s.FleetRequests%16 != 0 || s.FleetRequests < 16*slices.Max(s.FleetSizes):
		// Whole pipelines of 16 for every daemon, as in the ingest
		// section.
		return bad("COUNTERBENCH_FLEET_REQUESTS", "must be a multiple of 16, at least 16 for each of the most daemons")
	case s.FleetSettle < 0:
		return bad("COUNTERBENCH_FLEET_SETTLE", "must not be negative")
	case s.FleetRate < 0:
		return bad("COUNTERBENCH_FLEET_RATE", "must not be negative")
	case s.runs("fleet") && len(fleetDatabase(s.Schema)) > 63:
		return bad("COUNTERBENCH_SCHEMA", "%q is too long to name the fleet section's database", s.Schema)
	}
	return nil
}

// validateSets checks the sets section's settings.
func (s *settings) validateSets(bad func(name, format string, args ...any) error) error {
	switch {
	case s.SetsPosts < 1 || s.SetsPosts > 1_000_000:
		return bad("COUNTERBENCH_SETS_POSTS", "must be within 1..1000000")
	case s.SetsClients < 1 || s.SetsClients > 512:
		return bad("COUNTERBENCH_SETS_CLIENTS", "must be within 1..512")
	case s.SetsRuns < 1 || s.SetsRuns > 100:
		return bad("COUNTERBENCH_SETS_RUNS", "must be within 1..100")
	case s.SetsRequests < 1 || s.SetsRequests > 100_000_000:
		return bad("COUNTERBENCH_SETS_REQUESTS", "must be within 1..100000000")
	}
	return nil
}

func (s *settings) runs(section string) bool { return slices.Contains(s.Sections, section) }

// dists returns the key distributions in the order given.
func (s *settings) dists() []keyspace.Dist {
	out := make([]keyspace.Dist, len(s.Keys))
	for i, k := range s.Keys {
		out[i], _ = keyspace.Parse(k)
	}
	return out
}

// tidy trims and lower-cases list items and drops empty ones and repeats.
func tidy(in []string) []string {
	var out []string
	for _, s := range in {
		s = strings.ToLower(strings.TrimSpace(s))
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
