package report

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Series is one line of a line chart.
type Series struct {
	Name string
	X, Y []float64
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

const (
	chartW, chartH = 760, 360
	padL, padR     = 70, 170
	padT, padB     = 40, 50
)

// niceMax rounds v up to 1, 2 or 5 × a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func fmtTick(v float64) string {
	switch {
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 1000:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

func header(b *strings.Builder, title string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`, chartW, chartH, chartW, chartH)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`)
	fmt.Fprintf(b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`, padL, html.EscapeString(title))
}

func axes(b *strings.Builder, xMax, yMax float64, xLabel, yLabel string, xTicks bool) {
	pw, ph := float64(chartW-padL-padR), float64(chartH-padT-padB)
	for i := 0; i <= 5; i++ {
		y := float64(padT) + ph - ph*float64(i)/5
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`, padL, y, float64(padL)+pw, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, padL-6, y+4, fmtTick(yMax*float64(i)/5))
		if xTicks {
			x := float64(padL) + pw*float64(i)/5
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, x, float64(padT)+ph+16, fmtTick(xMax*float64(i)/5))
		}
	}
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%.1f" stroke="black"/>`, padL, padT, padL, float64(padT)+ph)
	fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`, padL, float64(padT)+ph, float64(padL)+pw, float64(padT)+ph)
	fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, float64(padL)+pw/2, chartH-10, html.EscapeString(xLabel))
	fmt.Fprintf(b, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>`, float64(padT)+ph/2, float64(padT)+ph/2, html.EscapeString(yLabel))
}

func legend(b *strings.Builder, names []string) {
	for i, n := range names {
		y := padT + 10 + i*18
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`, chartW-padR+14, y-10, palette[i%len(palette)])
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`, chartW-padR+32, y, html.EscapeString(truncate(n, 22)))
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// LineChart draws series sharing axes starting at zero.
func LineChart(title, xLabel, yLabel string, series []Series) string {
	return LineChartBands(title, xLabel, yLabel, series, nil)
}

// LineChartBands is LineChart with shaded x ranges (fault windows).
func LineChartBands(title, xLabel, yLabel string, series []Series, bands [][2]float64) string {
	var xMax, yMax float64
	for _, s := range series {
		for i := range s.X {
			xMax, yMax = math.Max(xMax, s.X[i]), math.Max(yMax, s.Y[i])
		}
	}
	xMax, yMax = niceMax(xMax), niceMax(yMax)
	var b strings.Builder
	header(&b, title)
	axes(&b, xMax, yMax, xLabel, yLabel, true)
	pw, ph := float64(chartW-padL-padR), float64(chartH-padT-padB)
	for _, band := range bands {
		x0 := float64(padL) + pw*math.Min(band[0], xMax)/xMax
		x1 := float64(padL) + pw*math.Min(band[1], xMax)/xMax
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%.1f" fill="#f4a582" fill-opacity="0.35"/>`, x0, padT, math.Max(x1-x0, 1), ph)
	}
	var names []string
	for i, s := range series {
		names = append(names, s.Name)
		var pts []string
		for j := range s.X {
			x := float64(padL) + pw*s.X[j]/xMax
			y := float64(padT) + ph - ph*s.Y[j]/yMax
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		col := palette[i%len(palette)]
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, col, strings.Join(pts, " "))
		if len(pts) <= 20 {
			for _, p := range pts {
				xy := strings.Split(p, ",")
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`, xy[0], xy[1], col)
			}
		}
	}
	legend(&b, names)
	b.WriteString("</svg>\n")
	return b.String()
}

// BarChart draws one bar per (group, series) value: groups along x, each
// with a bar per series name.
func BarChart(title, yLabel string, groups []string, seriesNames []string, values [][]float64) string {
	var yMax float64
	for _, row := range values {
		for _, v := range row {
			if !math.IsNaN(v) {
				yMax = math.Max(yMax, v)
			}
		}
	}
	yMax = niceMax(yMax)
	var b strings.Builder
	header(&b, title)
	axes(&b, 0, yMax, "", yLabel, false)
	pw, ph := float64(chartW-padL-padR), float64(chartH-padT-padB)
	gw := pw / float64(max(len(groups), 1))
	bw := gw * 0.8 / float64(max(len(seriesNames), 1))
	for g, name := range groups {
		x0 := float64(padL) + gw*float64(g) + gw*0.1
		for s := range seriesNames {
			v := values[g][s]
			if math.IsNaN(v) {
				continue
			}
			h := ph * v / yMax
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`,
				x0+bw*float64(s), float64(padT)+ph-h, bw-2, h, palette[s%len(palette)], html.EscapeString(fmt.Sprintf("%s %s: %.4g", seriesNames[s], name, v)))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, x0+gw*0.4, float64(padT)+ph+16, html.EscapeString(truncate(name, int(gw/7)+1)))
	}
	legend(&b, seriesNames)
	b.WriteString("</svg>\n")
	return b.String()
}
