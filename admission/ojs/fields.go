package ojs

import (
	"reflect"
	"strings"
)

// known is the set of top-level JSON names Job reads itself.
var known = func() map[string]bool {
	m := map[string]bool{internalKey: true}
	t := reflect.TypeOf(jobAlias{})
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			m[name] = true
		}
	}
	return m
}()

func knownField(name string) bool { return known[name] }
