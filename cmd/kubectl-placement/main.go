// kubectl-placement is the placement-guard kubectl plugin: on PATH it runs
// as `kubectl placement`.
package main

import (
	"os"

	"github.com/placement-guard/placement-guard/internal/plugin"
)

func main() {
	os.Exit(plugin.Run())
}
