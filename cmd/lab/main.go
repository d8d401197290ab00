// Command lab serves the Tool-call Outcomes Lab. See run for its flags.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args, os.Getenv, os.Stdout, os.Stderr))
}
