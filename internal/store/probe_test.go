package store

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentd/agentd/internal/chat"
)

func TestProbeReportsTheStoreDownAndBackUp(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	pinged := make(chan struct{}, 100)
	reg := prometheus.NewRegistry()
	p, err := NewProbe(ProbeConfig{
		Ping: func(context.Context) error {
			defer func() {
				select {
				case pinged <- struct{}{}:
				default: // nobody is counting now; never block the probe
				}
			}()
			if down.Load() {
				return errors.New("dial tcp 10.1.2.3:5432: connect: connection refused")
			}
			return nil
		},
		Interval: time.Millisecond, Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Err(); err == nil {
		t.Fatal("a probe that never pinged reports the store up")
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background())
	if err := p.Err(); err != nil || testutil.ToFloat64(p.up) != 1 {
		t.Fatalf("after a good first ping: err %v, agentd_store_up %v", err, testutil.ToFloat64(p.up))
	}
	// waitPings waits for three more pings: the second began after the
	// switch (the first may have begun before), and the third began after
	// the second's result was recorded (a ping signals as it returns).
	waitPings := func() {
		for range len(pinged) {
			<-pinged
		}
		for range 3 {
			<-pinged
		}
	}
	down.Store(true)
	waitPings()
	if err := p.Err(); !errors.Is(err, chat.ErrUnavailable) || testutil.ToFloat64(p.up) != 0 {
		t.Fatalf("store down: err %v, agentd_store_up %v", err, testutil.ToFloat64(p.up))
	}
	down.Store(false)
	waitPings()
	if err := p.Err(); err != nil || testutil.ToFloat64(p.up) != 1 {
		t.Fatalf("store back: err %v, agentd_store_up %v", err, testutil.ToFloat64(p.up))
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}
