// Package rowspec is how a pipeline says which columns of its rows play
// which role, once, for every transform of beamdedup: the key (PARTITION
// BY), the kind (+I, -U, +U, -D), the event time (OnTime) and the ordering
// column (SequenceBy), and whether the rows are upserts. dedup, changelog
// and pgsink all take the same role options, and read and order rows by
// them the same way, so that a sink keys and orders rows as the
// deduplication that fed it did:
//
//	res := dedup.KeepLast(s, events,
//	    rowspec.PartitionBy("order_id"), // the key
//	    rowspec.OnTime("ts"),            // the order: the latest row is the last
//	    rowspec.KindColumn("op"))        // +I, -U, +U, -D written there
//	pgsink.Write(s, res.Rows, res.Spec,  // the same roles, as KeepLast had them
//	    pgsink.DSN(dsn), pgsink.Table("order_status"), pgsink.Tombstone("deleted"))
//
// The roles are options of every transform (Option); a Spec states them
// all at once and is an Option too. It has no Beam imports.
package rowspec

// Spec names the columns of a row type by role. A column's name is its
// `beam:"name"` tag, else the field name. An empty field is a role the
// rows do not have. A Spec is an Option of every transform: it sets the
// roles it names (an empty one sets nothing), as the role options do; a
// transform's Result hands on its output's Spec.
type Spec struct {
	// Key are the key columns (PartitionBy): rows with equal values in
	// all of them are one key (NULLs equal each other). None: one global
	// key.
	Key []string
	// Kind is the column holding each row's kind (KindColumn): a string
	// ("+I", "-U", "+U", "-D"; "" reads as +I) or a rowkind.Kind.
	Kind string
	// OnTime is the event-time column (OnTime): a time.Time or int64 Unix
	// milliseconds (or a pointer to one). Rows compare by its value to
	// the microsecond (a time.Time) or the millisecond (an int64).
	OnTime string
	// SequenceBy is the ordering column (SequenceBy): a signed or
	// unsigned integer, a float, a time.Time (compared to the
	// microsecond) or a string (or a pointer to one).
	SequenceBy string
	// Upsert says that each row replaces its key's row, with no -U rows
	// (Upsert; dedup.KeepLast's upsert output): a sink upserts it.
	// Without Kind and Upsert the rows are insert-only: a key's first row
	// stands.
	Upsert bool
}
