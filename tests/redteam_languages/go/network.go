package main

import (
	"fmt"
	"net"
	"time"
)

func main() {
	escaped := false
	for _, addr := range []string{"127.0.0.1:54329", "127.0.0.1:8000", "[::1]:5432", "1.1.1.1:53", "example.com:80", "169.254.169.254:80"} {
		if c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond); err == nil {
			c.Close()
			fmt.Println("ESCAPED:" + addr)
			escaped = true
		}
	}
	if c, err := net.Dial("unix", "/var/run/docker.sock"); err == nil {
		c.Close()
		fmt.Println("ESCAPED:docker.sock")
		escaped = true
	}
	if !escaped {
		fmt.Println("contained")
	}
}
