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
type table struct {
	w    *tabwriter.Writer
	cpus int // the machine's, for the CPU-bound rate
}

func newTable(out io.Writer, cpus int) *table {
	t := &table{w: tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight), cpus: cpus}
	fmt.Fprintln(t.w, "C\tsystem\trate/s\tratio\tp50 ms\tp99 ms\tCPU ms/unit\tof which PG\tat all CPUs/s\tstmts/unit\tcommits/unit\tWAL B/unit\tunits\tratio of each round\t")
	return t
}

// cpuBound is the rate at which a system whose units cost cpu each would
// keep cpus CPUs busy: the most it could do on this machine were nothing
// else running and no unit ever waiting. A rate well below it is bound by
// latency (a turn waiting for its commit); one near it, by the CPUs. Zero
// when no CPU was measured.
func cpuBound(cpu time.Duration, cpus int) float64 {
	if cpu <= 0 {
		return 0
	}
	return float64(cpus) * float64(time.Second) / float64(cpu)
}

// row prints the median rounds of both systems at C, and the median of
// the rounds' ratios; rounds are the ratios of every round, in order.
func (t *table) row(c int, pb, ag result, ratio float64, rounds string) {
	line := func(name string, r result, ratio, rounds string) {
		fmt.Fprintf(t.w, "%d\t%s\t%.0f\t%s\t%.2f\t%.2f\t%.3f\t%.3f\t%.0f\t%.2f\t%.3f\t%.0f\t%.0f\t%s\t\n",
			c, name, r.rate, ratio, ms(r.p50), ms(r.p99), ms(r.cpu), ms(r.cpuPG), cpuBound(r.cpu, t.cpus), r.statements, r.commits, r.wal, r.units, rounds)
	}
	line("pgbench row", pb, "", "")
	line("agentd msg", ag, fmt.Sprintf("%.2f×", ratio), rounds)
}

// sqliteRow prints the median round of agentd on SQLite at C and the
// median of its rounds' ratios to agentd on Postgres rather than to
// pgbench; rounds are the ratios of every round. The columns read from
// Postgres are empty.
func (t *table) sqliteRow(c int, sq result, ratio float64, rounds string) {
	fmt.Fprintf(t.w, "%d\t%s\t%.0f\t%.2f× PG\t%.2f\t%.2f\t%.3f\t\t%.0f\t\t\t\t%.0f\t%s\t\n",
		c, "agentd msg, SQLite", sq.rate, ratio, ms(sq.p50), ms(sq.p99), ms(sq.cpu), cpuBound(sq.cpu, t.cpus), sq.units, rounds)
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

// ratios are each round's rate of the second system over the first's
// (agentd's over pgbench's, SQLite's over Postgres's), in order; a round
// whose first system did nothing has none.
func ratios(base, rs []result) []float64 {
	var out []float64
	for i := range base {
		if base[i].rate > 0 {
			out = append(out, rs[i].rate/base[i].rate)
		}
	}
	return out
}

// medianRatio is the median of the rounds' ratios (the mean of the middle
// two of an even number), the table's ratio. A round runs the systems back
// to back, so a stretch in which a shared machine runs slower slows both
// and leaves their ratio: the rounds' ratios vary far less than the
// rates, and the ratio of the two median rates, which may come from
// different rounds, can be far from any round's (0.97× from rounds of
// 0.44×, 1.28× and 0.64×).
func medianRatio(rs []float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	s := slices.Clone(rs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 0 {
		return (s[m-1] + s[m]) / 2
	}
	return s[m]
}

// roundRatios lists the rounds' ratios for the table's last column.
func roundRatios(rs []float64) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.2f", r)
	}
	return strings.Join(parts, " ")
}
