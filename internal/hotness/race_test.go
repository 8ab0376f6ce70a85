//go:build race

package hotness_test

const raceEnabled = true
