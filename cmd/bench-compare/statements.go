package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// statementTop is where a phase's statements went: the most frequent ones,
// in calls per message, to see which of them a change removed.
type statementTop struct {
	c     int
	lines []statementShare
}

type statementShare struct {
	query   string
	perUnit float64
	// execMS is the mean execution time of one call (planning excluded).
	execMS float64
}

// statementCalls is one statement's counters in pg_stat_statements.
type statementCalls struct {
	calls, execMS float64
}

// callsByStatement reads pg_stat_statements' calls and execution time per
// normalised statement of one database.
func (pg *pgServer) callsByStatement(ctx context.Context, db string) (map[string]statementCalls, error) {
	rows, err := pg.query(ctx, "postgres", fmt.Sprintf(`SELECT regexp_replace(s.query, '\s+', ' ', 'g'), sum(s.calls), sum(s.total_exec_time)
		FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = '%s' GROUP BY 1`, db))
	if err != nil {
		return nil, err
	}
	calls := make(map[string]statementCalls, len(rows))
	for _, r := range rows {
		if len(r) != 3 {
			continue
		}
		n, err := strconv.ParseFloat(r[1], 64)
		if err != nil {
			return nil, fmt.Errorf("statement calls %q: %w", r[1], err)
		}
		ms, err := strconv.ParseFloat(r[2], 64)
		if err != nil {
			return nil, fmt.Errorf("statement time %q: %w", r[2], err)
		}
		c := calls[r[0]]
		c.calls += n
		c.execMS += ms
		calls[r[0]] = c
	}
	return calls, nil
}

// topStatements keeps the n statements called most between two readings.
func topStatements(c int, before, after map[string]statementCalls, units float64, n int) *statementTop {
	top := &statementTop{c: c}
	if units == 0 {
		return top
	}
	for q, a := range after {
		if d := a.calls - before[q].calls; d > 0 {
			top.lines = append(top.lines, statementShare{query: q, perUnit: d / units, execMS: (a.execMS - before[q].execMS) / d})
		}
	}
	sort.Slice(top.lines, func(i, j int) bool { return top.lines[i].perUnit > top.lines[j].perUnit })
	if len(top.lines) > n {
		top.lines = top.lines[:n]
	}
	return top
}

func (t statementTop) print(w io.Writer) {
	fmt.Fprintf(w, "\nagentd's statements at C=%d: calls per message, mean execution ms\n", t.c)
	for _, l := range t.lines {
		q := l.query
		if len(q) > 110 {
			q = q[:110] + "…"
		}
		fmt.Fprintf(w, "  %6.3f  %7.3f  %s\n", l.perUnit, l.execMS, strings.TrimSpace(q))
	}
}
