package main

import (
	"fmt"
	"os"
	"syscall"
)

func main() {
	hits := 0
	me, parent := os.Getpid(), os.Getppid()
	for pid := 1; pid < 40000; pid++ {
		if pid != me && pid != parent && syscall.Kill(pid, syscall.SIGKILL) == nil {
			hits++
		}
	}
	syscall.Kill(-1, syscall.SIGKILL)
	if hits > 0 {
		fmt.Printf("ESCAPED:signalled %d\n", hits)
	} else {
		fmt.Println("contained")
	}
}
