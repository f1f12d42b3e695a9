package fsm

import (
	"maps"
	"strconv"
	"testing"

	"pgregory.net/rapid"
)

// cowMap against a plain map: random sets, deletes and freezes; every
// frozen copy keeps the contents it had when frozen, whatever the live map
// does afterwards, and the live map always equals the model.
func TestCowMapFreezesAreIsolated(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		bits := uint8(rapid.IntRange(0, 4).Draw(rt, "bits"))
		m := newCowMap[string, int](bits, hashString)
		model := map[string]int{}
		type frozenCopy struct {
			m    *cowMap[string, int]
			want map[string]int
		}
		var frozen []frozenCopy
		key := rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"})
		for i, n := 0, rapid.IntRange(1, 200).Draw(rt, "ops"); i < n; i++ {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0, 1, 2:
				k, v := key.Draw(rt, "k"), rapid.Int().Draw(rt, "v")
				m.set(k, v)
				model[k] = v
			case 3, 4:
				k := key.Draw(rt, "k")
				m.del(k)
				delete(model, k)
			case 5:
				frozen = append(frozen, frozenCopy{m.freeze(), maps.Clone(model)})
			}
			checkCowMap(rt, "live", m, model)
		}
		for i, f := range frozen {
			checkCowMap(rt, "frozen copy "+strconv.Itoa(i), f.m, f.want)
		}
	})
}

func checkCowMap(rt *rapid.T, what string, m *cowMap[string, int], want map[string]int) {
	if m.len() != len(want) {
		rt.Fatalf("%s: len %d, want %d", what, m.len(), len(want))
	}
	got := maps.Collect(m.all())
	if !maps.Equal(got, want) {
		rt.Fatalf("%s: %v, want %v", what, got, want)
	}
	for k, v := range want {
		if g, ok := m.lookup(k); !ok || g != v || m.get(k) != v {
			rt.Fatalf("%s: lookup(%q) = %d, %v; want %d", what, k, g, ok, v)
		}
	}
}
