package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Write writes the run into dir (created if missing): report.md,
// results.json and the SVG plots, and returns the files written.
func Write(dir string, res *Results) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	put := func(name string, data []byte) error {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		written = append(written, path)
		return nil
	}
	js, err := res.JSON()
	if err != nil {
		return nil, err
	}
	if err := put("results.json", js); err != nil {
		return written, err
	}
	plots := res.plots()
	for _, pl := range plots {
		if err := put(pl.file, []byte(pl.svg)); err != nil {
			return written, err
		}
	}
	return written, put("report.md", []byte(res.Markdown(plots)))
}

// JSON is results.json.
func (r *Results) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	return append(b, '\n'), err
}

// Markdown is report.md: the machine, the knobs, the table and the plots.
func (r *Results) Markdown(plots []plot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# jetgate bench, %s\n\n", r.Started.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "%s\n\n", r.MachineLine())
	fmt.Fprintf(&b, "Each case ran a warm-up round, then %d rounds of %s per side, the two sides back to back in "+
		"alternating order. Numbers are medians with [min–max] over the rounds; the ratio is jetgate/baseline, "+
		"the median of each round's ratio. ✓/✗ compares the ratio's median with the target.\n\n",
		r.Params.Rounds, r.Params.Duration)
	b.WriteString(r.Table())
	if ct := r.CostTable(); ct != "" {
		b.WriteString("\n## Per-job cost\n\n")
		b.WriteString("Medians over the rounds of what one job cost the NATS server, by its own counters read before and after " +
			"each run: messages stored (the growth of every stream's last sequence, KV buckets included) and removed, messages " +
			"and bytes in and out (/varz), and CPU: the whole bench process's (getrusage: the in-process jetgate, the clients, " +
			"and the nats-server when it is embedded), with --nats-url the nats-server's, and with --url and --jetgate-pid " +
			"the separate jetgate's.\n\n")
		b.WriteString(ct)
	}
	if len(plots) > 0 {
		b.WriteString("\n## Plots\n\n")
		for _, p := range plots {
			fmt.Fprintf(&b, "![%s](%s)\n\n", p.title, p.file)
		}
	}
	return b.String()
}

// MachineLine says where and when the run ran.
func (r *Results) MachineLine() string {
	m := r.Machine
	cpu := ""
	if m.CPU != "" {
		cpu = ", " + m.CPU
	}
	gc := ""
	if m.GC != "" {
		gc = " (" + m.GC + ")"
	}
	line := fmt.Sprintf("Machine: %s, %s/%s, %d CPUs%s, %s%s; total %s.",
		m.Host, m.OS, m.Arch, m.CPUs, cpu, m.GoVersion, gc, r.Elapsed.Round(time.Second))
	if r.RemoteHTTP != "" {
		line += fmt.Sprintf(" The HTTP cases ran against the jetgate at %s, the other cases in-process.", r.RemoteHTTP)
	}
	return line
}

// Table is the markdown table of every case and metric.
func (r *Results) Table() string {
	var b strings.Builder
	b.WriteString("| scenario | case | metric | baseline | jetgate | ratio | target |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, s := range r.Scenarios {
		for _, c := range s.Cases {
			for k, m := range c.Metrics {
				target := ""
				if k == 0 && c.Target > 0 {
					mark := "✗"
					if m.Ratio != nil && m.Ratio.Median >= c.Target {
						mark = "✓"
					}
					target = fmt.Sprintf("≥ %.2f %s", c.Target, mark)
				}
				ratio := "–"
				if m.Ratio != nil {
					ratio = fmt.Sprintf("%.2f [%.2f–%.2f]", m.Ratio.Median, m.Ratio.Min, m.Ratio.Max)
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s: %s | %s: %s | %s | %s |\n", s.Name, c.Name, m.Name,
					c.Baseline, fmtStat(m.Baseline), c.Jetgate, fmtStat(m.Jetgate), ratio, target)
			}
		}
	}
	return b.String()
}

func fmtStat(s Stat) string {
	return fmt.Sprintf("%s [%s–%s]", num(s.Median), num(s.Min), num(s.Max))
}

// num prints a number with about three significant digits.
func num(x float64) string {
	switch a := math.Abs(x); {
	case a >= 1000:
		return fmt.Sprintf("%.0f", x)
	case a >= 100:
		return fmt.Sprintf("%.1f", x)
	case a >= 1 || a == 0:
		return fmt.Sprintf("%.2f", x)
	default:
		return fmt.Sprintf("%.3f", x)
	}
}

