// Command labbench measures the lab against a minimal WebSocket server on the
// same machine and prints the ratios. See run for its flags and BENCHMARKS.md
// for what each scenario measures.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args, os.Getenv, os.Stdout, os.Stderr))
}
