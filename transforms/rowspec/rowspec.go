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

// Spec names the columns of a row type by role (a column's name is its
// `beam:"name"` tag, else the field name); an empty field is a role the
// rows do not have. A Spec is an Option that sets the roles it names; a
// transform's Result hands on its output's Spec. Without Kind and Upsert
// the rows are insert-only.
type Spec struct {
	Key        []string // the key columns (PartitionBy); none: one global key
	Kind       string   // the kind column (KindColumn)
	OnTime     string   // the event-time column (OnTime)
	SequenceBy string   // the ordering column (SequenceBy)
	Upsert     bool     // each row replaces its key's row (Upsert)
}
