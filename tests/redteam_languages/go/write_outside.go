package main

import (
	"fmt"
	"os"
)

func main() {
	escaped := false
	for _, p := range []string{"/opt/assay/pwned", "/etc/cron.d/pwned", "/usr/local/bin/pwned", "/var/pwned", "/pwned", "/tmp/../pwned"} {
		if err := os.WriteFile(p, []byte("pwned"), 0o755); err == nil {
			fmt.Println("ESCAPED:" + p)
			escaped = true
		}
	}
	if err := os.Symlink("/etc/shadow", "leak"); err == nil {
		if b, err := os.ReadFile("leak"); err == nil && len(b) > 0 {
			fmt.Println("ESCAPED:symlink")
			escaped = true
		}
	}
	if !escaped {
		fmt.Println("contained")
	}
}
