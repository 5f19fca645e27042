package audit_test

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/audit"
)

// The server-knows-h audit: the papers' mixture noise leaks to a server
// that knows its own h, the default gamma shares do not.
func ExampleRun() {
	rep, err := audit.Run(context.Background(), audit.Config{Quick: true, Seed: 1, Attack: "server-h"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range rep.Results {
		fmt.Printf("%s (%s): %s\n", r.Method, r.Role, r.Status)
	}
	fmt.Println("audit passed:", rep.OK())
	// Output:
	// mixture (control): broken
	// gamma (protected): within bound
	// audit passed: true
}
