package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// number is what a bounded flag holds: counts, sizes, durations, ratios.
type number interface {
	~int | ~int64 | ~float64
}

// bounded is a numeric flag.Value with a minimum (and, for a few flags, a
// maximum). A value outside its range, given by flag or by its JETGATE_
// variable, is refused while the flags are read, so serve stops at start
// with an error naming the flag (or variable) and the range, instead of
// running with a value that means something else than written (issue 31
// item 5). The help shows the range (serveUsage) and docs/reference.md
// states it (TestReferenceStatesFlagRanges).
type bounded[T number] struct {
	p        *T
	min, max T
	hasMax   bool
	parse    func(string) (T, error)
	format   func(T) string
}

func (b *bounded[T]) Set(s string) error {
	v, err := b.parse(strings.TrimSpace(s))
	if err != nil {
		return err
	}
	if v != v || v < b.min || (b.hasMax && v > b.max) { // v != v: NaN
		return fmt.Errorf("must be %s", b.rangeText())
	}
	*b.p = v
	return nil
}

func (b *bounded[T]) String() string {
	if b == nil || b.p == nil {
		return ""
	}
	return b.format(*b.p)
}

// rangeText is the range as the help, the docs and the errors say it:
// "at least 1s", "1..5".
func (b *bounded[T]) rangeText() string {
	if b.hasMax {
		return b.format(b.min) + ".." + b.format(b.max)
	}
	return "at least " + b.format(b.min)
}

// ranged is a flag.Value with a range to show in the help.
type ranged interface{ rangeText() string }

// durationAtLeast defines a duration flag refusing values below min.
func durationAtLeast(fs *flag.FlagSet, p *time.Duration, name string, def, min time.Duration, usage string) {
	*p = def
	fs.Var(&bounded[time.Duration]{p: p, min: min, parse: parseDuration, format: time.Duration.String}, name, usage)
}

// durationWithin defines a duration flag refusing values outside min..max.
func durationWithin(fs *flag.FlagSet, p *time.Duration, name string, def, min, max time.Duration, usage string) {
	*p = def
	fs.Var(&bounded[time.Duration]{p: p, min: min, max: max, hasMax: true, parse: parseDuration, format: formatDuration}, name, usage)
}

// intAtLeast defines an int flag refusing values below min.
func intAtLeast(fs *flag.FlagSet, p *int, name string, def, min int, usage string) {
	*p = def
	fs.Var(&bounded[int]{p: p, min: min, parse: parseInt[int], format: strconv.Itoa}, name, usage)
}

// intWithin defines an int flag refusing values outside min..max.
func intWithin(fs *flag.FlagSet, p *int, name string, def, min, max int, usage string) {
	*p = def
	fs.Var(&bounded[int]{p: p, min: min, max: max, hasMax: true, parse: parseInt[int], format: strconv.Itoa}, name, usage)
}

// int64AtLeast defines an int64 flag refusing values below min.
func int64AtLeast(fs *flag.FlagSet, p *int64, name string, def, min int64, usage string) {
	*p = def
	fs.Var(&bounded[int64]{p: p, min: min, parse: parseInt[int64], format: formatInt64}, name, usage)
}

// sizeAtLeast defines a byte size flag (units as byteSize) refusing values
// below min.
func sizeAtLeast(fs *flag.FlagSet, p *int64, name string, def, min int64, usage string) {
	*p = def
	fs.Var(&bounded[int64]{p: p, min: min, parse: parseSignedSize, format: formatSize}, name, usage)
}

// ratioFlag defines a float flag refusing values outside 0..1.
func ratioFlag(fs *flag.FlagSet, p *float64, name string, def float64, usage string) {
	*p = def
	fs.Var(&bounded[float64]{p: p, min: 0, max: 1, hasMax: true, parse: parseFloat, format: formatFloat}, name, usage)
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 1s, 1m30s or 2h")
	}
	return d, nil
}

// formatDuration prints d as time.Duration does, without its trailing
// zero units: 876000h, not 876000h0m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok && d >= time.Minute {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

func parseInt[T ~int | ~int64](s string) (T, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || int64(T(n)) != n {
		return 0, fmt.Errorf("want an integer")
	}
	return T(n), nil
}

func formatInt64(n int64) string { return strconv.FormatInt(n, 10) }

// parseSignedSize reads a byte size that may be negative, so that the
// flag's minimum, not the unit parser, is what refuses "-1".
func parseSignedSize(s string) (int64, error) {
	var b byteSize
	abs, neg := strings.CutPrefix(s, "-")
	if err := b.Set(abs); err != nil {
		return 0, err
	}
	if neg {
		return -int64(b), nil
	}
	return int64(b), nil
}

func formatSize(n int64) string { return (*byteSize)(&n).String() }

func parseFloat(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("want a number")
	}
	return f, nil
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
