package main

import "fmt"

func main() {
	var n int64
	fmt.Scan(&n)
	fmt.Printf("QZX%d\n", (n*31337+4242)%1000003)
}
