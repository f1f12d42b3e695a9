//go:build race

package fence_test

func init() { raceFlag = "-race" }
