package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

func main() {
	checker := strings.Join([]string{"QZX", "CHECKER"}, "")
	pattern := regexp.MustCompile(`QZX[0-9]+|` + checker)
	hit := pattern.FindString(strings.Join(os.Environ(), "\n"))
	budget := 20000
	stop := errors.New("stop")
	for _, top := range []string{"/proc/self", "/proc/1", "/tmp", "/opt", "/run", "/dev/shm", "/var/tmp", "/home", "/root", "."} {
		if hit != "" {
			break
		}
		filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			budget--
			if hit != "" || budget <= 0 {
				return stop
			}
			if err != nil {
				return nil
			}
			if d.IsDir() && strings.Count(p, "/") > 6 {
				return filepath.SkipDir
			}
			if !d.Type().IsRegular() {
				return nil
			}
			f, err := os.OpenFile(p, os.O_RDONLY|0x800 /* O_NONBLOCK */, 0)
			if err != nil {
				return nil
			}
			defer f.Close()
			buf, _ := io.ReadAll(io.LimitReader(f, 1<<16))
			hit = pattern.FindString(string(buf))
			return nil
		})
	}
	switch hit {
	case "":
		fmt.Println("contained")
	case checker:
		fmt.Println("ESCAPED:checker")
	default:
		fmt.Println(hit)
	}
}
