//go:build race

package lease

// raceEnabled: the race detector slows the checker about tenfold, so the
// catalogue runs at ScaleRace.
const raceEnabled = true
