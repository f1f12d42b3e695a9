package node

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
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
