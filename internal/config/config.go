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
	"reflect"
	"strings"
	"text/tabwriter"

	"github.com/caarlos0/env/v11"
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
		return cfg, oneLine(&cfg, err)
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
// problem, naming the variable rather than the Go field.
func oneLine(cfg any, err error) error {
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
		msg := parse.Err.Error()
		// strconv and time errors quote the input already; keep the reason.
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		return &Error{Var: varOf(cfg, parse.Name), Msg: fmt.Sprintf("invalid %s: %s", parse.Type, msg)}
	}
	return err
}

func varOf(cfg any, field string) string {
	t := reflect.TypeOf(cfg).Elem()
	if f, ok := t.FieldByName(field); ok {
		if name, _, _ := strings.Cut(f.Tag.Get("env"), ","); name != "" {
			return name
		}
	}
	return field
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
