package change

import (
	"fmt"
	"time"
)

// builtin lists every kind this build knows, each with the Spec its
// kind_*.go file declares. It is the one place kinds are registered: a
// new kind adds its line here, and nothing registers itself.
//
// A Spec's functions must not call the Kind methods that read the table
// (Width, Valid, String, ...): the table is built from this list, and
// the compiler reports such a call as an initialization cycle. They take
// what they need from their own declaration (checkWindow's width).
func builtin() []declared {
	return []declared{
		{Total, totalSpec()},
		{Minute, windowSpec("minute", time.Minute)},
		{Hour, windowSpec("hour", time.Hour)},
		{Day, windowSpec("day", 24*time.Hour)},
		{Set, setSpec()},
		{Expire, expireSpec()},
		{Grant, grantSpec()},
		{Unique, uniqueSpec()},
		{UniqueMinute, uniqueWindowSpec("unique_minute", Minute)},
		{UniqueHour, uniqueWindowSpec("unique_hour", Hour)},
		{UniqueDay, uniqueWindowSpec("unique_day", Day)},
		{Once, onceSpec()},
		{SetOp, setOpSpec()},
	}
}

// declared is one kind of the list.
type declared struct {
	kind Kind
	spec Spec
}

// table is the kinds known, indexed by kind, so that a Kind's methods on
// the accept path are one load, without a lock or an allocation.
type table struct {
	specs [256]*Spec
	// plain is the kind whose Spec says Plain.
	plain Kind
}

// kinds is the table of this build's kinds (builtin), built once as the
// package's variables are. Only Register, which a test calls before it
// uses its kind, adds to it.
var kinds = newTable(builtin())

// newTable builds the table of the kinds of list; it panics as Register
// does.
func newTable(list []declared) table {
	var t table
	for _, d := range list {
		t.add(d.kind, d.spec)
	}
	return t
}

// Register adds kind k, declared outside this package's list: a kind a
// test declares (internal/kindtest's "max"). Call it before any change of
// the kind is made, and before goroutines that read kinds start (from
// TestMain, say): the table is not locked. The daemon never calls it; a
// kind of the product is a line of builtin. Registering a kind twice, kind
// 0, or a second plain kind panics, and registers nothing.
func Register(k Kind, s Spec) { kinds.add(k, s) }

func (t *table) add(k Kind, s Spec) {
	switch {
	case k == 0:
		panic("BUG: kind 0 means no kind")
	case t.specs[k] != nil:
		panic(fmt.Sprintf("BUG: kind %d registered twice (%s, %s)", k, t.specs[k].Name, s.Name))
	case s.Plain && t.plain != 0:
		panic(fmt.Sprintf("BUG: two plain kinds (%s, %s)", t.specs[t.plain].Name, s.Name))
	case s.Window != 0 && (!s.Members || s.Start == nil):
		panic(fmt.Sprintf("BUG: kind %s has a window but no members or no Start", s.Name))
	}
	if o, ok := t.membersIn(s.Window); ok {
		panic(fmt.Sprintf("BUG: kinds %s and %s both keep members per %s bucket", t.specs[o].Name, s.Name, t.name(s.Window)))
	}
	if s.Plain {
		if s.Merge != nil || s.Lands != 0 || s.Width != 0 || len(s.Cancels) > 0 || s.Read != nil {
			panic(fmt.Sprintf("BUG: plain kind %s must add up, without buckets, on its own cell", s.Name))
		}
		t.plain = k
	}
	t.specs[k] = &s
}

// membersIn is MembersIn of t.
func (t *table) membersIn(w Kind) (Kind, bool) {
	for k, s := range t.specs {
		if s != nil && s.Window == w && w != 0 {
			return Kind(k), true
		}
	}
	return 0, false
}

// name is k's name in t, for a message.
func (t *table) name(k Kind) string {
	if s := t.specs[k]; s != nil {
		return s.Name
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}
