package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// table prints one line per system and concurrency, pgbench first.
type table struct{ w *tabwriter.Writer }

func newTable(out io.Writer) *table {
	t := &table{w: tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)}
	fmt.Fprintln(t.w, "C\tsystem\trate/s\tratio\tp50 ms\tp99 ms\tCPU ms/unit\tof which PG\tstmts/unit\tcommits/unit\tWAL B/unit\tunits\tratio of each round\t")
	return t
}

// row prints the median rounds of both systems at C; rounds are the
// ratios of every round, in order.
func (t *table) row(c int, pb, ag result, rounds string) {
	ratio := 0.0
	if pb.rate > 0 {
		ratio = ag.rate / pb.rate
	}
	line := func(name string, r result, ratio, rounds string) {
		fmt.Fprintf(t.w, "%d\t%s\t%.0f\t%s\t%.2f\t%.2f\t%.3f\t%.3f\t%.2f\t%.3f\t%.0f\t%.0f\t%s\t\n",
			c, name, r.rate, ratio, ms(r.p50), ms(r.p99), ms(r.cpu), ms(r.cpuPG), r.statements, r.commits, r.wal, r.units, rounds)
	}
	line("pgbench row", pb, "", "")
	line("agentd msg", ag, fmt.Sprintf("%.2f×", ratio), rounds)
}

func (t *table) flush() { t.w.Flush() }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// medianResult is the round of median rate (the lower middle of an even
// number).
func medianResult(rs []result) result {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b result) int { return cmp.Compare(a.rate, b.rate) })
	return s[(len(s)-1)/2]
}

// roundRatios lists agentd's rate over pgbench's of each round.
func roundRatios(pbs, ars []result) string {
	var parts []string
	for i := range pbs {
		if pbs[i].rate > 0 {
			parts = append(parts, fmt.Sprintf("%.2f", ars[i].rate/pbs[i].rate))
		}
	}
	return strings.Join(parts, " ")
}
