//go:build !race

package hll

const raceEnabled = false
