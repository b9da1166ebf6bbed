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

// table prints one line per system and concurrency: pgbench, agentd on
// Postgres, agentd on SQLite.
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

// sqliteRow prints the median round of agentd on SQLite at C, its ratio to
// agentd on Postgres (pg) rather than to pgbench; rounds are the ratios of
// every round. The columns read from Postgres are empty.
func (t *table) sqliteRow(c int, sq, pg result, rounds string) {
	ratio := ""
	if pg.rate > 0 {
		ratio = fmt.Sprintf("%.2f× PG", sq.rate/pg.rate)
	}
	fmt.Fprintf(t.w, "%d\t%s\t%.0f\t%s\t%.2f\t%.2f\t%.3f\t\t\t\t\t%.0f\t%s\t\n",
		c, "agentd msg, SQLite", sq.rate, ratio, ms(sq.p50), ms(sq.p99), ms(sq.cpu), sq.units, rounds)
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

// roundRatios lists each round's rate of the second system over the first's
// (agentd's over pgbench's, SQLite's over Postgres's).
func roundRatios(base, rs []result) string {
	var parts []string
	for i := range base {
		if base[i].rate > 0 {
			parts = append(parts, fmt.Sprintf("%.2f", rs[i].rate/base[i].rate))
		}
	}
	return strings.Join(parts, " ")
}
