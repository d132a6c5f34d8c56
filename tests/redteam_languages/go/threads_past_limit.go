package main

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
)

// Goroutines locked to OS threads, each blocked: one OS thread per goroutine.
func main() {
	var made int64
	for i := 0; i < 3000; i++ {
		go func() {
			runtime.LockOSThread()
			atomic.AddInt64(&made, 1)
			time.Sleep(time.Hour)
		}()
	}
	time.Sleep(500 * time.Millisecond)
	if n := atomic.LoadInt64(&made); n >= 512 {
		fmt.Printf("ESCAPED:threads=%d\n", n)
	} else {
		fmt.Printf("contained threads=%d\n", n)
	}
	os.Exit(0)
}
