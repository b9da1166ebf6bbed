package engine

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
)

// Diff says, field by field, how s differs from other; nil when they are
// the same. It is the check behind the fold's promise that a state rebuilt
// from the stored log is the state the live worker holds: the property
// tests of the engine and of the runtime make it after every append. The
// spec is shared, not compared; the termination tree is compared by what
// each node holds, and the inner runs of team agents as states of their own.
func (s *State) Diff(other *State) []string {
	a, b := *s, *other
	if ta, tb := termSummary(&a.term), termSummary(&b.term); !reflect.DeepEqual(ta, tb) {
		return []string{fmt.Sprintf("termination tree:\n live    %v\n rebuilt %v", ta, tb)}
	}
	if fmt.Sprint(a.Broken) != fmt.Sprint(b.Broken) {
		return []string{fmt.Sprintf("broken: live %v, rebuilt %v", a.Broken, b.Broken)}
	}
	if len(a.inners) != len(b.inners) {
		return []string{fmt.Sprintf("inner runs: live %v, rebuilt %v", slices.Sorted(maps.Keys(a.inners)), slices.Sorted(maps.Keys(b.inners)))}
	}
	for k, in := range a.inners {
		o, ok := b.inners[k]
		if !ok {
			return []string{"the rebuilt state has no inner run of " + k}
		}
		if d := in.st.Diff(o.st); d != nil {
			return append([]string{"inner run of " + k + ":"}, d...)
		}
	}
	a.inners, b.inners = nil, nil
	// Compiled expressions are made from the spec, which is not compared.
	a.exprs, b.exprs = nil, nil
	a.Spec, b.Spec, a.term, b.term, a.Broken, b.Broken = nil, nil, terminator{}, terminator{}, nil, nil
	if reflect.DeepEqual(a, b) {
		return nil
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var diffs []string
	for i := range va.NumField() {
		fa, fb := fmt.Sprintf("%+v", va.Field(i)), fmt.Sprintf("%+v", vb.Field(i))
		if fa != fb {
			diffs = append(diffs, fmt.Sprintf("%s:\n live    %s\n rebuilt %s", va.Type().Field(i).Name, fa, fb))
		}
	}
	return diffs
}

// termSummary is what each node of a termination tree holds, in order.
func termSummary(t *terminator) []string {
	out := []string{fmt.Sprint("clock ", t.clock)}
	var walk func(n *termNode)
	walk = func(n *termNode) {
		if n == nil {
			return
		}
		out = append(out, fmt.Sprintf("%v %s %q %d", n.fired, n.reason, n.detail, n.order))
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(t.root)
	return out
}
