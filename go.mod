module github.com/counterd/counterd

go 1.26.8

require (
	github.com/VictoriaMetrics/metrics v1.44.0
	github.com/caarlos0/env/v11 v11.4.2
	github.com/jackc/pgx/v5 v5.12.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/redis/rueidis v1.0.79
	github.com/robfig/cron/v3 v3.0.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sync v0.22.0
	golang.org/x/sys v0.48.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)
