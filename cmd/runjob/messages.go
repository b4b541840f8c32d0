package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// flagError says in one line what is wrong with the command line and
// what runjob wants instead (the flag package's errors name Go's types).
func flagError(err error, fs *flag.FlagSet) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		s := fmt.Sprintf("--%s is not a flag of runjob", name)
		if near := nearestFlag(fs, name); near != "" {
			s += fmt.Sprintf("; did you mean --%s?", near)
		}
		return s + " (runjob --help lists them all)"
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Sprintf("--%s needs a value: --%s=VALUE", name, name)
	}
	// invalid value "abc" for flag -state_ttl: parse error
	// invalid boolean value "x" for -force_stateful: parse error
	var value, name string
	if _, after, ok := strings.Cut(msg, "value "); ok {
		if q, err := strconv.QuotedPrefix(after); err == nil {
			value, _ = strconv.Unquote(q)
			rest := strings.TrimPrefix(strings.TrimPrefix(after[len(q):], " for flag -"), " for -")
			name, _, _ = strings.Cut(rest, ":")
		}
	}
	if f := fs.Lookup(name); f != nil {
		return fmt.Sprintf("--%s=%s: %s", name, value, wantOf(f))
	}
	return msg
}

// wantOf says what a flag's value must look like.
func wantOf(f *flag.Flag) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return "not a valid value"
	}
	switch g.Get().(type) {
	case time.Duration:
		return "not a duration; want a number with a unit, such as 90s, 30m or 2h"
	case bool:
		return "want true or false"
	case int, int64:
		return "want a whole number"
	case uint, uint64:
		return "want a whole number, 0 or more"
	case float64:
		return "want a number"
	}
	return "not a valid value"
}

// nearestFlag is the flag of fs whose name is within two edits of name,
// the closest first; "" if none is.
func nearestFlag(fs *flag.FlagSet, name string) string {
	best, dist := "", 3
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	slices.Sort(names)
	for _, n := range names {
		if d := editDistance(name, n); d < dist {
			best, dist = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// setupError is one line for an error of a pipeline's preparation or
// construction, both the command line's doing. A
// PostgreSQL connection (--postgres) fails with an error per attempt (pgx
// tries TLS first, then without): the server's own answer, when one
// came, is the reason, with what to do about it.
func setupError(err error) string {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return oneLine(err)
	}
	at := net.JoinHostPort(ce.Config.Host, strconv.Itoa(int(ce.Config.Port)))
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch pg.Code {
		case "3D000": // invalid_catalog_name
			return fmt.Sprintf("--postgres: the server at %s has no database %q: create it (createdb %s), or name one that exists in the DSN", at, ce.Config.Database, ce.Config.Database)
		case "28P01", "28000": // invalid_password, invalid_authorization_specification
			return fmt.Sprintf("--postgres: the server at %s refused user %q: %s; check the user in the DSN and the password in PGPASSWORD", at, ce.Config.User, pg.Message)
		}
		return fmt.Sprintf("--postgres: the server at %s refused the connection: %s (SQLSTATE %s)", at, pg.Message, pg.Code)
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return fmt.Sprintf("--postgres: no PostgreSQL server answers at %s (%v)", at, op.Err)
	}
	return "--postgres: " + oneLine(err)
}
