package pubsubadmin

import (
	"fmt"
	"strings"
)

// The kinds of a full name.
const (
	Subscriptions = "subscriptions"
	Topics        = "topics"
)

// CheckName returns an error unless name is a full name
// projects/PROJECT/<kind>/NAME of kind (Subscriptions, Topics), saying so
// when it names the other kind.
func CheckName(name, kind string) error {
	if _, _, ok := SplitName(name, kind); ok {
		return nil
	}
	other := map[string]string{Subscriptions: Topics, Topics: Subscriptions}[kind]
	hint := ""
	if _, _, ok := SplitName(name, other); ok {
		hint = " (that names a " + strings.TrimSuffix(other, "s") + ")"
	}
	singular := strings.TrimSuffix(kind, "s")
	return fmt.Errorf("%q is not a full %s name%s; want projects/PROJECT/%s/NAME", name, singular, hint, kind)
}

// SplitName splits a full name of kind into its project and short name.
func SplitName(name, kind string) (project, short string, ok bool) {
	rest, ok := strings.CutPrefix(name, "projects/")
	if !ok {
		return "", "", false
	}
	project, rest, ok = strings.Cut(rest, "/")
	if !ok || project == "" {
		return "", "", false
	}
	short, ok = strings.CutPrefix(rest, kind+"/")
	if !ok || short == "" || strings.Contains(short, "/") {
		return "", "", false
	}
	return project, short, true
}
