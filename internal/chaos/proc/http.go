package proc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	_ "modernc.org/sqlite"
)

// ---- HTTP ----

type status struct {
	ID           string `json:"id"`
	State        string `json:"state"`
	LeaderID     string `json:"leader_id"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	Ready        bool   `json:"ready"`
	FSM          struct {
		LastToken uint64 `json:"last_token"`
	} `json:"fsm"`
}

type errorBody struct {
	Error  string `json:"error"`
	Detail string `json:"detail"`
}

// call makes one bounded HTTP request; it returns the status code (0 when
// no answer arrived) and decodes a 2xx body into out or an error body.
func (x *Harness) call(ctx context.Context, i int, method, path string, in, out any, timeout time.Duration) (int, errorBody, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+x.reps[i].httpAddr()+path, body)
	if err != nil {
		return 0, errorBody{}, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := x.hc.Do(req)
	if err != nil {
		return 0, errorBody{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var eb errorBody
	if resp.StatusCode/100 == 2 {
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				return resp.StatusCode, eb, fmt.Errorf("decode %s: %w", path, err)
			}
		}
		return resp.StatusCode, eb, nil
	}
	json.Unmarshal(b, &eb)
	return resp.StatusCode, eb, nil
}

func (x *Harness) status(ctx context.Context, i int) (status, error) {
	var st status
	code, eb, err := x.call(ctx, i, "GET", "/v1/status", nil, &st, 2*time.Second)
	if err == nil && code != 200 {
		err = fmt.Errorf("status %d: %s", code, eb.Error)
	}
	return st, err
}

// waitReady waits until every running replica is ready and they agree on
// a leader.
func (x *Harness) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		leaders := map[string]bool{}
		ok := true
		for i, r := range x.reps {
			if r.exited() {
				return fmt.Errorf("%s exited; see %s", r.id, r.logPath)
			}
			st, err := x.status(ctx, i)
			if err != nil || !st.Ready || st.LeaderID == "" {
				ok = false
				last = fmt.Sprintf("%s: %+v %v", r.id, st, err)
				break
			}
			leaders[st.LeaderID] = true
		}
		if ok && len(leaders) == 1 {
			return nil
		}
		if ok {
			last = fmt.Sprintf("leaders %v", leaders)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("replicas not ready within %v: %s", timeout, last)
}
