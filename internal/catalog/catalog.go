// Package catalog is the list of the kinds this build writes: each kind
// family's store Writer, which the daemon (cmd/counterd) and the rollup
// (cmd/rollup) hand to slots.New (Options.Kinds). Registration is this
// explicit list, not init side effects: it is the one file that names
// every kind's writer, and a new kind adds its writer here.
package catalog

import "github.com/counterd/counterd/internal/slots"

// Writers returns the store's writers of every kind, a new slice each
// call. Writers of equal Order run in this order within a round.
func Writers() []slots.Writer {
	return []slots.Writer{
		slots.SetWriter(),
		slots.ExpireWriter(),
		slots.OnceWriter(),
		slots.MemberWriter(),
		slots.TotalsWriter(),
		slots.WindowsWriter(),
		slots.GrantWriter(),
		slots.UniquesWriter(),
		slots.UniqueBucketsWriter(),
	}
}
