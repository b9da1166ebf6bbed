package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// table prints one line per system and concurrency, pgbench first.
type table struct{ w *tabwriter.Writer }

func newTable(out io.Writer) *table {
	t := &table{w: tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)}
	fmt.Fprintln(t.w, "C\tsystem\trate/s\tratio\tp50 ms\tp99 ms\tCPU ms/unit\tof which PG\tstmts/unit\tcommits/unit\tWAL B/unit\tunits\t")
	return t
}

func (t *table) row(c int, pb, ag result) {
	ratio := 0.0
	if pb.rate > 0 {
		ratio = ag.rate / pb.rate
	}
	line := func(name string, r result, ratio string) {
		fmt.Fprintf(t.w, "%d\t%s\t%.0f\t%s\t%.2f\t%.2f\t%.3f\t%.3f\t%.2f\t%.3f\t%.0f\t%.0f\t\n",
			c, name, r.rate, ratio, ms(r.p50), ms(r.p99), ms(r.cpu), ms(r.cpuPG), r.statements, r.commits, r.wal, r.units)
	}
	line("pgbench row", pb, "")
	line("agentd msg", ag, fmt.Sprintf("%.2f×", ratio))
}

func (t *table) flush() { t.w.Flush() }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
