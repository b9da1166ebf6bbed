package main

import (
	"testing"
	"time"
)

// The table's ratio is the median of the rounds' own ratios, not the ratio
// of the two median rates: on a machine whose speed swings between
// rounds those can come from different rounds.
func TestTableRatioIsTheMedianRound(t *testing.T) {
	rounds := func(rates ...float64) []result {
		rs := make([]result, len(rates))
		for i, r := range rates {
			rs[i].rate = r
		}
		return rs
	}
	for _, tc := range []struct {
		name       string
		base, sys  []result
		want       float64
		wantRounds string
	}{
		// The median rates, 6,750 and 6,400, would say 0.95×, near no round.
		{"odd", rounds(15000, 5000, 6750), rounds(6600, 6400, 4320), 0.64, "0.44 1.28 0.64"},
		{"even", rounds(10, 10, 10, 10), rounds(5, 10, 7, 9), 0.8, "0.50 1.00 0.70 0.90"},
		{"a round of nothing has no ratio", rounds(0, 10, 10), rounds(5, 6, 8), 0.7, "0.60 0.80"},
		{"no rounds", nil, nil, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := ratios(tc.base, tc.sys)
			if got := medianRatio(rs); got < tc.want-0.005 || got > tc.want+0.005 {
				t.Errorf("medianRatio = %.3f, want %.2f", got, tc.want)
			}
			if got := roundRatios(rs); got != tc.wantRounds {
				t.Errorf("roundRatios = %q, want %q", got, tc.wantRounds)
			}
		})
	}
}

func TestWaitKind(t *testing.T) {
	for _, tc := range []struct{ state, typ, wait, want string }{
		{"active", "", "", "executing"},
		{"active", "IO", "WALSync", "WAL write and flush"},
		{"active", "LWLock", "WALWrite", "WAL write and flush"},
		{"active", "IO", "WALInitWrite", "WAL write and flush"},
		{"active", "Client", "ClientRead", "receiving the batch"},
		{"active", "LWLock", "BufferContent", "locks"},
		{"active", "Lock", "transactionid", "locks"},
		{"active", "IO", "DataFileExtend", "other I/O"},
		{"active", "IPC", "SyncRep", "other"},
		{"idle", "Client", "ClientRead", "idle: agentd between batches"},
	} {
		if got := waitKind(tc.state, tc.typ, tc.wait); got != tc.want {
			t.Errorf("waitKind(%q, %q, %q) = %q, want %q", tc.state, tc.typ, tc.wait, got, tc.want)
		}
	}
}

// The CPU-bound figures: what a system's measured CPU per unit allows on
// the machine's CPUs, and what the scale phase's ideal rate costs.
func TestCPUBound(t *testing.T) {
	for _, tc := range []struct {
		cpu  time.Duration
		cpus int
		want float64
	}{
		{124 * time.Microsecond, 2, 16129}, // agentd and Postgres at C=32 on two cores
		{70 * time.Microsecond, 2, 28571},
		{time.Millisecond, 8, 8000},
		{0, 2, 0}, // nothing measured: no figure
	} {
		if got := cpuBound(tc.cpu, tc.cpus); got < tc.want-1 || got > tc.want+1 {
			t.Errorf("cpuBound(%s, %d) = %.0f, want %.0f", tc.cpu, tc.cpus, got, tc.want)
		}
	}
	// 10,000 chats at a reply a second, at 0.48 ms of agentd and its store
	// and 0.28 ms of the stand-in and followers a message.
	if got := cpusFor(10000, 760*time.Microsecond); got < 7.59 || got > 7.61 {
		t.Errorf("cpusFor(10000, 760µs) = %.2f, want 7.60", got)
	}
}
