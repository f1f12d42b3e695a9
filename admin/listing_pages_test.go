package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
)

// Every listing pages with a cursor: /v1/locks and /v1/sessions with
// ?after= and "next", one lock's waiters and shared grants with ?after=
// and ?shared_after= ("waiters_next", "shared_next"); a bad cursor is 400.
func TestListingsPage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, api := startAPI(t)
		n := c.Nodes[0]
		ctx := context.Background()
		apply := func(cmd fsm.Command) fsm.Result {
			r, err := replica.Of(n).Apply(ctx, cmd)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		var sess []lockinfo.SessionID
		for i := range 7 {
			sess = append(sess, apply(fsm.OpenSession{TTL: time.Hour, Description: "s" + strconv.Itoa(i)}).Session)
		}
		for i := range 5 {
			apply(fsm.Acquire{Session: sess[0], Lock: "p/" + strconv.Itoa(i), Owner: lockinfo.OwnerID{1, byte(i)}})
			apply(fsm.Acquire{Session: sess[1+i], Lock: "q", Owner: lockinfo.OwnerID{2, byte(i)}, Wait: true})
			apply(fsm.Acquire{Session: sess[1+i], Lock: "r", Owner: lockinfo.OwnerID{3, byte(i)}, Shared: true})
		}
		get := func(path string, v any) {
			t.Helper()
			a := serve(api, "192.0.2.1:1", "GET", path, "")
			if a.code != http.StatusOK {
				t.Fatalf("GET %s: HTTP %d %s", path, a.code, a.raw)
			}
			if err := json.Unmarshal(a.raw, v); err != nil {
				t.Fatal(err)
			}
		}

		var names []string
		pages := 0
		for after := ""; ; pages++ {
			var out struct {
				Locks []LockJSON `json:"locks"`
				Next  string     `json:"next"`
			}
			get("/v1/locks?prefix=p/&limit=2&after="+url.QueryEscape(after), &out)
			for _, l := range out.Locks {
				names = append(names, l.Name)
			}
			if out.Next == "" {
				break
			}
			after = out.Next
		}
		if want := []string{"p/0", "p/1", "p/2", "p/3", "p/4"}; !slices.Equal(names, want) || pages != 2 {
			t.Errorf("locks paged: %q in %d more pages, want %q in 2", names, pages, want)
		}

		var ids []uint64
		total := 0
		for after := uint64(0); ; {
			var out struct {
				Sessions []SessionJSON `json:"sessions"`
				Total    int           `json:"total"`
				Next     uint64        `json:"next"`
			}
			get("/v1/sessions?limit=3&after="+strconv.FormatUint(after, 10), &out)
			for _, s := range out.Sessions {
				ids = append(ids, s.ID)
			}
			total = out.Total
			if out.Next == 0 {
				break
			}
			after = out.Next
		}
		if !slices.IsSorted(ids) || len(ids) != total || len(ids) < len(sess) {
			t.Errorf("sessions paged: %v, total %d", ids, total)
		}

		// pageAll reads one lock's pages, cursor param, two at a time.
		pageAll := func(lock, param string, take func(l LockJSON, first bool) (sessions []uint64, next string)) []uint64 {
			var out []uint64
			for cursor, first := "", true; first || cursor != ""; first = false {
				var l LockJSON
				get("/v1/locks/"+lock+"?waiters=2&"+param+"="+url.QueryEscape(cursor), &l)
				var got []uint64
				got, cursor = take(l, first)
				out = append(out, got...)
			}
			return out
		}
		waiters := pageAll("q", "after", func(l LockJSON, first bool) ([]uint64, string) {
			var out []uint64
			for i, w := range l.Waiters {
				if want := map[bool]int{true: i + 1, false: 0}[first]; w.Position != want {
					t.Errorf("waiter %+v: position %d, want %d", w, w.Position, want)
				}
				out = append(out, w.Session)
			}
			if l.WaiterCount != 4 {
				t.Errorf("waiter_count %d, want 4", l.WaiterCount)
			}
			return out, l.WaitersNext
		})
		shared := pageAll("r", "shared_after", func(l LockJSON, _ bool) ([]uint64, string) {
			var out []uint64
			for _, h := range l.Shared {
				out = append(out, h.Session)
			}
			if l.SharedCount != 5 {
				t.Errorf("shared_count %d, want 5", l.SharedCount)
			}
			return out, l.SharedNext
		})
		want := []uint64{uint64(sess[2]), uint64(sess[3]), uint64(sess[4]), uint64(sess[5])} // sess[1] holds q
		if !slices.Equal(waiters, want) {
			t.Errorf("waiters paged: %v, want %v", waiters, want)
		}
		if want := []uint64{uint64(sess[1]), uint64(sess[2]), uint64(sess[3]), uint64(sess[4]), uint64(sess[5])}; !slices.Equal(shared, want) {
			t.Errorf("shared grants paged: %v, want %v", shared, want)
		}

		for _, path := range []string{"/v1/locks/q?after=bogus", "/v1/locks/r?shared_after=1.0", "/v1/sessions?after=x", "/v1/sessions?after=-1"} {
			if a := serve(api, "192.0.2.1:1", "GET", path, ""); a.code != http.StatusBadRequest {
				t.Errorf("GET %s: HTTP %d %s, want 400", path, a.code, a.raw)
			}
		}
	})
}

// Listings are served a few at a time (half the CPUs): one more waits for
// a turn, is served when one frees, and gives up with its request.
func TestListingsTakeTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, api := startAPI(t)
		for range cap(api.reads) { // every turn taken
			api.reads <- struct{}{}
		}
		list := func(ctx context.Context) <-chan int {
			code := make(chan int, 1)
			go func() { code <- serveReq(api, toolRequest("GET", "/v1/locks", "").WithContext(ctx)).code }()
			return code
		}
		waiting := list(context.Background())
		synctest.Wait()
		select {
		case c := <-waiting:
			t.Fatalf("a listing was served without a turn: HTTP %d", c)
		default:
		}
		api.reads.done()
		if c := <-waiting; c != http.StatusOK {
			t.Fatalf("a listing given a turn: HTTP %d", c)
		}
		api.reads <- struct{}{}
		ctx, cancel := context.WithCancel(context.Background())
		gaveUp := list(ctx)
		synctest.Wait()
		cancel()
		if c := <-gaveUp; c != http.StatusServiceUnavailable {
			t.Fatalf("a listing whose request ended while it waited: HTTP %d", c)
		}
		for range cap(api.reads) {
			api.reads.done()
		}
	})
}
