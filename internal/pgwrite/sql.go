package pgwrite

import (
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// plan is a layout checked against its table, with the SQL that writes a
// batch. Each statement takes one array per column and unnest()s them, so
// a batch of any size is one statement with a fixed text, prepared once
// per connection (docs/pgsink.md).
type plan struct {
	*layout
	table      *tableInfo
	tombstone  string
	insertOnly bool
	guarded    bool
	// upsert writes every live row (and every tombstone): INSERT ... ON
	// CONFLICT DO NOTHING, or DO UPDATE with the guard. With a tombstone it
	// is a query returning (rows written, tombstones written).
	upsert       string
	upsertCounts bool
	// insert is the plain INSERT an insert-only batch tries first (about
	// twice as fast); a key already in the table fails it, and the batch
	// is written again with upsert.
	insert  string
	mu      sync.Mutex
	deletes map[uint64]string // hard deletes per NULL pattern of the key
}

func quote(name string) string { return pgx.Identifier{name}.Sanitize() }

func newPlan(l *layout, ti *tableInfo, c *Config) *plan {
	p := &plan{layout: l, table: ti, tombstone: c.Tombstone, insertOnly: c.insertOnly(), guarded: c.ordered(), deletes: map[uint64]string{}}
	p.upsert, p.upsertCounts = p.upsertSQL()
	return p
}

func (p *plan) arrayType(col string) string { return p.table.cols[col].typ + "[]" }

func (p *plan) upsertSQL() (string, bool) {
	var cols, casts []string
	for i, c := range p.cols {
		cols = append(cols, quote(c.name))
		casts = append(casts, fmt.Sprintf("$%d::%s", i+1, p.arrayType(c.name)))
	}
	if p.tombstone != "" {
		cols = append(cols, quote(p.tombstone))
		casts = append(casts, fmt.Sprintf("$%d::boolean[]", len(p.cols)+1))
	}
	keys := make([]string, len(p.keys))
	isKey := map[string]bool{}
	for i, k := range p.keys {
		keys[i] = quote(p.cols[k].name)
		isKey[p.cols[k].name] = true
	}
	p.insert = fmt.Sprintf("INSERT INTO %s AS t (%s) SELECT * FROM unnest(%s)", p.table.name, strings.Join(cols, ", "), strings.Join(casts, ", "))
	insert := fmt.Sprintf("%s ON CONFLICT (%s)", p.insert, strings.Join(keys, ", "))
	var set, old, cur []string
	for _, c := range p.cols {
		if isKey[c.name] {
			continue
		}
		set = append(set, fmt.Sprintf("%s = EXCLUDED.%[1]s", quote(c.name)))
		old = append(old, p.comparable("t.", c.name))
		cur = append(cur, p.comparable("EXCLUDED.", c.name))
	}
	if p.tombstone != "" {
		q := quote(p.tombstone)
		set = append(set, fmt.Sprintf("%s = EXCLUDED.%[1]s", q))
		old, cur = append(old, "t."+q), append(cur, "EXCLUDED."+q)
	}
	if p.insertOnly || len(set) == 0 {
		return insert + " DO NOTHING", false
	}
	// A row equal to the stored one is not rewritten: a retried batch
	// leaves the table (and its rows' versions) as they are.
	where := fmt.Sprintf("ROW(%s) IS DISTINCT FROM ROW(%s)", strings.Join(old, ", "), strings.Join(cur, ", "))
	if p.guarded {
		where = p.guard() + " AND " + where
	}
	stmt := insert + " DO UPDATE SET " + strings.Join(set, ", ") + " WHERE " + where
	if p.tombstone == "" {
		return stmt, false
	}
	d := "coalesce(d, false)"
	return fmt.Sprintf("WITH w AS (%s RETURNING t.%s AS d) SELECT count(*) FILTER (WHERE NOT %s), count(*) FILTER (WHERE %[3]s) FROM w",
		stmt, quote(p.tombstone), d), true
}

// comparable is a column as IS DISTINCT FROM can compare it: as text for
// types without an equality operator (json, xml, point).
func (p *plan) comparable(prefix, col string) string {
	e := prefix + quote(col)
	if !p.table.cols[col].hasEq {
		e += "::text"
	}
	return e
}

// guard is the condition under which an incoming row replaces the stored
// one, rowcol.Later in SQL: the stored row's order is at most the
// incoming one's, comparing the SequenceBy value, then the OnTime value,
// then the tombstone flag (false before true: a -D ranks after a live row
// of its value, since it carries the value of the row it deletes), a tie
// going to the incoming row, the later arrival.
func (p *plan) guard() string {
	ord := func(prefix string) string {
		parts := make([]string, len(p.order))
		for i, name := range p.order {
			parts[i] = prefix + quote(name)
			if p.table.cols[name].category == 'S' {
				parts[i] += ` COLLATE "C"` // byte order, as the comparator compares strings
			}
		}
		if p.tombstone != "" {
			parts = append(parts, "coalesce("+prefix+quote(p.tombstone)+", false)")
		}
		if len(parts) == 1 {
			return parts[0]
		}
		return "ROW(" + strings.Join(parts, ", ") + ")"
	}
	return ord("t.") + " <= " + ord("EXCLUDED.")
}

// deleteSQL deletes the keys of a batch whose NULL key columns are the
// bits of mask (bit i: the i-th key column is NULL). Grouping by pattern
// keeps every condition an indexable = or IS NULL.
func (p *plan) deleteSQL(mask uint64) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.deletes[mask]; ok {
		return s
	}
	var casts, vcols, conds []string
	for i, k := range p.keys {
		q := quote(p.cols[k].name)
		if mask&(1<<i) != 0 {
			conds = append(conds, "t."+q+" IS NULL")
			continue
		}
		casts = append(casts, fmt.Sprintf("$%d::%s", len(casts)+1, p.arrayType(p.cols[k].name)))
		vcols = append(vcols, q)
		conds = append(conds, "t."+q+" = v."+q)
	}
	s := "DELETE FROM " + p.table.name + " AS t"
	if len(casts) > 0 {
		s += fmt.Sprintf(" USING unnest(%s) AS v(%s)", strings.Join(casts, ", "), strings.Join(vcols, ", "))
	}
	s += " WHERE " + strings.Join(conds, " AND ")
	p.deletes[mask] = s
	return s
}
