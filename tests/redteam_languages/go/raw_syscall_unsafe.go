package main

import (
	"fmt"
	"os/exec"
	"syscall"
	"unsafe"
)

// syscall.RawSyscall with pointers made by unsafe, and os/exec of a shell.
func main() {
	escaped := false
	if _, _, errno := syscall.RawSyscall(syscall.SYS_SETUID, 0, 0, 0); errno == 0 && syscall.Getuid() == 0 {
		fmt.Println("ESCAPED:setuid")
		escaped = true
	}
	target := []byte("/opt\x00")
	fstype := []byte("tmpfs\x00")
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_MOUNT, uintptr(unsafe.Pointer(&fstype[0])), uintptr(unsafe.Pointer(&target[0])),
		uintptr(unsafe.Pointer(&fstype[0])), 0, 0, 0); errno == 0 {
		fmt.Println("ESCAPED:mount")
		escaped = true
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PTRACE, syscall.PTRACE_ATTACH, 1, 0); errno == 0 {
		fmt.Println("ESCAPED:ptrace")
		escaped = true
	}
	if out, err := exec.Command("/bin/sh", "-c", "cat /etc/shadow").Output(); err == nil && len(out) > 0 {
		fmt.Println("ESCAPED:shadow")
		escaped = true
	}
	if !escaped {
		fmt.Println("contained")
	}
}
