package rowspec_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/transforms/internal/option"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// cfg and other stand for two transforms' configs.
type (
	cfg   struct{ uid string }
	other struct{}
)

func uid(id string) rowspec.Option {
	return option.Own("x.UID", func(c *cfg) { c.uid = id }).(rowspec.Option)
}

func apply(opts ...rowspec.Option) (rowspec.Spec, cfg, []error) {
	var spec rowspec.Spec
	var c cfg
	errs := option.Apply("x.Transform", opts, &spec, &c)
	return spec, c, errs
}

func TestRolesApplyInOrderAndASpecSetsOnlyTheRolesItNames(t *testing.T) {
	spec, c, errs := apply(
		rowspec.PartitionBy("a"), rowspec.OnTime("ts"), uid("u"),
		rowspec.Spec{Key: []string{"id"}, Kind: "op"}, // the key replaced, the kind set, OnTime kept
		rowspec.SequenceBy("seq"), rowspec.Upsert())
	assert.Empty(t, errs)
	assert.Equal(t, rowspec.Spec{Key: []string{"id"}, Kind: "op", OnTime: "ts", SequenceBy: "seq", Upsert: true}, spec)
	assert.Equal(t, cfg{uid: "u"}, c)

	spec, _, _ = apply(rowspec.KindColumn("op"), rowspec.KindColumn("kind"))
	assert.Equal(t, rowspec.Spec{Kind: "kind"}, spec, "a later role replaces an earlier one")
}

func TestEveryMistakeIsReportedByTheOptionItIsIn(t *testing.T) {
	_, _, errs := apply(rowspec.PartitionBy(), rowspec.OnTime(""), nil, rowspec.KindColumn(""),
		option.Own("y.Table", func(*other) {}).(rowspec.Option))
	var msgs []string
	for _, err := range errs {
		msgs = append(msgs, err.Error())
	}
	assert.Equal(t, []string{
		"PartitionBy() needs at least one column; omit it for no key",
		`OnTime(""): the column name is empty`,
		"option 3 of 5 is nil",
		`KindColumn(""): the column name is empty`,
		"y.Table is not an option of x.Transform",
	}, msgs)
}
