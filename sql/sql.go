// Package sql holds counterd's schema as numbered migrations.
//
// Each migration is a pair of files, NNN_name.up.sql and NNN_name.down.sql,
// embedded into the binaries so that a deployed daemon carries the schema it
// was built for. internal/migrate applies them.
package sql

import "embed"

// FS holds every migration file in this directory.
//
//go:embed *.sql
var FS embed.FS

// Proxy holds the read interface a PL/Proxy cluster's proxy database
// gets (proxy/cluster.sql), with :cluster to replace by the cluster's
// name.
//
//go:embed proxy/*.sql
var Proxy embed.FS
