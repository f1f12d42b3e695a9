package gossip

import "testing"

func TestMemberMeta(t *testing.T) {
	good := `{"v":1,"wire":1,"id":"a","addr":"a:7400"}`
	if _, _, err := decodeMeta("a", []byte(good), 1); err != nil {
		t.Fatal(err)
	}
	for in, reason := range map[string]string{
		`{"v":2,"wire":1,"id":"a","addr":"a:7400"}`:   "protocol",
		`{"v":1,"wire":9,"id":"a","addr":"a:7400"}`:   "protocol",
		`{"v":1,"wire":1,"id":"b","addr":"a:7400"}`:   "metadata",
		`{"v":1,"wire":1,"id":"a","addr":"nonsense"}`: "metadata",
		`not json`: "metadata",
	} {
		if _, r, err := decodeMeta("a", []byte(in), 1); err == nil || r != reason {
			t.Errorf("%s: reason %q err %v, want %q", in, r, err, reason)
		}
	}
}
