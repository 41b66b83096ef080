package bench

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// The plots are hand-written SVG: axes, a few ticks, one polyline (or
// set of bars) per side, baseline grey and jetgate blue.
const (
	svgW, svgH                  = 720, 360
	padL, padR, padT, padB      = 70, 20, 40, 50
	plotW, plotH                = svgW - padL - padR, svgH - padT - padB
	baselineColor, jetgateColor = "#888888", "#1f6feb"
	histogramBins               = 40
)

// series is one side's points (xs may be nil for a histogram).
type series struct {
	name   string
	xs, ys []float64
}

func timelineSeries(name string, s Sample) series {
	out := series{name: name}
	for i, y := range s.Timeline {
		out.xs = append(out.xs, float64(i+1)*tick.Seconds())
		out.ys = append(out.ys, y)
	}
	return out
}

// cdfSeries is the empirical CDF of xs, thinned to at most 500 points.
func cdfSeries(name string, xs []float64) series {
	s := slices.Clone(xs)
	slices.Sort(s)
	out := series{name: name}
	step := max(len(s)/500, 1)
	for i := 0; i < len(s); i += step {
		out.xs = append(out.xs, s[i])
		out.ys = append(out.ys, float64(i+1)/float64(len(s)))
	}
	out.xs = append(out.xs, s[len(s)-1])
	out.ys = append(out.ys, 1)
	return out
}

func bounds(vals ...[]float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		for _, x := range v {
			lo, hi = min(lo, x), max(hi, x)
		}
	}
	if math.IsInf(lo, 0) {
		return 0, 1
	}
	if hi <= lo {
		hi = lo + 1
	}
	return lo, hi
}

// frame opens an SVG with its title, axes, tick labels and legend.
func frame(b *strings.Builder, title, xlabel, ylabel string, x0, x1, y0, y1 float64, names ...string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(b, `<text x="%d" y="22" font-size="14">%s</text>`+"\n", padL, html.EscapeString(title))
	fmt.Fprintf(b, `<path d="M%d %d V%d H%d" stroke="black" fill="none"/>`+"\n", padL, padT, padT+plotH, padL+plotW)
	for k := 0; k <= 4; k++ {
		f := float64(k) / 4
		x := padL + f*plotW
		y := padT + plotH - f*plotH
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, padT+plotH+16, num(x0+f*(x1-x0)))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", padL-6, y+4, num(y0+f*(y1-y0)))
		fmt.Fprintf(b, `<path d="M%d %.1f H%d" stroke="#eeeeee"/>`+"\n", padL+1, y, padL+plotW)
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", padL+plotW/2, svgH-10, html.EscapeString(xlabel))
	fmt.Fprintf(b, `<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">%s</text>`+"\n", padT+plotH/2, padT+plotH/2, html.EscapeString(ylabel))
	for i, n := range names {
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			svgW-padR-220, padT+4+18*i, colorOf(i), svgW-padR-202, padT+14+18*i, html.EscapeString(n))
	}
}

func colorOf(i int) string {
	if i == 0 {
		return baselineColor
	}
	return jetgateColor
}

// lineChart draws each series as a polyline, y from 0.
func lineChart(title, xlabel, ylabel string, ss ...series) string {
	var xs, ys [][]float64
	names := make([]string, len(ss))
	for i, s := range ss {
		xs, ys, names[i] = append(xs, s.xs), append(ys, s.ys), s.name
	}
	x0, x1 := bounds(xs...)
	_, y1 := bounds(ys...)
	if len(ss) > 0 && strings.Contains(ylabel, "fraction") {
		y1 = 1
	}
	var b strings.Builder
	frame(&b, title, xlabel, ylabel, x0, x1, 0, y1, names...)
	for i, s := range ss {
		var pts []string
		for k := range s.xs {
			px := padL + (s.xs[k]-x0)/(x1-x0)*plotW
			py := padT + plotH - s.ys[k]/y1*plotH
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), colorOf(i))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// histogram draws each series' values in shared bins, side by side.
func histogram(title, xlabel string, ss ...series) string {
	var all [][]float64
	names := make([]string, len(ss))
	for i, s := range ss {
		all, names[i] = append(all, s.ys), s.name
	}
	x0, x1 := bounds(all...)
	width := (x1 - x0) / histogramBins
	counts := make([][]int, len(ss))
	top := 1
	for i, s := range ss {
		counts[i] = make([]int, histogramBins)
		for _, v := range s.ys {
			k := min(int((v-x0)/width), histogramBins-1)
			counts[i][k]++
			top = max(top, counts[i][k])
		}
	}
	top = (top + 3) / 4 * 4 // whole numbers at the ticks
	var b strings.Builder
	frame(&b, title, xlabel, "starts", x0, x1, 0, float64(top), names...)
	bar := float64(plotW) / histogramBins / float64(max(len(ss), 1))
	for i := range ss {
		for k, n := range counts[i] {
			if n == 0 {
				continue
			}
			h := float64(n) / float64(top) * plotH
			x := padL + float64(k)*float64(plotW)/histogramBins + float64(i)*bar
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x, padT+plotH-h, bar, h, colorOf(i))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
