package main

import (
	"bufio"
	"os"
)

func main() {
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	for {
		w.WriteString("gogogogogogogogogogogogogogogogogogogogogogogogogogogogogogogogo\n")
	}
}
