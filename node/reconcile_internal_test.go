package node

import "testing"

// A membership note's arguments are shown as key=value after its message
// in the refusals a status reports (raftlock status, the status page): they
// were glued to it, "…does not name it)memberraftlock-3addr127.0.0.1:7530".
func TestNoteDetail(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		args []any
		want string
	}{
		{"refused", nil, "refused"},
		{"not adding member yet: its identity at its Raft address is not proven (unreachable over Raft, or its certificate does not name it)",
			[]any{"member", "raftlock-3", "addr", "127.0.0.1:7530"},
			"not adding member yet: its identity at its Raft address is not proven (unreachable over Raft, or its certificate does not name it) (member=raftlock-3 addr=127.0.0.1:7530)"},
		{"m", []any{"voters", 3, "why", "two words", "empty", "", "eq", "a=b"}, `m (voters=3 why="two words" empty="" eq="a=b")`},
		{"m", []any{"member", "r1", "odd"}, "m (member=r1 odd)"},
	} {
		if got := noteDetail(tc.msg, tc.args); got != tc.want {
			t.Errorf("noteDetail(%q, %v)\n got %q\nwant %q", tc.msg, tc.args, got, tc.want)
		}
	}
}
