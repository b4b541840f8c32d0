package pgwrite

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Fault classes.
const (
	rowFault       = iota // the table refuses a row: dead-letter it, write the rest
	transientFault        // a lost connection or a transient server state: retry the batch
	fatalFault            // anything else: fail the bundle
)

// fault is a classified error.
type fault struct {
	class int
	err   error
}

func (f *fault) Error() string { return f.err.Error() }
func (f *fault) Unwrap() error { return f.err }

func (f *fault) orNil() error {
	if f == nil {
		return nil
	}
	return f
}

// classify sorts err (nil stays nil). conn is the connection it happened
// on, nil when none was acquired.
func classify(ctx context.Context, err error, conn *pgx.Conn) *fault {
	if err == nil {
		return nil
	}
	var f *fault
	if errors.As(err, &f) {
		return f
	}
	class := fatalFault
	var pe *pgconn.PgError
	switch {
	case ctx.Err() != nil:
	case errors.As(err, &pe):
		class = sqlStateClass(pe.Code)
	case conn == nil || conn.IsClosed() || isNetwork(err):
		class = transientFault
	default:
		// pgx could not encode a value (an unsigned integer out of range,
		// say): the row's fault, found by halves like the server's.
		class = rowFault
	}
	return &fault{class: class, err: err}
}

func isNetwork(err error) bool {
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.As(err, &ne) || errors.As(err, &ce) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err)
}

// sqlStateClass sorts a server error by its SQLSTATE.
func sqlStateClass(code string) int {
	switch {
	case strings.HasPrefix(code, "22"), // data exception: a value the column cannot take
		strings.HasPrefix(code, "23"), // integrity constraint violation
		code == "21000",               // one statement hits a key twice (keys equal in the table only)
		code == "P0001":               // raised by a trigger
		return rowFault
	case strings.HasPrefix(code, "08"), // connection exception
		code == "57P01", code == "57P02", code == "57P03", // shutdown, crash, cannot connect now
		code == "40001", code == "40P01", // serialization failure, deadlock
		code == "55P03",               // lock not available
		strings.HasPrefix(code, "53"): // insufficient resources
		return transientFault
	}
	return fatalFault
}

// dbMessage is the database's message for a refused row.
func dbMessage(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		msg := pe.Message + " (SQLSTATE " + pe.Code + ")"
		if pe.Detail != "" {
			msg += ": " + pe.Detail
		}
		return msg
	}
	return err.Error()
}
