// Package config reads counterd's and rollup's settings from environment
// variables into one struct each, with caarlos0/env.
//
// Every field carries its variable (env), default (envDefault) and one line
// of help (help); Usage prints them as the -h table, so the help can never
// drift from what is parsed. Load returns a single-line error naming the
// variable that is missing or invalid.
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/counterd/counterd/internal/journal"
)

// Error is a missing or invalid variable.
type Error struct {
	Var string
	Msg string
}

func (e *Error) Error() string { return e.Var + ": " + e.Msg }

// Validator is implemented by configs that check themselves after parsing.
type Validator interface {
	Validate() error
}

// resolver is implemented by configs whose defaults depend on the
// environment (which caarlos0/env's static defaults cannot express).
type resolver interface {
	resolve(env map[string]string)
}

// Load parses environ (KEY=VALUE pairs, as os.Environ returns) into a T,
// resolves defaults that depend on the environment, and validates it.
func Load[T any](environ []string) (T, error) {
	var cfg T
	vars := env.ToMap(environ)
	err := env.ParseWithOptions(&cfg, env.Options{Environment: vars})
	if err != nil {
		return cfg, oneLine(&cfg, vars, err)
	}
	if r, ok := any(&cfg).(resolver); ok {
		r.resolve(vars)
	}
	if v, ok := any(&cfg).(Validator); ok {
		if err := v.Validate(); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// oneLine turns env's aggregate error into one *Error for the first
// problem, naming the variable rather than the Go field, and for a value
// that does not parse, the value and what the variable takes rather than
// the Go type.
func oneLine(cfg any, vars map[string]string, err error) error {
	var agg env.AggregateError
	if errors.As(err, &agg) && len(agg.Errors) > 0 {
		err = agg.Errors[0]
	}
	var notSet env.VarIsNotSetError
	if errors.As(err, &notSet) {
		return &Error{Var: notSet.Key, Msg: "required, not set"}
	}
	var empty env.EmptyVarError
	if errors.As(err, &empty) {
		return &Error{Var: empty.Key, Msg: "must not be empty"}
	}
	var parse env.ParseError
	if errors.As(err, &parse) {
		name, def := varOf(cfg, parse.Name)
		value, ok := vars[name]
		if !ok {
			value = def
		}
		takes, ok := takes[parse.Type]
		if !ok {
			takes = "a valid value" // a new type: TestEverySettingTypeIsDescribed fails
		}
		return &Error{Var: name, Msg: fmt.Sprintf("invalid value %q; want %s", value, takes)}
	}
	return err
}

// takes says what a variable of each type other than string takes, for
// errors: caarlos0/env names the Go type (journal.FsyncMode, slog.Level),
// which an operator cannot act on.
var takes = map[reflect.Type]string{
	reflect.TypeFor[bool]():              "true or false",
	reflect.TypeFor[int]():               "an integer",
	reflect.TypeFor[int64]():             "an integer",
	reflect.TypeFor[uint64]():            "a non-negative integer",
	reflect.TypeFor[[]int]():             "integers separated by commas",
	reflect.TypeFor[[]int64]():           "integers separated by commas",
	reflect.TypeFor[[]float64]():         "numbers separated by commas",
	reflect.TypeFor[float64]():           "a number",
	reflect.TypeFor[time.Duration]():     "a duration such as 250ms, 30s, 5m or 1h30m",
	reflect.TypeFor[time.Time]():         "an RFC 3339 time such as 2026-01-02T15:04:05Z",
	reflect.TypeFor[slog.Level]():        "debug, info, warn or error",
	reflect.TypeFor[journal.FsyncMode](): "always, everysec or no",
	reflect.TypeFor[Mode]():              "an octal permission mode such as 0600",
}

// varOf returns the variable a field of cfg is read from, and its
// default.
func varOf(cfg any, field string) (name, def string) {
	t := reflect.TypeOf(cfg).Elem()
	if f, ok := t.FieldByName(field); ok {
		if name, _, _ := strings.Cut(f.Tag.Get("env"), ","); name != "" {
			return name, f.Tag.Get("envDefault")
		}
	}
	return field, ""
}

// Usage writes a table of every variable T reads, with default and help.
// A field's defaultDoc tag names a default that is resolved at load time.
func Usage[T any](w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
	t := reflect.TypeFor[T]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("env"), ",")
		if name == "" {
			continue
		}
		def, ok := f.Tag.Lookup("envDefault")
		switch {
		case f.Tag.Get("defaultDoc") != "":
			def = f.Tag.Get("defaultDoc")
		case strings.Contains(opts, "required"):
			def = "(required)"
		case !ok || def == "":
			def = `""`
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, def, f.Tag.Get("help"))
	}
	tw.Flush()
}
