// Package sql holds counterd's schema as numbered migrations.
//
// Each migration is a pair of files, NNN_name.up.sql and NNN_name.down.sql,
// embedded into the binaries so that a deployed daemon carries the schema it
// was built for. internal/migrate applies them.
package sql

import "embed"

// Files returns every migration file in this directory. A function, not
// an exported variable, so no importer can swap the schema another sees.
func Files() embed.FS { return files }

//go:embed *.sql
var files embed.FS

// Proxy returns the read interface a PL/Proxy cluster's proxy database
// gets (proxy/cluster.sql), with :cluster to replace by the cluster's
// name.
func Proxy() embed.FS { return proxy }

//go:embed proxy/*.sql
var proxy embed.FS