// plot is one SVG file.
type plot struct {
	file, title, svg string
}

var unsafeName = regexp.MustCompile(`[^a-z0-9]+`)

func slug(s string) string {
	return strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

// plots are the SVGs of a run: throughput over time of every case with a
// timeline (last round), the latency CDF of cases that timed jobs, and
// the start-spacing histogram of cases that measured spacing.
func (r *Results) plots() []plot {
	var out []plot
	for _, s := range r.Scenarios {
		for _, c := range s.Cases {
			if len(c.Rounds) == 0 {
				continue
			}
			last := c.Rounds[len(c.Rounds)-1]
			base := fmt.Sprintf("%s-%s", s.Name, slug(c.Name))
			if len(last.Baseline.Timeline) > 1 || len(last.Jetgate.Timeline) > 1 {
				title := fmt.Sprintf("%s, %s: throughput over time (last round)", s.Name, c.Name)
				out = append(out, plot{file: base + "-throughput.svg", title: title,
					svg: lineChart(title, "time (s)", "jobs/s", timelineSeries(c.Baseline, last.Baseline), timelineSeries(c.Jetgate, last.Jetgate))})
			}
			var bl, jl, bs, jsp []float64
			for _, rd := range c.Rounds {
				bl, jl = append(bl, rd.Baseline.Latencies...), append(jl, rd.Jetgate.Latencies...)
				bs, jsp = append(bs, rd.Baseline.Spacing...), append(jsp, rd.Jetgate.Spacing...)
			}
			if len(bl) > 0 && len(jl) > 0 && len(bs) == 0 {
				title := fmt.Sprintf("%s, %s: latency CDF", s.Name, c.Name)
				out = append(out, plot{file: base + "-latency-cdf.svg", title: title,
					svg: lineChart(title, "latency (ms)", "fraction of jobs", cdfSeries(c.Baseline, bl), cdfSeries(c.Jetgate, jl))})
			}
			if len(bs) > 0 || len(jsp) > 0 {
				title := fmt.Sprintf("%s, %s: spacing of starts", s.Name, c.Name)
				out = append(out, plot{file: base + "-spacing.svg", title: title,
					svg: histogram(title, "gap between starts (ms)", series{name: c.Baseline, ys: bs}, series{name: c.Jetgate, ys: jsp})})
			}
		}
	}
	return out
}

// CostTable is the per-job cost table of the cases that measured it (the
// cost scenario): for each side, the medians over the rounds of what one
// job cost the NATS server by its own counters, and the stored and
// removed messages by stream. It is empty when no case measured cost.
func (r *Results) CostTable() string {
	var b strings.Builder
	for _, s := range r.Scenarios {
		for _, c := range s.Cases {
			byName := map[string]MetricResult{}
			for _, m := range c.Metrics {
				byName[m.Name] = m
			}
			if _, ok := byName[storedPerJob.Name]; !ok {
				continue
			}
			if b.Len() == 0 {
				b.WriteString("| case | side | stored/job | stored by stream | removed/job | removed by stream | msgs in/job | msgs out/job | bytes in/job | bytes out/job | process CPU µs/job | nats-server CPU µs/job | jetgate CPU µs/job |\n")
				b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
			}
			for _, side := range []struct {
				name    string
				jetgate bool
				samples []Sample
				pick    func(MetricResult) Stat
			}{
				{c.Baseline, false, nil, func(m MetricResult) Stat { return m.Baseline }},
				{c.Jetgate, true, nil, func(m MetricResult) Stat { return m.Jetgate }},
			} {
				for _, rd := range c.Rounds {
					if side.jetgate {
						side.samples = append(side.samples, rd.Jetgate)
					} else {
						side.samples = append(side.samples, rd.Baseline)
					}
				}
				val := func(m Metric) string {
					mr, ok := byName[m.Name]
					if !ok {
						return "–"
					}
					return num(side.pick(mr).Median)
				}
				byStream := func(prefix string) string {
					var out []string
					for _, st := range streamMetrics(side.samples, prefix) {
						out = append(out, fmt.Sprintf("%s %s", st.Stream, num(st.Median)))
					}
					return strings.Join(out, ", ")
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Name, side.name,
					val(storedPerJob), byStream(storedStreamPrefix), val(removedPerJob), byStream(removedStreamPrefix),
					val(msgsInPerJob), val(msgsOutPerJob),
					val(bytesInPerJob), val(bytesOutPerJob), val(cpuPerJob), val(serverCPUJob), val(jetgateCPUJob))
			}
		}
	}
	return b.String()
}
