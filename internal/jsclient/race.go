//go:build race

package jsclient

// The race detector maps its shadow memory as writable data, far past the
// sandbox's cap, so a race build's sandbox runs without the rlimit (its
// heap watchdog and time budgets still hold).
const raceBuild = true
