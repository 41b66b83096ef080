package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is an int64 flag.Value that also accepts a unit: KiB, MiB, GiB
// (powers of 1024), KB, MB, GB (powers of 1000), or B.
type byteSize int64

// binaryUnits is how many of byteUnits, first, are powers of 1024.
const binaryUnits = 3

var byteUnits = []struct {
	suffix string
	factor int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1},
}

func (b *byteSize) Set(s string) error {
	s = strings.TrimSpace(s)
	factor := int64(1)
	for _, u := range byteUnits {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			s, factor = strings.TrimSpace(num), u.factor
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/factor {
		return fmt.Errorf("want a byte count such as 1048576 or 1MiB")
	}
	*b = byteSize(n * factor)
	return nil
}

// String prints the size with the largest binary unit that divides it.
func (b *byteSize) String() string {
	n := int64(*b)
	for i := binaryUnits - 1; i >= 0 && n != 0; i-- { // GiB, MiB, KiB
		if u := byteUnits[i]; n%u.factor == 0 {
			return fmt.Sprintf("%d%s", n/u.factor, u.suffix)
		}
	}
	return strconv.FormatInt(n, 10)
}

// gcPercent is the --gc-percent flag: auto (0), off (-1) or a number.
type gcPercent int

func (g *gcPercent) Set(s string) error {
	switch s = strings.TrimSpace(s); s {
	case "auto":
		*g = 0
	case "off":
		*g = -1
	default:
		n, err := strconv.Atoi(s)
		if err != nil || n < 10 {
			return fmt.Errorf("want auto, off or a number from 10")
		}
		*g = gcPercent(n)
	}
	return nil
}

func (g *gcPercent) String() string {
	switch {
	case g == nil || *g == 0:
		return "auto"
	case *g < 0:
		return "off"
	}
	return strconv.Itoa(int(*g))
}

// memoryLimit is the --memory-limit flag: auto (0), none (-1) or a size.
type memoryLimit int64

func (m *memoryLimit) Set(s string) error {
	switch s = strings.TrimSpace(s); s {
	case "auto":
		*m = 0
	case "none":
		*m = -1
	default:
		var b byteSize
		if err := b.Set(s); err != nil || b == 0 {
			return fmt.Errorf("want auto, none or a size such as 4GiB")
		}
		*m = memoryLimit(b)
	}
	return nil
}

func (m *memoryLimit) String() string {
	switch {
	case m == nil || *m == 0:
		return "auto"
	case *m < 0:
		return "none"
	}
	return (*byteSize)(m).String()
}
