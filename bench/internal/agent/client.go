package agent

import (
	"context"
	"fmt"
	"net/rpc"
)

// Client is the parent's connection to one replica process.
type Client struct {
	c *rpc.Client
}

// Dial connects to the agent at addr (a loopback address).
func Dial(addr string) (*Client, error) {
	c, err := rpc.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Client{c: c}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.c.Close() }

// call makes one call, giving up when ctx ends (the process is killed at the
// end of the benchmark anyway).
func (c *Client) call(ctx context.Context, method string, args, reply any) error {
	call := c.c.Go("Agent."+method, args, reply, make(chan *rpc.Call, 1))
	select {
	case <-call.Done:
		if call.Error != nil {
			return fmt.Errorf("%s: %w", method, call.Error)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// Wait waits for the replica to start and returns its status.
func (c *Client) Wait(ctx context.Context, args WaitArgs) (StatusReply, error) {
	var r StatusReply
	return r, c.call(ctx, "Wait", args, &r)
}

// Status returns the replica's view of the cluster.
func (c *Client) Status(ctx context.Context) (StatusReply, error) {
	var r StatusReply
	return r, c.call(ctx, "Status", Empty{}, &r)
}

// OpenSessions replaces the replica process's session pool.
func (c *Client) OpenSessions(ctx context.Context, args OpenArgs) error {
	return c.call(ctx, "OpenSessions", args, &Empty{})
}

// CloseSessions closes the session pool.
func (c *Client) CloseSessions(ctx context.Context, args CloseArgs) error {
	return c.call(ctx, "CloseSessions", args, &Empty{})
}

// Loop runs Lock+Unlock workers in the replica process.
func (c *Client) Loop(ctx context.Context, args LoopArgs) (LoopReply, error) {
	var r LoopReply
	return r, c.call(ctx, "Loop", args, &r)
}

// Hold makes the pool sessions acquire and keep locks.
func (c *Client) Hold(ctx context.Context, args HoldArgs) (HoldReply, error) {
	var r HoldReply
	return r, c.call(ctx, "Hold", args, &r)
}

// Mem runs a GC in the replica process and reports its heap.
func (c *Client) Mem(ctx context.Context) (MemReply, error) {
	var r MemReply
	return r, c.call(ctx, "Mem", Empty{}, &r)
}

// Profile asks the replica process for a CPU profile of a window (only
// with EnvCPUProfile set).
func (c *Client) Profile(ctx context.Context, args ProfileArgs) error {
	return c.call(ctx, "Profile", args, &Empty{})
}

// Snapshot makes the replica take a snapshot of its state.
func (c *Client) Snapshot(ctx context.Context, args SnapshotArgs) (SnapshotReply, error) {
	var r SnapshotReply
	return r, c.call(ctx, "Snapshot", args, &r)
}

// StartAwait starts blocked Lock calls in the replica process.
func (c *Client) StartAwait(ctx context.Context, args AwaitArgs) error {
	return c.call(ctx, "StartAwait", args, &Empty{})
}

// AwaitResult waits for the calls StartAwait started.
func (c *Client) AwaitResult(ctx context.Context, args AwaitArgs) (AwaitReply, error) {
	var r AwaitReply
	return r, c.call(ctx, "AwaitResult", args, &r)
}

// Lost counts the lost pool sessions.
func (c *Client) Lost(ctx context.Context) (LostReply, error) {
	var r LostReply
	return r, c.call(ctx, "Lost", Empty{}, &r)
}
