//go:build !race

package hotness_test

const raceEnabled = false
