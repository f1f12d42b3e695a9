package node

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// stop refuses new rounds and waits for the one in flight (Raft must still
// run to answer it: hashicorp/raft drops a VerifyLeader request still queued
// at shutdown, and a wait on it never ends).
func TestVerifierStopWaitsForTheRoundInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		rounds := 0
		var wg sync.WaitGroup
		v := &verifier{verify: func() error { rounds++; <-release; return nil }, wg: &wg}
		ctx := context.Background()

		first := make(chan error, 1)
		go func() { first <- v.confirm(ctx) }()
		synctest.Wait() // round 1 in flight
		second := make(chan error, 1)
		go func() { second <- v.confirm(ctx) }()
		synctest.Wait() // waits for round 2

		stopped := make(chan struct{})
		go func() { v.stop(); close(stopped) }()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("stop returned while a round was in flight")
		default:
		}
		if err := v.confirm(ctx); !errors.Is(err, ErrClosed) {
			t.Fatalf("confirm after stop: %v, want ErrClosed", err)
		}
		close(release)
		<-stopped
		if err := <-first; err != nil {
			t.Fatalf("the round in flight: %v", err)
		}
		if err := <-second; !errors.Is(err, ErrClosed) {
			t.Fatalf("a caller waiting for the next round: %v, want ErrClosed", err)
		}
		wg.Wait()
		if rounds != 1 {
			t.Fatalf("%d rounds ran, want 1 (none after stop)", rounds)
		}
	})
}

// Callers that may wait share a round that starts at the earliest of their
// bounds; a caller that may not wait starts it at once; a caller that
// arrives while a round is in flight is served only by a later round, which
// again waits for its bound. Every caller is served by a round that started
// after it arrived (the keepalive guarantee).
func TestVerifierWaitsForItsCallersBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			started []time.Time
			release = make(chan struct{}, 16)
		)
		v := &verifier{wg: &wg, verify: func() error {
			mu.Lock()
			started = append(started, time.Now())
			mu.Unlock()
			<-release
			return nil
		}}
		ctx := context.Background()
		t0 := time.Now()
		served := make(chan time.Time, 8) // each caller's arrival, once served
		call := func(wait time.Duration) {
			arrived := time.Now()
			wg.Go(func() {
				if err := v.confirmWithin(ctx, wait); err != nil {
					t.Errorf("confirm: %v", err)
				}
				served <- arrived
			})
		}
		call(100 * time.Millisecond)
		time.Sleep(30 * time.Millisecond)
		call(50 * time.Millisecond) // bound t0+80ms, earlier than the first's
		time.Sleep(49 * time.Millisecond)
		synctest.Wait()
		if n := v.rounds.Load(); n != 0 {
			t.Fatalf("%d rounds started before the earliest bound", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := v.rounds.Load(); n != 1 {
			t.Fatalf("%d rounds started at the earliest bound, want 1", n)
		}
		time.Sleep(time.Millisecond)
		call(time.Second) // arrives during round 1: waits for round 2
		synctest.Wait()
		release <- struct{}{}
		<-served
		<-served
		synctest.Wait()
		if n := v.rounds.Load(); n != 1 {
			t.Fatalf("round 2 started at once (%d rounds), though its caller may wait a second", n)
		}
		time.Sleep(200 * time.Millisecond)
		call(0) // may not wait: starts round 2 now, for both
		synctest.Wait()
		if n := v.rounds.Load(); n != 2 {
			t.Fatalf("%d rounds after a caller that may not wait, want 2", n)
		}
		release <- struct{}{}
		a, b := <-served, <-served
		mu.Lock()
		defer mu.Unlock()
		if started[0] != t0.Add(80*time.Millisecond) || started[1] != t0.Add(281*time.Millisecond) {
			t.Fatalf("rounds started at %v, %v after t0; want 80ms, 281ms", started[0].Sub(t0), started[1].Sub(t0))
		}
		for _, arrived := range []time.Time{a, b} {
			if arrived.After(started[1]) {
				t.Fatalf("a caller that arrived at %v was served by a round that started at %v", arrived.Sub(t0), started[1].Sub(t0))
			}
			if !arrived.After(started[0]) {
				t.Fatalf("round 2's caller arrived at %v, before round 1 started: should have joined it", arrived.Sub(t0))
			}
		}
		v.stop()
		wg.Wait()
	})
}

// stop while the next round waits for its bound: its callers get ErrClosed
// and no round starts.
func TestVerifierStopWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var wg sync.WaitGroup
		v := &verifier{wg: &wg, verify: func() error { t.Error("a round ran"); return nil }}
		got := make(chan error, 1)
		go func() { got <- v.confirmWithin(context.Background(), time.Second) }()
		synctest.Wait()
		v.stop()
		if err := <-got; !errors.Is(err, ErrClosed) {
			t.Fatalf("a waiting caller at stop: %v, want ErrClosed", err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		wg.Wait()
		if n := v.rounds.Load(); n != 0 {
			t.Fatalf("%d rounds after stop", n)
		}
	})
}
